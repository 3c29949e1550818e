// The portal's snippets (gateway/portal/src/snippets.ts) run as a developer runs them, against a
// real gateway on Redis in front of a recording upstream: the token from the command their comment
// shows; for each key type a key made here and registered, written as key.pem into the folder the
// snippets run in; then for each scheme, each key type and each language (bash with curl and
// openssl, python3 with cryptography, node with @keygate/client installed from its packed tarball
// as its README says) a POST with a JSON body that bash, printf and string literals could each get
// wrong, and a GET with a query of the same kind, each saved as the file its first line names and
// run with the program it names. Each must print keygate's 2xx, and the upstream must have
// received that request exactly as the page made it: the target and the body byte for byte, with
// the identity of the user and the key, in the scheme asked for. Then some POSTs run a second
// time: a fresh signature, accepted again. And for bodies of any characters (NUL, controls, quotes
// at either end, lone surrogates, U+2028), the literal each snippet writes of the body is, read by
// bash, Python and JavaScript, the bytes the page sent.
import { execFile } from 'node:child_process'
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import fc from 'fast-check'
import t from 'tap'
import { registerKey } from '../../client/src/index.js'
import { ALGORITHMS_OF_KEY_TYPE, KEY_TYPES, type KeyType } from '../../client/src/protocol/index.js'
import { snippetsFor, type SnippetRequest, type Snippets } from '../../gateway/portal/src/snippets.js'
import { installedWithApt, runs } from '../helpers/apt.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { installInScratch, packed } from '../helpers/packages.js'
import type { RecordedRequest } from '../helpers/recorder.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, PASSWORD, startTestGateway } from '../helpers/stack.js'

// the first test file of a run that needs the build makes it (~15 s), and a machine without python3's
// cryptography installs it first
t.setTimeout(300_000)

const run = promisify(execFile)
const SCHEMES = ['seed', 'rfc9421'] as const
const USER = 'portal-dev'

const LANGUAGES = ['curl', 'client', 'python'] as const satisfies ReadonlyArray<keyof Snippets>

/**
 * The programs the snippets say to run them with (bash, node, python3), as found on this machine:
 * python3 with cryptography, curl and openssl installed with apt-get when missing (as root), else
 * the test fails naming them. node is the Node.js that runs the tests.
 */
function programs (): Record<string, string> {
  const python = installedWithApt('python3 with the cryptography package', () =>
    ['python3', '/usr/bin/python3'].find((command) => runs(command, ['-c', 'import cryptography']) !== undefined), ['python3-cryptography'])
  const curl = installedWithApt('curl', () => runs('curl', ['--version']), ['curl'])
  const openssl = installedWithApt('openssl', () => runs('openssl', ['version']), ['openssl'])
  const missing = [python, curl, openssl].flatMap((found) => 'reason' in found ? [found.reason] : [])
  if (missing.length > 0) throw new Error(`The portal snippets test needs: ${missing.join('; ')}`)
  return { bash: 'bash', node: process.execPath, python3: (python as { path: string }).path }
}

/** How a snippet's first comment line says to run it: the program and the file to save it as. */
function runLine (snippet: string): [program: string, file: string] {
  const [, program = '', file = ''] = /Run: (\S+) (\S+)$/m.exec(snippet) ?? []
  return [program, file]
}

/** What a developer's shell gives the snippet: nothing of this test process (no tsx, no keygate-source condition, no proxy). */
const childEnv = (token: string): Record<string, string> =>
  ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LANG: 'C.UTF-8', KEYGATE_TOKEN: token })

interface Outcome { code: number; stdout: string; stderr: string }

async function runIn (dir: string, command: string, args: string[], env: Record<string, string>): Promise<Outcome> {
  try {
    const { stdout, stderr } = await run(command, args, { cwd: dir, env, timeout: 60_000 })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const failed = err as { code?: unknown; stdout?: string; stderr?: string; message: string }
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? failed.message }
  }
}

