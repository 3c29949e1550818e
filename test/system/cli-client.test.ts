// A newcomer with nothing but the CLI: `npm start` (run as package.json runs it, on free ports,
// printing the demo password), then keygen, login, register and a signed GET /v1/clients/. The
// CLI's keys and signatures are cross-checked with the openssl command line.
import { execFileSync, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { keygateCli } from '../helpers/cli.js'
import { docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { freePort } from '../helpers/redis.js'

// Each CLI run is a Node.js process (about 1 s alone, several on a loaded 2-core machine): this
// file may take longer than the suite's default per-file timeout.
t.setTimeout(300_000)

const root = fileURLToPath(new URL('../..', import.meta.url))
const openssl = (args: string[], input?: string | Buffer): Buffer => execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] })

/** `npm start` exactly as package.json says, on a free port; resolves with its URL and the demo password. */
async function npmStart (t: Test, home: string): Promise<{ url: string; password: string }> {
  const script = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start
  const [command, ...args] = script.split(' ')
  t.equal(command, 'node', 'npm start runs node')
  const port = await freePort()
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: home, PORT: String(port), UPSTREAM_PORT: '0', LOG_LEVEL: 'warn' }
  })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  t.teardown(async () => {
    child.kill('SIGTERM')
    await exited
  })
  let stderr = ''
  const password = await new Promise<string>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
      const match = /password: (\S+)/.exec(stderr)
      if (match?.[1] !== undefined) resolve(match[1])
    })
    child.on('exit', () => { reject(new Error(`npm start exited: ${stderr}`)) })
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 100; i++) {
    const ready = await send(url, '/healthz').then((res) => res.status === 200, () => false)
    if (ready) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return { url, password }
}

/** The JSON-escaped signing string `call -v` prints, as bytes. */
function printedSigningString (stderr: string): Buffer {
  const line = /^\* signing string \((\d+) bytes\): (".*")$/m.exec(stderr)
  if (line === null) throw new Error(`no signing string in: ${stderr}`)
  const bytes = Buffer.from(JSON.parse(line[2] ?? '""') as string, 'utf8')
  if (bytes.length !== Number(line[1])) throw new Error('the printed length is not the string\'s')
  return bytes
}

const printedHeader = (stderr: string, name: string): string =>
  [...stderr.matchAll(/^> ([^:\n]+): (.*)$/gm)].find((m) => m[1] === name)?.[2] ?? ''

