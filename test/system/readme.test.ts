// The README tells the truth: every error code and variable the code knows is documented (and
// nothing else), and the walkthrough, run as written, works against a real gateway.
import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { ENV_VARIABLES } from '../../gateway/src/config/env.js'
import { ERRORS } from '../../gateway/src/errors.js'
import { addUser, startStack } from '../helpers/stack.js'

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
const section = (title: string): string => {
  const start = readme.indexOf(`\n## ${title}\n`)
  const end = readme.indexOf('\n## ', start + 1)
  return readme.slice(start, end === -1 ? undefined : end)
}
const firstCells = (markdown: string): string[] =>
  [...markdown.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1] as string)

t.test('every error code is in the README table, and only those', async (t) => {
  const documented = new Set(firstCells(section('Errors')))
  for (const code of Object.keys(ERRORS)) t.ok(documented.has(code), `${code} is documented`)
  const upstreamCodes = ['CLIENT_EXISTS']
  t.same([...documented].filter((c) => !(c in ERRORS) && !upstreamCodes.includes(c)), [], 'no documented code is unknown to the catalog')
  for (const [code, { status }] of Object.entries(ERRORS)) {
    t.match(section('Errors'), new RegExp(`\\| \`${code}\` \\| ${status} \\|`), `${code} is documented with status ${status}`)
  }
})

t.test('every environment variable is in the README table, and only those', async (t) => {
  const documented = firstCells(section('Configuration'))
  t.same([...documented].sort(), [...ENV_VARIABLES].sort())
})

t.test('the route files in the README are valid, and the complete example is the shipped file', async (t) => {
  const { routesFromDocument, parseRouteText } = await import('../../gateway/src/proxy/route-file.js')
  const blocks = [...section('Routes: keygate in front of your backend').matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] as string)
  t.equal(blocks.length, 2)
  for (const block of blocks) {
    const routes = routesFromDocument(parseRouteText(block, 'README'), 'README', { upstream: 'http://x', bodyLimit: 1, timeoutMs: 1 })
    t.ok(routes.length >= 2)
  }
  t.equal(blocks[1], readFileSync(new URL('../../gateway/examples/routes.yaml', import.meta.url), 'utf8'))
})

const walkthrough = /<!-- walkthrough:start -->\n```sh\n([\s\S]*?)```\n<!-- walkthrough:end -->/.exec(readme)?.[1]

interface WalkthroughRun { code: number; stdout: string; stderr: string; dir: string }

/** The walkthrough as a newcomer runs it (`bash walkthrough.sh`), in a fresh folder, with BASE and PASSWORD filled in. */
async function runWalkthrough (t: Test, base: string, password: string): Promise<WalkthroughRun> {
  if (walkthrough === undefined) throw new Error('README has no walkthrough block')
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

t.test('the CLI example creates another client than the walkthrough, so a newcomer can follow both in order', async (t) => {
  const taxIds = (text: string): string[] => [...text.matchAll(/\\?"tax_id\\?":\\?"(\d+)\\?"/g)].map((m) => m[1] as string)
  const cliBlock = /```sh\n([\s\S]*?)```/.exec(section('For client developers'))?.[1] ?? ''
  const walkthroughIds = taxIds(walkthrough ?? '')
  const cliIds = taxIds(cliBlock)
  t.ok(walkthroughIds.length > 0 && cliIds.length > 0, 'both create a client')
  // the example service refuses a second client of one user with the same tax_id (409 CLIENT_EXISTS)
  t.same(cliIds.filter((id) => walkthroughIds.includes(id)), [], 'no tax_id in both')
})

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