/** The login command the snippet's comment shows (its two lines, without their comment marks), for a user and password. */
function loginCommand (snippet: string, mark: string, username: string, password: string): string {
  const lines = snippet.split('\n')
  const at = lines.findIndex((line) => line.startsWith(`${mark}   export KEYGATE_TOKEN=`))
  if (at === -1) throw new Error(`no login command in:\n${snippet}`)
  return lines.slice(at, at + 2).map((line) => line.slice(mark.length + 1)).join('\n')
    .replace('YOUR_USERNAME', username).replace('YOUR_PASSWORD', password)
}

/** A body that bash, printf and string literals could each get wrong: quotes, $, a backtick, %, a backslash, newlines (raw, escaped and last), non-ASCII. */
const bodyOf = (run: string): string =>
  `${JSON.stringify({ name: `O'Brien $HOME \`id\` 100%s ${run}`, note: 'two\nlines', city: 'Zürich ✓ 🚀' }, null, 2)}\n`
/** A target that bash could expand ($HOME) or split (&), with a quote in the path and %2F, + and %26 in the query. */
const targetOf = (run: string): string => `/v1/clients/o'brien?q=a%2Fb+c&cost=$HOME&and=%26&run=${run}`

interface Case {
  scheme: typeof SCHEMES[number]
  keyType: KeyType
  language: typeof LANGUAGES[number]
  method: 'POST' | 'GET'
  request: SnippetRequest
  /** the folder it runs in: its file and key.pem */
  dir: string
  /** the program that runs it, and its file */
  command: [program: string, file: string]
}

