// The recipes of docs/recipes.md run as a reader runs them: the page's command for each language
// (shell, Python, Go, Java), once per scheme with all three key types, against one real gateway (on
// Redis) in front of the example clients service. Each logs in, registers a key of its own, and
// sends a signed POST and a signed GET with a query: what it prints are keygate's answers, and the
// service must have received each request with the identity of that user and key, signed in that
// scheme. The page shows the Python recipe whole: its block is the file, byte for byte, and what
// runs is the block read from the page; the other languages' excerpts are their files' own lines.
// Without KEYGATE_PASSWORD each recipe stops before logging in, saying what the page says. The
// toolchains are Debian packages, installed when missing (as root), else the test fails naming
// them; .ci/run installs them too.
import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { IncomingHttpHeaders } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { ALGORITHMS_OF_KEY_TYPE, KEY_TYPES, type KeyType } from '../../client/src/protocol/index.js'
import { buildUpstreamApp } from '../../upstream-stub/src/app.js'
import { installedWithApt, runs, type Found } from '../helpers/apt.js'
import { docBlocks, docSection, docSnippet } from '../helpers/docs.js'
import { addUser, PASSWORD, startTestGateway } from '../helpers/stack.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const PAGE = 'docs/recipes.md'
const SCHEMES = ['seed', 'rfc9421'] as const
type Scheme = typeof SCHEMES[number]
const run = promisify(execFile)
// A machine without the toolchains (not set up by .ci/run) installs them first: minutes, once.
t.setTimeout(600_000)

/** `java`, when a JDK of 17 or later is installed: `javac` names its version (a JRE, without it, cannot run a source file). */
function jdk (): string | undefined {
  const javac = spawnSync('javac', ['-version'], { encoding: 'utf8' })
  return Number(/^javac (\d+)/m.exec(`${javac.stdout ?? ''}${javac.stderr ?? ''}`)?.[1] ?? 0) >= 17 ? 'java' : undefined
}

interface Language {
  /** the user its recipe logs in as, and the first word of its keys' names */
  name: string
  /** its file in docs/recipes/ */
  file: string
  /** the page's section that shows its code, and the language of that code block */
  section: [heading: string, lang: string]
  /** the block is the whole program (else an excerpt of its file) */
  whole?: true
  /** the program that runs in place of the page's first word (found, or installed with what it needs) */
  program: () => Found
}

const LANGUAGES: Language[] = [
  {
    name: 'shell',
    file: 'recipe.sh',
    section: ['Shell: curl and openssl', 'sh'],
    program: () => installedWithApt('curl', () => runs('curl', ['--version']) && 'bash', ['curl'])
  },
  {
    name: 'python',
    file: 'recipe.py',
    section: ['Python', 'python'],
    whole: true,
    program: () => installedWithApt('python3 with the cryptography package', () =>
      ['python3', '/usr/bin/python3'].find((python) => runs(python, ['-c', 'import cryptography']) !== undefined), ['python3-cryptography'])
  },
  {
    name: 'go',
    file: 'recipe.go',
    section: ['Go', 'go'],
    program: () => installedWithApt('Go', () => runs('go', ['version']) ?? runs('/usr/lib/go/bin/go', ['version']), ['golang-go'])
  },
  { name: 'java', file: 'Recipe.java', section: ['Java', 'java'], program: () => installedWithApt('JDK 17 or later', jdk, ['default-jdk-headless']) }
]

/** The page's command of each recipe file: its words after the program, with the scheme in place of `seed`. */
function pageCommands (): Map<string, (scheme: Scheme) => string[]> {
  return new Map(docSnippet(PAGE, 'Running them', 'sh').split('\n').filter((line) => line.includes('docs/recipes/')).map((line) => {
    const words = line.split(' ')
    const file = words.find((word) => word.startsWith('docs/recipes/'))?.slice('docs/recipes/'.length) ?? ''
    return [file, (scheme: Scheme) => words.slice(1).map((word) => word === 'seed' ? scheme : word)]
  }))
}

/** The one block of a language's section. */
function shownBlock ({ section: [heading, lang] }: Language): string {
  return docSnippet(PAGE, heading, lang)
}

/**
 * The command of a language's recipe in a scheme: the page's, with the program found in place of
 * its first word; `go run` (a build, then a run) as the program built once, run once per scheme. A
 * recipe the page shows whole runs from the page's block, saved in `dir` under its file's name.
 */