t.test('from nothing to a signed GET /v1/clients/ with the CLI alone', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'keygate-home-'))
  t.teardown(() => { rmSync(home, { recursive: true, force: true }) })
  const { url, password } = await npmStart(t, home)
  const env = { HOME: home, KEYGATE_URL: url, KEYGATE_USER: 'demo', KEYGATE_PASSWORD: password }
  const cli = async (args: string[], stdin = '', extra: Record<string, string> = {}) => await keygateCli(args, stdin, { ...env, ...extra })
  const dir = join(home, '.keygate')
  const privateFile = join(dir, 'default.pem')

  // 1. keygen: an RSA-2048 pair, the private key readable by its owner only, never overwritten
  const keygen = await cli(['keygen'])
  t.equal(keygen.code, 0, keygen.stderr)
  t.equal(statSync(privateFile).mode & 0o777, 0o600, 'private key: mode 0600')
  t.equal(statSync(dir).mode & 0o777, 0o700, 'its directory: 0700')
  t.match(openssl(['pkey', '-in', privateFile, '-text', '-noout']).toString(), /Private-Key: \(2048 bit/, 'openssl reads a 2048-bit RSA key')
  t.equal(readFileSync(join(dir, 'default.pub.pem'), 'utf8'), openssl(['pkey', '-in', privateFile, '-pubout']).toString(), 'the public file is its public half')
  const apiKey = openssl(['dgst', '-sha256', '-r'], openssl(['pkey', '-in', privateFile, '-pubout', '-outform', 'DER'])).toString().split(' ')[0] ?? ''
  t.match(keygen.stdout, `apiKey:      ${apiKey}`)
  const before = readFileSync(privateFile)
  const again = await cli(['keygen'])
  t.equal(again.code, 2)
  t.match(again.stderr, /exists; keygen never overwrites a key/)
  t.same(readFileSync(privateFile), before, 'the key is untouched')

  // 2. register: logs in (user and password from the environment) and registers the key
  const registered = await cli(['register'])
  t.equal(registered.code, 0, registered.stderr)
  t.equal(registered.stdout, `${apiKey}\n`, 'prints the apiKey, which is openssl\'s SHA-256 of the DER public key')
  t.equal(readFileSync(join(dir, 'default.apikey'), 'utf8'), `${apiKey}\n`, 'and saves it beside the key')

  // 3. the signed GET
  const listed = await cli(['call', 'GET', '/v1/clients/'])
  t.equal(listed.code, 0, listed.stderr)
  t.equal(listed.stderr, '200 OK\n')
  t.same(JSON.parse(listed.stdout), { items: [], next_cursor: null })

  // login prints a token; with it, call needs no password
  const loggedIn = await cli(['login', '--user', 'demo', '--password', password], '', { KEYGATE_USER: '', KEYGATE_PASSWORD: '' })
  t.equal(loggedIn.code, 0, loggedIn.stderr)
  const token = loggedIn.stdout.trim()
  t.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/)
  const withToken = await keygateCli(['call', 'GET', '/v1/clients/?limit=5'], '', { HOME: home, KEYGATE_URL: url, KEYGATE_TOKEN: token })
  t.equal(withToken.code, 0, withToken.stderr)

  t.test('the CLI block of docs/cli.md, run as written with npm, in a fresh home', async (t) => {
    const block = docSnippet('docs/cli.md', 'From nothing to a signed request', 'sh')
    const script = block.replace(/^export KEYGATE_USER=demo KEYGATE_PASSWORD=.*$/m, `export KEYGATE_USER=demo KEYGATE_PASSWORD='${password}'`)
    t.not(script, block, 'the block sets the password')
    const fresh = mkdtempSync(join(tmpdir(), 'keygate-readme-home-'))
    t.teardown(() => { rmSync(fresh, { recursive: true, force: true }) })
    const { promisify } = await import('node:util')
    const { execFile } = await import('node:child_process')
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: fresh, KEYGATE_URL: url }
    })
    const lines = stdout.split('\n')
    t.ok(lines.some((line) => /^apiKey: +[0-9a-f]{64} \(once registered\)$/.test(line)), 'keygen printed the apiKey')
    t.ok(lines.some((line) => /^\{"items":\[/.test(line)), 'the GET printed the list')
    t.ok(lines.some((line) => /^\{"id":"[^"]+","name":"Grace Hopper"/.test(line)), 'the POST printed the client')
    t.equal(statSync(join(fresh, '.keygate', 'default.pem')).mode & 0o777, 0o600)
  })

  t.test('call -v prints the signing string and the headers; openssl signs the same bytes alike', async (t) => {
    const body = '{"name":"Ada Lovelace","email":"ada@example.com","tax_id":"23456789"}'
    const created = await cli(['call', '-v', 'POST', '/v1/clients/', body])
    t.equal(created.code, 0, created.stderr)
    t.match(JSON.parse(created.stdout), { name: 'Ada Lovelace' })
    const signed = printedSigningString(created.stderr)
    const timestamp = printedHeader(created.stderr, 'x-api-timestamp')
    t.equal(signed.toString(), `${timestamp}POST/v1/clients/${body}`)
    t.equal(
      printedHeader(created.stderr, 'x-api-signature'),
      openssl(['dgst', '-sha256', '-sign', privateFile], signed).toString('base64'),
      'the signature openssl makes over the printed string'
    )
    t.equal(printedHeader(created.stderr, 'x-api-key'), apiKey)
    t.match(printedHeader(created.stderr, 'authorization'), /^Bearer .{10}\.\.\.\(redacted\)$/, 'the token is shortened')
    t.match(created.stderr, /^> POST \/v1\/clients\/$/m)
    t.match(created.stderr, /^< 201 Created$/m)
    const everything = created.stdout + created.stderr
    t.notOk(everything.includes('PRIVATE KEY') || everything.includes(readFileSync(privateFile, 'utf8').split('\n')[1] ?? 'x'), 'never the private key')

    // A newline in the body shows as \n; the example service's 400 makes the exit status 1.
    const bad = await cli(['call', '-v', 'POST', '/v1/clients/', '{"name":1}\n'])
    t.equal(bad.code, 1)
    t.match(bad.stderr, /^\* signing string \(\d+ bytes\): "\d{13}POST\/v1\/clients\/\{\\"name\\":1\}\\n"$/m)
    t.match(bad.stderr, /^< 400 Bad Request$/m)

    // Bodies from a file and from stdin are sent byte for byte.
    const file = join(home, 'client.json')
    writeFileSync(file, '{"name":"Zoë","email":"zoe@example.com","tax_id":"55555555"}')
    const fromFile = await cli(['call', 'POST', '/v1/clients/', `@${file}`])
    t.equal(fromFile.code, 0, fromFile.stderr)
    t.match(JSON.parse(fromFile.stdout), { name: 'Zoë' })
    const fromStdin = await cli(['call', 'POST', '/v1/clients/', '@-'], '{"name":"Grace","email":"grace@example.com","tax_id":"66666666"}')
    t.equal(fromStdin.code, 0, fromStdin.stderr)
  })

  t.test('keygate accepts openssl-made signatures with the CLI\'s key and refuses tampered ones', async (t) => {
    const ts = String(Date.now())
    const opensslSignature = (text: string): string => openssl(['dgst', '-sha256', '-sign', privateFile], text).toString('base64')
    const headers = (signature: string, timestamp = ts): Record<string, string> => ({
      authorization: `Bearer ${token}`,
      'x-api-key': apiKey,
      'x-api-timestamp': timestamp,
      'x-api-signature': signature
    })
    const good = opensslSignature(`${ts}GET/v1/clients/?limit=2`)
    t.equal((await send(url, '/v1/clients/?limit=2', { headers: headers(good) })).status, 200, 'openssl\'s signature: accepted')
    const flipped = Buffer.from(good, 'base64')
    flipped[7] = (flipped[7] ?? 0) ^ 0x10
    const body = '{"name":"Eve","email":"eve@example.com","tax_id":"77777777"}'
    const tampered: Array<[string, string, Record<string, string>, string?]> = [
      ['a bit flipped in the signature', '/v1/clients/?limit=2', headers(flipped.toString('base64'))],
      ['the query changed after signing', '/v1/clients/?limit=3', headers(good)],
      ['the timestamp changed after signing', '/v1/clients/?limit=2', headers(good, String(Number(ts) + 1))],
      [
        'the body changed after signing',
        '/v1/clients/',
        { ...headers(opensslSignature(`${ts}POST/v1/clients/${body}`)), 'content-type': 'application/json' },
        body.replace('Eve', 'Mallory')
      ]
    ]
    for (const [label, target, sent, sentBody] of tampered) {
      const res = await send(url, target, { method: sentBody === undefined ? 'GET' : 'POST', headers: sent, ...(sentBody !== undefined && { body: sentBody }) })
      t.equal(res.status, 401, label)
      t.match(res.json(), { code: 'INVALID_SIGNATURE', target, timestamp: sent['x-api-timestamp'] }, `${label}: says what it verified`)
      if (sentBody !== undefined) {
        t.equal(res.json().bodySha256, createHash('sha256').update(sentBody).digest('hex'), `${label}: the SHA-256 of the body it received`)
      }
    }
  })
})