t.test('the portal\'s snippets, each run as shown, for both schemes, every key type and each language', async (t) => {
  const found = programs()

  // at once: the upstream, the gateway, and @keygate/client as a user installs it, into the project the snippets run in
  const [recorder, project] = await Promise.all([
    startRecorder(t),
    packed('@keygate/client').then(async ({ path }) => await installInScratch(t, path))
  ])
  // 36 snippet runs start beside this in-process gateway at once: a Redis answer read after the
  // default 500 ms stall would be a 503 STORE_UNAVAILABLE, which is not what this test is about
  const gw = await startTestGateway(t, { store: 'redis', upstreamUrl: recorder.url, config: { redisCommandTimeoutMs: 5000 } })
  await addUser(gw, USER)

  // the token, as the snippets' comment says to get it (the same command in the three)
  const sample = snippetsFor({ baseUrl: gw.url, method: 'GET', target: '/v1/clients/', body: '', apiKey: '0'.repeat(64), keyType: 'ed25519', scheme: 'seed' })
  const login = loginCommand(sample.curl, '#', USER, PASSWORD)
  t.equal(loginCommand(sample.python, '#', USER, PASSWORD), login, 'the Python snippet shows the same login command')
  t.equal(loginCommand(sample.client, '//', USER, PASSWORD), login, 'and the client snippet')
  const loggedIn = await runIn(project, 'bash', ['-c', `set -euo pipefail\n${login}\nprintf %s "$KEYGATE_TOKEN"`], childEnv(''))
  t.equal(loggedIn.code, 0, `the login command runs (stderr: ${loggedIn.stderr})`)
  const token = loggedIn.stdout
  t.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'and gives a token')

  // a key per type, made here (RSA: from the test pool, as generating one costs up to seconds) and registered
  const keys = new Map<KeyType, { apiKey: string; pem: string }>()
  await Promise.all(KEY_TYPES.map(async (keyType) => {
    const privateKey: KeyObject = keyType === 'rsa'
      ? rsaKeyPair().privateKey
      : keyType === 'ed25519' ? generateKeyPairSync('ed25519').privateKey : generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
    const { apiKey } = await registerKey({ baseUrl: gw.url, token, name: `portal-${keyType}`, privateKey })
    keys.set(keyType, { apiKey, pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() })
  }))

  // each snippet in a folder of its own, as the file its comment names, with the key as key.pem beside it
  const cases: Case[] = SCHEMES.flatMap((scheme) => KEY_TYPES.flatMap((keyType) => LANGUAGES.flatMap((language) =>
    (['POST', 'GET'] as const).map((method): Case => {
      const name = `${language}-${scheme}-${keyType}-${method}`
      const key = keys.get(keyType) as { apiKey: string; pem: string }
      const request: SnippetRequest = {
        baseUrl: gw.url,
        method,
        target: method === 'POST' ? '/v1/clients/' : targetOf(name),
        body: method === 'POST' ? bodyOf(name) : '',
        apiKey: key.apiKey,
        keyType,
        scheme
      }
      const snippet = snippetsFor(request)[language]
      const [program, file] = runLine(snippet)
      const command = found[program]
      if (command === undefined) throw new Error(`${name}: the snippet says to run it with ${program}, which this test does not know`)
      const dir = join(project, name)
      mkdirSync(dir)
      writeFileSync(join(dir, 'key.pem'), key.pem)
      writeFileSync(join(dir, file), snippet)
      return { scheme, keyType, language, method, request, dir, command: [command, file] }
    }))))

  const started = Date.now()
  const outcomes = await Promise.all(cases.map(async ({ dir, command: [program, file] }) => await runIn(dir, program, [file], childEnv(token))))
  t.comment(`${cases.length} snippets ran in ${Date.now() - started} ms`)

  const received = (c: Case): RecordedRequest[] => recorder.requests.filter((request) => c.method === 'POST'
    ? request.body.equals(Buffer.from(c.request.body))
    : request.url === c.request.target)
  cases.forEach((c, i) => {
    const outcome = outcomes[i] as Outcome
    t.test(`${c.language}, ${c.scheme}, ${c.keyType}: ${c.method}`, async (t) => {
      t.equal(outcome.code, 0, `it ends well (stderr: ${outcome.stderr})`)
      t.match(outcome.stdout, /^200 \{"recorded":\d+\}\n$/, 'it prints keygate\'s answer: its status and body')
      const requests = received(c)
      t.equal(requests.length, 1, 'the upstream received it once')
      const [request] = requests
      if (request === undefined) return
      t.equal(request.method, c.method)
      t.equal(request.url, c.request.target, 'with the target as the page sent it, byte for byte')
      t.ok(request.body.equals(Buffer.from(c.request.body)), 'and the body')
      t.equal(request.headers['x-gateway-user'], USER, 'from the user of the token')
      t.equal(request.headers['x-gateway-key'], c.request.apiKey, 'signed by the key')
      if (c.scheme === 'seed') {
        t.equal(request.headers['x-api-key'], c.request.apiKey, 'with the X-API-* headers')
        t.equal(request.headers['signature-input'], undefined)
      } else {
        const alg = ALGORITHMS_OF_KEY_TYPE[c.keyType][0] as string
        t.match(request.headers['signature-input'], `;keyid="${c.request.apiKey}";alg="${alg}";nonce=`, `per RFC 9421, with ${alg} and a nonce`)
        t.equal(request.headers['x-api-key'], undefined)
        t.equal(request.headers['content-digest'] !== undefined, c.method === 'POST', 'a Content-Digest with the body only')
      }
      if (c.method === 'POST') t.equal(request.headers['content-type'], 'application/json', 'the body sent as JSON')
    })
  })

  t.test('a snippet run again signs anew, and keygate takes that request too', async (t) => {
    const again = cases.filter((c) => c.method === 'POST' && c.keyType === 'ed25519')
    const outcomes = await Promise.all(again.map(async ({ dir, command: [program, file] }) => await runIn(dir, program, [file], childEnv(token))))
    again.forEach((c, i) => {
      const outcome = outcomes[i] as Outcome
      t.match(outcome.stdout, /^200 /, `${c.language}, ${c.scheme}: accepted again (stderr: ${outcome.stderr})`)
      // what makes each signature new (keygate does not forward X-API-Signature): the timestamp; created and the nonce
      const signed = received(c).map((request) => request.headers[c.scheme === 'seed' ? 'x-api-timestamp' : 'signature-input'])
      t.equal(signed.length, 2, 'the upstream received both')
      t.not(signed[0], signed[1], `each signed anew: ${signed.join(' and ')}`)
    })
  })
})

