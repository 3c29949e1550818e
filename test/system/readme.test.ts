// The README's walkthrough, run as written, works against a real gateway, and with a wrong
// password shows the refused login and goes no further. Its "In front of your own backend", run as
// written in the checkout, puts a gateway in front of a real backend, which a signed request
// reaches and an unsigned one does not. (What the other pages say is checked in
// test/unit/doc-pages.test.ts.)
import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { compiled, ROOT } from '../helpers/build.js'
import { docBlocks, docPage, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { interruptGroup, startCommand } from '../helpers/listening.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, startStack } from '../helpers/stack.js'
import { TEST_ENV } from '../helpers/test-env.js'

// the own-backend test starts npm and tsx, seconds each on a loaded 2-core machine
t.setTimeout(300_000)

const readme = docPage('README.md')
/** the one sh block of "Try it in two minutes", which the page also marks (walkthrough:start/end) */
const walkthrough = docSnippet('README.md', 'Try it in two minutes', 'sh')
t.equal(/<!-- walkthrough:start -->\n```sh\n([\s\S]*?)```\n<!-- walkthrough:end -->/.exec(readme)?.[1], walkthrough, 'the marked block is the section\'s')

interface WalkthroughRun { code: number; stdout: string; stderr: string; dir: string }

/** The walkthrough as a newcomer runs it (`bash walkthrough.sh`), in a fresh folder, with BASE and PASSWORD filled in. */
async function runWalkthrough (t: Test, base: string, password: string): Promise<WalkthroughRun> {
  const script = walkthrough
    .replace(/^BASE=.*$/m, `BASE=${base}`)
    .replace(/^PASSWORD=.*$/m, `PASSWORD='${password}'`)
  t.not(script, walkthrough, 'the block sets BASE and PASSWORD')
  const dir = mkdtempSync(join(tmpdir(), 'keygate-readme-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  writeFileSync(join(dir, 'walkthrough.sh'), script)
  try {
    const { stdout, stderr } = await promisify(execFile)('bash', ['walkthrough.sh'], { cwd: dir })
    return { code: 0, stdout, stderr, dir }
  } catch (err) {
    const failed = err as { code?: unknown; stdout?: string; stderr?: string }
    if (typeof failed.code !== 'number') throw err
    return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '', dir }
  }
}

t.test('the walkthrough works as written', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const password = 'walkthrough-password-1'
  await addUser(gw, 'demo', password)
  const run = await runWalkthrough(t, gw.url, password)
  t.equal(run.code, 0, run.stderr)
  const [apiKeyLine, created, listed] = run.stdout.trim().split('\n')
  t.match(apiKeyLine, /^apiKey: [0-9a-f]{64}$/)
  t.match(JSON.parse(created ?? '{}'), { id: String, name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '12345678' })
  t.same(JSON.parse(listed ?? '{}').items.map((c: { name: string }) => c.name), ['Ada Lovelace'])
})

t.test('the walkthrough with a wrong password shows the refused login and goes no further', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'demo', 'walkthrough-password-1')
  const run = await runWalkthrough(t, gw.url, 'not-the-password')
  t.equal(run.code, 1, 'the script fails')
  const answer = /^login refused: (.*)$/m.exec(run.stderr)?.[1]
  t.ok(answer, `it says the login was refused: ${run.stderr}`)
  t.match(JSON.parse(answer ?? '{}'), { status: 401, code: 'INVALID_CREDENTIALS' }, 'with keygate\'s answer')
  t.equal(run.stdout, '', 'no later step printed anything')
  t.notMatch(run.stdout + run.stderr, /INVALID_TOKEN|MISSING_TOKEN/, 'no later step met the missing token')
  t.same(readdirSync(run.dir).sort(), ['walkthrough.sh'], 'no key pair was made: step 2 never ran')
})

t.test('in front of your own backend: the route file and the command put keygate before a real backend, which a signed request reaches', async (t) => {
  const section = 'In front of your own backend'
  const routesYaml = docSnippet('README.md', section, 'yaml')
  const [start = '', requests = ''] = docBlocks('README.md', section, 'sh')
  const dir = mkdtempSync(join(tmpdir(), 'keygate-own-backend-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })

  // the backend, on a free port where the page says 3000; it answers 200 to whatever reaches it
  const backend = await startRecorder(t)
  const routes = routesYaml.replace('http://127.0.0.1:3000', backend.url)
  t.not(routes, routesYaml, 'the backend\'s URL filled in')
  writeFileSync(join(dir, 'routes.yaml'), routes)
  // the command in the checkout, as the page says, with the route file this test wrote; its port a
  // free one where the page's is 8080 (PORT=0 in the environment)
  const command = start.trim().replace('KEYGATE_ROUTES=routes.yaml ', `KEYGATE_ROUTES=${join(dir, 'routes.yaml')} `)
  t.not(command, start.trim(), 'the route file\'s path filled in')
  t.match(command, / npm run start:gateway$/)
  const gateway = await startCommand('bash', ['-c', command], {}, ROOT, { detached: true })
  t.teardown(async () => { await interruptGroup(gateway.child) })

  // the CLI's lines with bash, stopping at the first that fails; npm run keygate -- is the compiled
  // command (the same CLI, faster to start), KEYGATE_URL the gateway's, HOME a folder of its own
  const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(await compiled('gateway/src/cli/keygate.ts'))}`
  const script = requests.replaceAll('npm run keygate --', cli)
  t.not(script, requests, 'npm run keygate is the compiled CLI')
  t.equal(/KEYGATE_PASSWORD='([^']*)'/.exec(requests)?.[1], /KEYGATE_BOOTSTRAP_USERS='alice:([^']*)'/.exec(start)?.[1],
    'the password the requests use is the user\'s the command creates')
  const { stdout } = await promisify(execFile)('bash', ['-c', `set -e\n${script}`], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: dir, KEYGATE_URL: gateway.url, ...TEST_ENV }
  })
  const apiKey = readFileSync(join(dir, '.keygate', 'my-backend.apikey'), 'utf8').trim()
  t.match(apiKey, /^[0-9a-f]{64}$/, 'the key registered')
  t.equal(backend.requests.length, 1, 'one request reached the backend')
  const [received] = backend.requests
  t.match(received, { method: 'GET', url: '/' }, 'the signed GET /')
  t.equal(received?.headers['x-gateway-user'], 'alice', 'with x-gateway-user: alice, as the page says')
  t.equal(received?.headers['x-gateway-key'], apiKey, 'and the key that signed it')
  t.match(stdout, /^\{"recorded":1\}$/m, 'the backend\'s answer printed')

  const unsigned = await send(gateway.url, '/')
  t.equal(unsigned.status, 401, 'an unsigned request is refused')
  t.equal(backend.requests.length, 1, 'and never reaches the backend')
})
