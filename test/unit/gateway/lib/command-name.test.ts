// Usage lines and hints name the command the way the user ran it.
import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { keygateCommand } from '../../../../gateway/src/lib/command-name.js'

t.test('the installed command is keygate; under npm run keygate it is npm run keygate --', async (t) => {
  const saved = process.env.npm_lifecycle_event
  t.teardown(() => {
    if (saved === undefined) delete process.env.npm_lifecycle_event
    else process.env.npm_lifecycle_event = saved
  })
  delete process.env.npm_lifecycle_event
  t.equal(keygateCommand(), 'keygate')
  process.env.npm_lifecycle_event = 'test'
  t.equal(keygateCommand(), 'keygate', 'another npm script (a test run) is not the keygate script')
  process.env.npm_lifecycle_event = 'keygate'
  t.equal(keygateCommand(), 'npm run keygate --')
})

t.test('npm run keygate -- --help shows the npm form', async (t) => {
  const { stdout } = await promisify(execFile)('npm', ['run', '-s', 'keygate', '--', '--help'], { cwd: new URL('../../../..', import.meta.url) })
  t.match(stdout, /^usage: npm run keygate -- serve\n/)
})