/** The bytes the command a curl snippet writes its body with writes. */
function curlBodyCommand (snippet: string): string {
  const start = snippet.indexOf('\n', snippet.indexOf('# the body, byte for byte')) + 1
  return snippet.slice(start, snippet.lastIndexOf(' > "$DIR/body"\n'))
}
const pythonBodyLiteral = (snippet: string): string => /^BODY = (.*)\.encode\(\) {2}# the body's exact bytes/m.exec(snippet)?.[1] ?? ''
const clientBodyLiteral = (snippet: string): string => /^const body = (.*)$/m.exec(snippet)?.[1] ?? ''

t.test('whatever the body holds, each snippet writes the bytes the page sent', async (t) => {
  const awkward = ['\0', '\0a\0', 'a\0', '\'', '\'\'', 'x\'', '\'x', '\\', '\\\'', '\r\n', '\n', '\t%s%%\\x41', '\u2028\u2029', '\ud800', 'a\udc00b',
    '\u0085\u007f\u001b', '"\'"', '$(id)`id`$' + '{HOME}', 'é😀\ufeff', '\\u0041 \\n', '!#&*;<>|']
  const seed = Date.now()
  const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code))
  const unit = fc.oneof(fc.constantFrom(...awkward), fc.string({ unit: 'binary', maxLength: 4 }), codeUnit)
  const bodies = [...awkward, ...fc.sample(fc.string({ unit, minLength: 1, maxLength: 12 }), { numRuns: 300, seed }).filter((body) => body !== '')]
  const snippets = bodies.map((body) =>
    snippetsFor({ baseUrl: 'http://127.0.0.1:8080', method: 'POST', target: '/v1/clients/', body, apiKey: '0'.repeat(64), keyType: 'ed25519', scheme: 'seed' }))
  const expected = bodies.map((body) => Buffer.from(body, 'utf8').toString('hex'))   // UTF-8 as the browser sends it: a lone surrogate as U+FFFD

  const dir = mkdtempSync(join(tmpdir(), 'keygate-snippet-bodies-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  writeFileSync(join(dir, 'bodies.sh'), snippets.map((snippet, i) => `${curlBodyCommand(snippet.curl)} > ${i}.out`).join('\n'))
  writeFileSync(join(dir, 'bodies.py'), 'import ast\nfor line in open("literals", encoding="utf-8"):\n    print(ast.literal_eval(line).encode().hex())\n')
  writeFileSync(join(dir, 'literals'), snippets.map((snippet) => pythonBodyLiteral(snippet.python)).join('\n'))
  const found = programs()
  const [bash, py] = await Promise.all([runIn(dir, 'bash', ['bodies.sh'], childEnv('')), runIn(dir, found.python3 as string, ['bodies.py'], childEnv(''))])
  t.same([bash.code, bash.stderr, py.code, py.stderr], [0, '', 0, ''], 'bash and python read every snippet')
  const pyBytes = py.stdout.split('\n')
  const wrong = bodies.flatMap((body, i) => {
    const read = {
      curl: readFileSync(join(dir, `${i}.out`)).toString('hex'),
      python: pyBytes[i],
      // eslint-disable-next-line no-new-func -- the literal is JavaScript: evaluate it as such
      client: Buffer.from(new Function(`return ${clientBodyLiteral(snippets[i]?.client ?? '')}`)() as string, 'utf8').toString('hex')
    }
    return Object.entries(read).filter(([, hex]) => hex !== expected[i]).map(([language, hex]) => `${language} ${JSON.stringify(body)}: ${hex}`)
  })
  t.same(wrong, [], `${bodies.length} bodies (fast-check seed ${seed}): each literal is the body's UTF-8`)
})
