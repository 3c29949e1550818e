// The gateway process: `npm run start:gateway` (and, through the CLI, `keygate serve`). With
// KEYGATE_WORKERS > 1 this file runs twice over: as the cluster's primary, and in each worker it
// forks (process/cluster.ts forks this file), where it starts the gateway exactly as a single
// process does.
import { isMainModule } from './lib/is-main-module.js'
import { serve } from './process/serve.js'
import { exitWithStartupError } from './process/signals.js'

if (isMainModule(import.meta.url)) serve().catch(exitWithStartupError)
