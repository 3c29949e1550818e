// The README's walkthrough, run as written, works against a real gateway, and with a wrong
// password shows the refused login and goes no further. (What the other pages say is checked in
// test/unit/doc-pages.test.ts.)
import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { docPage, docSnippet } from '../helpers/docs.js'
import { addUser, startStack } from '../helpers/stack.js'

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
