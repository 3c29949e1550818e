// The client commands' mistakes, each named with what to do, and their exit statuses: 2 for a
// wrong command line, 1 when keygate (or the network) said no, 141 when the reader of the answer
// closed the pipe.
import { generateKeyPairSync } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { keygateCli, keygatePiped } from '../../../helpers/cli.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { freePort } from '../../../helpers/redis.js'
import { addUser, login, PASSWORD, startStack } from '../../../helpers/stack.js'
import { registerKey } from '../../../../client/src/index.js'

// Each CLI run is a Node.js process (about 1 s alone, several on a loaded 2-core machine): this
// file may take longer than the suite's default per-file timeout.
t.setTimeout(300_000)

t.test('mistakes are named, with what to do', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'demo')
  const home = mkdtempSync(join(tmpdir(), 'keygate-home-'))
  const other = mkdtempSync(join(tmpdir(), 'keygate-nohome-'))
  t.teardown(() => {
    rmSync(home, { recursive: true, force: true })
    rmSync(other, { recursive: true, force: true })
  })
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  mkdirSync(join(home, '.keygate'))
  writeFileSync(join(home, '.keygate', 'default.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 })
  await registerKey({ baseUrl: gw.url, token: await login(gw.url, 'demo'), name: 'default', privateKey })
  const url = gw.url
  const closedPort = await freePort()
  const env = { HOME: home, KEYGATE_URL: url, KEYGATE_USER: 'demo', KEYGATE_PASSWORD: PASSWORD }
  const ecFile = join(other, 'ec.pem')
  writeFileSync(ecFile, generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey.export({ type: 'pkcs8', format: 'pem' }))
  const encryptedFile = join(other, 'encrypted.pem')
  writeFileSync(encryptedFile, privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }))

  const cases: Array<[string, string[], Record<string, string>, number, RegExp]> = [
    ['no target', ['call', 'GET'], {}, 2, /^usage:/],
    ['an absolute URL as target', ['call', 'GET', `${url}/v1/clients/`], {}, 2, /target: must be the origin-form request target/],
    ['a GET with a body', ['call', 'GET', '/v1/clients/', '{}'], {}, 2, /body: a GET request carries no body/],
    ['an unknown flag', ['call', '--nope', 'GET', '/v1/clients/'], {}, 2, /Unknown option '--nope'/],
    ['a flag of another command', ['keygen', '--url', url], {}, 2, /keygen takes no --url/],
    ['no key', ['call', 'GET', '/v1/clients/'], { HOME: other }, 2, /no private key at .*default\.pem: make one with `keygate keygen`/],
    ['no user and no token', ['register'], { KEYGATE_USER: '' }, 2, /no user to log in as: give --user NAME \(or KEYGATE_USER\), or a token/],
    ['an EC key', ['call', 'GET', '/v1/clients/', '--key', ecFile], {}, 2, /^key file .*ec\.pem: is an EC P-384 key; keygate takes RSA, Ed25519 and EC P-256 keys/m],
    ['an encrypted key', ['register', '--key', encryptedFile], {}, 2, /key file .*encrypted\.pem: is an encrypted private key .*decrypt it first/],
    ['a wrong password', ['call', 'GET', '/v1/clients/', '--password', 'wrong password'], {}, 1, /^401 INVALID_CREDENTIALS: /],
    ['a registered key again', ['register'], {}, 1, /^409 DUPLICATE_KEY: /],
    [
      'nothing listening',
      ['call', 'GET', '/v1/clients/', '--url', `http://127.0.0.1:${closedPort}`],
      {},
      1,
      new RegExp(`^keygate: cannot reach http://127\\.0\\.0\\.1:${closedPort} \\(.*ECONNREFUSED.*\\): is keygate running`)
    ]
  ]
  for (const [label, args, extra, code, message] of cases) {
    const res = await keygateCli(args, '', { ...env, ...extra })
    t.equal(res.code, code, `${label}: exit ${code}`)
    t.match(res.stderr, message, label)
  }
  t.notOk(existsSync(join(other, '.keygate')), 'a failed call creates nothing')
})

