// `npm start`: keygate in front of the example clients service (gateway/src/process/demo.ts, which
// `keygate demo` runs too).
import { demo } from '../gateway/src/process/demo.js'
import { exitWithStartupError } from '../gateway/src/process/signals.js'

demo().catch(exitWithStartupError)
