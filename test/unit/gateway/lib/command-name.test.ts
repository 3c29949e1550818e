// Usage lines and hints name the command the way the user runs it: `npm run keygate --` in the
// checkout, `keygate` where the package is installed (test/system/keygate-package.test.ts runs
// the installed command and reads its hints).
import t from 'tap'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { keygateCommand, RUNS_FROM_SOURCES } from '../../../../gateway/src/lib/command-name.js'

const root = new URL('../../../..', import.meta.url)

t.test('the installed command is keygate; from the checkout\'s sources, or under npm run keygate, it is npm run keygate --', async (t) => {
  t.equal(RUNS_FROM_SOURCES, true, 'these tests run the sources, as the checkout does')
  t.equal(keygateCommand({}, true), 'npm run keygate --', 'the checkout, however it was started (npm start, npm run keygate, node)')
  t.equal(keygateCommand({}, false), 'keygate', 'the package, run as its bin')
  t.equal(keygateCommand({ npm_lifecycle_event: 'npx' }, false), 'keygate', 'npx keygate')
  t.equal(keygateCommand({ npm_lifecycle_event: 'keygate' }, false), 'npm run keygate --', 'a project\'s own npm script named keygate')
})

t.test('in the checkout, npm run keygate -- names the npm form in its usage and its hints', async (t) => {
  const run = async (args: string[]): Promise<string> => (await promisify(execFile)('npm', ['run', '-s', 'keygate', '--', ...args], { cwd: root })).stdout
  t.match(await run(['--help']), /^usage: npm run keygate -- serve\n/)
  const out = mkdtempSync(join(tmpdir(), 'keygate-keys-'))
  t.teardown(() => { rmSync(out, { recursive: true, force: true }) })
  t.match(await run(['keygen', '--out', out]), /^next: {8}npm run keygate -- register --key /m, 'keygen: the next step')
})