t.test('on INVALID_SIGNATURE, call names what differs from what it signed (a proxy re-serialised the JSON)', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'demo')
  const home = mkdtempSync(join(tmpdir(), 'keygate-home-'))
  t.teardown(() => { rmSync(home, { recursive: true, force: true }) })
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  mkdirSync(join(home, '.keygate'))
  writeFileSync(join(home, '.keygate', 'default.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 })
  const token = await login(gw.url, 'demo')
  await registerKey({ baseUrl: gw.url, token, name: 'default', privateKey })

  // A "helpful" proxy in the way: parses JSON bodies and pretty-prints them.
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = chunks.length === 0 ? undefined : JSON.stringify(JSON.parse(Buffer.concat(chunks).toString()), null, 1)
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([name]) => !['host', 'content-length', 'connection'].includes(name))
      ) as Record<string, string>
      fetch(`${gw.url}${req.url ?? '/'}`, { method: req.method ?? 'GET', headers, ...(body !== undefined && { body }) }).then(async (upstream) => {
        res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'text/plain' })
        res.end(Buffer.from(await upstream.arrayBuffer()))
      }, (err: Error) => { res.writeHead(502).end(err.message) })
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { proxy.close() })
  const { port } = proxy.address() as AddressInfo

  const res = await keygateCli(['call', 'POST', '/v1/clients/', '{"name":"Ada","email":"ada@example.com","tax_id":"12345678"}'], '', {
    HOME: home, KEYGATE_URL: `http://127.0.0.1:${port}`, KEYGATE_TOKEN: token
  })
  t.equal(res.code, 1)
  t.match(JSON.parse(res.stdout), { code: 'INVALID_SIGNATURE', target: '/v1/clients/' })
  t.match(res.stderr, /^401 Unauthorized\nkeygate verified another signing string than this CLI signed; differing: bodyLength, bodySha256, signingStringLength, signingStringSha256\n$/)
})

t.test('a reader that leaves early (| head -c 100) ends call quietly, with the exit status a shell gives SIGPIPE', async (t) => {
  // an answer far larger than a pipe holds: call is still writing it when head has its 100 bytes and leaves
  const answer = JSON.stringify({ items: 'x'.repeat(1 << 20) })
  const recorder = await startRecorder(t, { body: answer })
  const gw = await startStack(t, { store: 'memory', upstreamUrl: recorder.url })
  await addUser(gw, 'demo')
  const home = mkdtempSync(join(tmpdir(), 'keygate-home-'))
  t.teardown(() => { rmSync(home, { recursive: true, force: true }) })
  const { privateKey } = generateKeyPairSync('ed25519')
  mkdirSync(join(home, '.keygate'))
  writeFileSync(join(home, '.keygate', 'default.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 })
  const token = await login(gw.url, 'demo')
  await registerKey({ baseUrl: gw.url, token, name: 'default', privateKey })

  const res = await keygatePiped(['call', 'GET', '/v1/clients/'], ['head', '-c', '100'], { HOME: home, KEYGATE_URL: gw.url, KEYGATE_TOKEN: token })
  t.equal(recorder.requests.length, 1, 'the request was sent and answered')
  t.equal(res.readerStdout.toString(), answer.slice(0, 100), 'head printed the answer\'s first 100 bytes')
  t.equal(res.stderr, '200 OK\n', 'call printed its status line, and no error or stack trace')
  t.equal(res.code, 141, 'exit status 141 (128 + SIGPIPE), as cat or git log | head end')
})

t.test('-v escapes the signing string so that every byte is visible', async (t) => {
  const { escapeBytes } = await import('../../../../gateway/src/cli/client-commands.js')
  const cases: Array<[string, Buffer, string]> = [
    ['a trailing newline', Buffer.from('1790000000000GET/v1/clients/\n'), '"1790000000000GET/v1/clients/\\n"'],
    ['CR, tab and quotes', Buffer.from('a\r\tb"c\\'), '"a\\r\\tb\\"c\\\\"'],
    ['UTF-8 shown as text', Buffer.from('{"name":"Zoë"}'), '"{\\"name\\":\\"Zoë\\"}"'],
    ['a BOM, a no-break space and a NUL', Buffer.from('\uFEFF{"a":"\u00a0"}\u0000'), '"\\ufeff{\\"a\\":\\"\\u00a0\\"}\\u0000"'],
    ['bytes that are not UTF-8, one escape each', Buffer.from([0x41, 0xff, 0x0a, 0xc3, 0x28, 0x22]), '"A\\xff\\x0a\\xc3(\\""']
  ]
  for (const [label, bytes, shown] of cases) t.equal(escapeBytes(bytes), shown, label)
})