async function commandOf (language: Language, program: string, dir: string): Promise<(scheme: Scheme) => string[]> {
  const page = pageCommands().get(language.file)
  if (page === undefined) throw new Error(`${PAGE} does not say how to run ${language.file}`)
  let words = page
  if (language.whole === true) {
    const saved = join(dir, language.file)
    writeFileSync(saved, shownBlock(language))
    words = (scheme) => page(scheme).map((word) => word === `docs/recipes/${language.file}` ? saved : word)
  }
  const [subcommand, file = ''] = words('seed')
  if (subcommand !== 'run') return (scheme) => [program, ...words(scheme)]
  const binary = join(dir, 'recipe')
  await run(program, ['build', '-o', binary, join(ROOT, file)], { cwd: dir })
  return (scheme) => [binary, ...words(scheme).slice(2)]
}

/** What the example service received, recorded before it answered. */
interface Received { method: string; url: string; headers: IncomingHttpHeaders }

/** One line a recipe prints: `[scheme keyType] what: status answer`. */
interface Printed { scheme: string; keyType: string; what: string; status: number; answer: string }

function printedLines (stdout: string): Printed[] {
  return [...stdout.matchAll(/^\[(\S+) (\S+)\] (.+?): (\d{3}) (.*)$/gm)]
    .map(([, scheme, keyType, what, status, answer]) => ({ scheme, keyType, what, status: Number(status), answer } as Printed))
}

interface Run { language: string; scheme: Scheme; code: number; stdout: string; stderr: string; ms: number }

/** One run of a recipe: its exit code and what it printed, a failure too. */
async function runRecipe (language: Language, scheme: Scheme, words: (scheme: Scheme) => string[], env: NodeJS.ProcessEnv): Promise<Run> {
  const [command = '', ...args] = words(scheme)
  const from = Date.now()
  try {
    const { stdout, stderr } = await run(command, args, { cwd: ROOT, env, maxBuffer: 16 << 20 })
    return { language: language.name, scheme, code: 0, stdout, stderr, ms: Date.now() - from }
  } catch (err) {
    const failed = err as { code?: unknown; stdout?: string; stderr?: string }
    if (typeof failed.code !== 'number') throw err
    return { language: language.name, scheme, code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '', ms: Date.now() - from }
  }
}

t.test('the page shows the recipes\' own lines: the Python recipe whole', async (t) => {
  for (const { file, section: [heading, lang], whole } of LANGUAGES) {
    const shown = docBlocks(PAGE, heading, lang)
    t.equal(shown.length, 1, `${file}: one block of its code under "${heading}"`)
    const text = readFileSync(join(ROOT, 'docs', 'recipes', file), 'utf8')
    if (whole === true) t.equal(shown[0], text, `${file}: the block is the whole file`)
    else t.ok(text.includes(shown[0] ?? '\0'), `${file}: the block is the file's own lines`)
  }
})

t.test('every recipe, in every language, for both schemes and every key type, against one gateway', async (t) => {
  const commands = pageCommands()
  t.same([...commands.keys()].sort(), LANGUAGES.map((language) => language.file).sort(), 'the page says how to run each recipe')
  for (const [file, command] of commands) t.same(command('seed').slice(-4), ['seed', ...KEY_TYPES], `${file}: with every key type`)
  const programs = LANGUAGES.map((language) => ({ language, found: language.program() }))
  const missing = programs.flatMap(({ found }) => 'reason' in found ? [found.reason] : [])
  if (missing.length > 0) throw new Error(`The recipes test needs: ${missing.join('; ')}`)

  const received: Received[] = []
  const upstream = await buildUpstreamApp({ logger: false })
  upstream.addHook('onRequest', async (request) => { received.push({ method: request.method, url: request.url, headers: request.headers }) })
  const upstreamUrl = await upstream.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(async () => { await upstream.close() })
  // The gateway shares this process with eight recipe runs starting at once (javac, go build): a
  // Redis answer read after the default 500 ms stall would be a 503 STORE_UNAVAILABLE, which is
  // not what this test is about (test/system/faults.test.ts is)
  const gw = await startTestGateway(t, { store: 'redis', upstreamUrl, config: { redisCommandTimeoutMs: 5000 } })
  for (const { name } of LANGUAGES) await addUser(gw, name)

  const dir = mkdtempSync(join(tmpdir(), 'keygate-recipes-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const started = Date.now()
  // Every run at once: each language's two runs (one per scheme) share its user, the languages do not.
  const runnable = new Map<Language, (scheme: Scheme) => string[]>()
  const results = await Promise.all(programs.map(async ({ language, found }): Promise<Run[]> => {
    const words = await commandOf(language, (found as { path: string }).path, dir)
    runnable.set(language, words)
    const env = { ...process.env, KEYGATE_URL: gw.url, KEYGATE_USER: language.name, KEYGATE_PASSWORD: PASSWORD }
    return await Promise.all(SCHEMES.map(async (scheme) => await runRecipe(language, scheme, words, env)))
  }))
  t.comment(`all recipes ran in ${Date.now() - started} ms: ${results.flat().map((r) => `${r.language} ${r.scheme} ${r.ms} ms`).join(', ')}`)

  for (const recipe of results.flat()) {
    t.test(`${recipe.language}, ${recipe.scheme}`, async (t) => {
      t.equal(recipe.code, 0, `the recipe ends well (stderr: ${recipe.stderr})`)
      const printed = printedLines(recipe.stdout)
      for (const keyType of KEY_TYPES) {
        t.test(keyType, async (t) => {
          const name = `${recipe.language}-${recipe.scheme}-${keyType}`
          const lines = printed.filter((line) => line.scheme === recipe.scheme && line.keyType === keyType)
          t.same(lines.map((line) => line.what), [`register ${name}`, 'POST /v1/clients/', 'GET /v1/clients/?limit=10'],
            `it printed keygate's three answers:\n${recipe.stdout}`)
          const [registered, created, listed] = lines
          if (registered === undefined || created === undefined || listed === undefined) return

          t.equal(registered.status, 201, registered.answer)
          const apiKey = JSON.parse(registered.answer).apiKey as string
          t.match(apiKey, /^[0-9a-f]{64}$/, 'registration answers the apiKey')
          t.equal(created.status, 201, created.answer)
          const client = JSON.parse(created.answer) as { id: string; name: string }
          t.equal(client.name, 'Ada Lovelace', 'the service created the client')
          t.equal(listed.status, 200, listed.answer)
          t.ok((JSON.parse(listed.answer) as { items: Array<{ id: string }> }).items.some((item) => item.id === client.id),
            'and lists it to the same user')

          const byKey = received.filter((request) => request.headers['x-gateway-key'] === apiKey)
          t.same(byKey.map((request) => `${request.method} ${request.url}`), ['POST /v1/clients/', 'GET /v1/clients/?limit=10'],
            'the service received the POST and the GET with the query, as signed, from this key only')
          for (const request of byKey) {
            t.equal(request.headers['x-gateway-user'], recipe.language, 'as the user who logged in')
            t.equal(request.headers['x-gateway-key-name'], name, 'with the key registered under its name')
            if (recipe.scheme === 'seed') {
              t.equal(request.headers['x-api-key'], apiKey, 'signed with the X-API-* headers')
              t.equal(request.headers['signature-input'], undefined)
            } else {
              const alg = ALGORITHMS_OF_KEY_TYPE[keyType as KeyType][0] as string
              t.match(request.headers['signature-input'], `;keyid="${apiKey}";alg="${alg}";`, `signed per RFC 9421 with ${alg}`)
              t.equal(request.headers['x-api-key'], undefined)
              t.equal(request.headers['content-digest'] !== undefined, request.method === 'POST', 'a Content-Digest with the body only')
            }
          }
        })
      }
    })
  }

  t.test('without KEYGATE_PASSWORD, each recipe stops before logging in and says so, as the page does', async (t) => {
    const said = /`(KEYGATE_PASSWORD is not set: [^`]+)`/.exec(docSection(PAGE, 'Running them'))?.[1]
    t.ok(said, 'the page quotes the message')
    // KEYGATE_USER unset (demo), and nothing listening at KEYGATE_URL: a recipe that tried to log in would say otherwise
    const env: NodeJS.ProcessEnv = { ...process.env, KEYGATE_URL: 'http://127.0.0.1:1' }
    delete env.KEYGATE_PASSWORD
    delete env.KEYGATE_USER
    const runs = await Promise.all([...runnable].flatMap(([language, words]) => [
      runRecipe(language, 'seed', words, env).then((recipe) => ({ recipe, as: 'unset' })),
      runRecipe(language, 'seed', words, { ...env, KEYGATE_PASSWORD: '' }).then((recipe) => ({ recipe, as: 'empty' }))
    ]))
    t.equal(runs.length, 2 * LANGUAGES.length)
    for (const { recipe, as } of runs) {
      // the last line: a JVM may say first that it picked up JAVA_TOOL_OPTIONS
      const last = recipe.stderr.trimEnd().split('\n').at(-1)
      t.same([recipe.code, last, recipe.stdout], [2, said, ''], `${recipe.language}, ${as}: exit code 2 and the page's words`)
    }
  })
})
