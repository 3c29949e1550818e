// The CLI's keygen --type and call --scheme rfc9421, in this process through runCli: keygen's files
// parse as the key type asked for, and call sends, to a real socket (a node:http server here that
// records the request), headers that verify: RFC 9421 with http-message-signatures and node:crypto,
// the seed scheme with an Ed25519 and a P-256 key with node:crypto.
import { createHash, createPrivateKey, createPublicKey, type KeyObject, verify } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { createVerifier, httpbis } from 'http-message-signatures'
import t from 'tap'
import { runCli } from '../../../../gateway/src/cli/keygate.js'

interface Recorded { method: string; url: string; headers: IncomingHttpHeaders; body: Buffer }

/** A server that records each request and answers with `answer` (status and JSON body). */
type Answer = (request: Recorded) => [number, unknown]

async function recorder (t: { teardown: (fn: () => void) => void }, answer: Answer): Promise<{ url: string; requests: Recorded[] }> {
  const requests: Recorded[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) }
      requests.push(request)
      const [status, body] = answer(request)
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.close() })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests }
}

async function cli (args: string[]): Promise<{ stdout: string; stderr: string; error: Error | undefined }> {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let out = ''
  let err = ''
  stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  stderr.on('data', (chunk: Buffer) => { err += chunk.toString() })
  try {
    await runCli(args, { stdin: process.stdin, stdout: stdout as unknown as NodeJS.WriteStream, stderr: stderr as unknown as NodeJS.WriteStream, env: {} })
    return { stdout: out, stderr: err, error: undefined }
  } catch (error) {
    return { stdout: out, stderr: err, error: error as Error }
  }
}

const dir = mkdtempSync(join(tmpdir(), 'keygate-cli-types-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
const ALG = { rsa: 'rsa-v1_5-sha256', ed25519: 'ed25519', p256: 'ecdsa-p256-sha256' } as const
const BODY = '{"name":"Zoë Ada","email":"ada@example.com","tax_id":"12345678"}'
const keys: Record<string, { file: string; publicKey: KeyObject; apiKey: string }> = {}

t.test('keygen --type makes PKCS#8 and SPKI PEM files of that type', async (t) => {
  for (const [type, nodeType, curve] of [['rsa', 'rsa', undefined], ['ed25519', 'ed25519', undefined], ['p256', 'ec', 'prime256v1']] as const) {
    const made = await cli(['keygen', ...(type === 'rsa' ? [] : ['--type', type]), '--out', dir, '--name', type])
    t.equal(made.error, undefined, made.error?.message ?? 'keygen')
    const file = join(dir, `${type}.pem`)
    const pem = readFileSync(file, 'utf8')
    t.match(pem, /^-----BEGIN PRIVATE KEY-----\n/, `${type}: PKCS#8`)
    const privateKey = createPrivateKey(pem)
    const publicKey = createPublicKey(readFileSync(join(dir, `${type}.pub.pem`)))
    t.equal(privateKey.asymmetricKeyType, nodeType)
    t.equal(publicKey.asymmetricKeyType, nodeType)
    if (curve !== undefined) t.equal(privateKey.asymmetricKeyDetails?.namedCurve, curve)
    if (type === 'rsa') t.equal(privateKey.asymmetricKeyDetails?.modulusLength, 2048)
    const apiKey = createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex')
    t.match(made.stdout, new RegExp(`private key: .*${type}\\.pem \\(${type}, mode 0600`))
    t.match(made.stdout, new RegExp(`apiKey: +${apiKey} `))
    keys[type] = { file, publicKey, apiKey }
  }
  const wrong = await cli(['keygen', '--type', 'dsa', '--out', dir])
  t.match(wrong.error?.message, /--type "dsa": give one of rsa, ed25519, p256/)
})

t.test('call --scheme rfc9421 sends Signature-Input, Signature and Content-Digest that verify', async (t) => {
  const server = await recorder(t, () => [201, { id: 1 }])
  for (const type of ['rsa', 'ed25519', 'p256'] as const) {
    const key = keys[type] as { file: string; publicKey: KeyObject; apiKey: string }
    for (const components of [undefined, 'path'] as const) {
      const args = ['call', 'POST', '/v1/clients/?x=1', BODY, '--scheme', 'rfc9421', '--key', key.file, '--token', 'tok', '--url', server.url, '-v']
      const ran = await cli([...args, ...(components === undefined ? [] : ['--components', components])])
      t.equal(ran.error, undefined, ran.error?.message ?? 'call')
      t.match(ran.stderr, /\* signature base \(\d+ bytes\):\n\* {3}"@method": POST\n/)
      const request = server.requests.at(-1) as Recorded
      t.equal(request.body.toString(), BODY, 'the body as given')
      t.equal(request.headers['content-digest'], `sha-256=:${createHash('sha256').update(request.body).digest('base64')}:`)
      t.equal(request.headers['x-api-signature'], undefined)
      const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]))
      const verified = await httpbis.verifyMessage({
        keyLookup: async (params) =>
          params.keyid === key.apiKey ? { id: key.apiKey, algs: [ALG[type]], verify: createVerifier(key.publicKey, ALG[type]) } : null,
        requiredFields: ['@method', 'content-digest', 'content-type', ...(components === 'path' ? ['@path', '@query'] : ['@target-uri'])]
      }, { method: request.method, url: server.url + request.url, headers })
      t.equal(verified, true, `${type} ${components ?? 'target-uri'}: http-message-signatures verifies`)
      // by hand: the base -v printed, verified with node:crypto against the Signature header
      const base = ran.stderr.split('\n').filter((line) => line.startsWith('*   ')).map((line) => line.slice(4)).join('\n')
      t.match(base, components === 'path' ? /"@path": \/v1\/clients\/\n"@query": \?x=1\n/ : /"@target-uri": http:\/\/127\.0\.0\.1:\d+\/v1\/clients\/\?x=1\n/)
      const signature = Buffer.from(/^sig1=:([^:]+):$/.exec(headers.signature ?? '')?.[1] ?? '', 'base64')
      const ok = verify(type === 'ed25519' ? null : 'sha256', Buffer.from(base), { key: key.publicKey, dsaEncoding: 'ieee-p1363' }, signature)
      t.ok(ok, `${type}: node:crypto`)
    }
  }
})

t.test('call with the seed scheme and an Ed25519 or P-256 key: X-API-Signature verifies with node:crypto', async (t) => {
  const server = await recorder(t, () => [200, {}])
  for (const type of ['ed25519', 'p256'] as const) {
    const key = keys[type] as { file: string; publicKey: KeyObject; apiKey: string }
    const ran = await cli(['call', 'PUT', '/v1/clients/7', BODY, '--key', key.file, '--token', 'tok', '--url', server.url])
    t.equal(ran.error, undefined, ran.error?.message ?? 'call')
    const { headers, body } = server.requests.at(-1) as Recorded
    t.equal(headers['x-api-key'], key.apiKey)
    const data = Buffer.concat([Buffer.from(`${String(headers['x-api-timestamp'])}PUT/v1/clients/7`), body])
    const signature = Buffer.from(String(headers['x-api-signature']), 'base64')
    t.ok(verify(type === 'ed25519' ? null : 'sha256', data, { key: key.publicKey, dsaEncoding: 'der' }, signature), `${type}: node:crypto`)
  }
})

t.test('an RFC 9421 INVALID_SIGNATURE answer: the CLI names the lines of the base that differ', async (t) => {
  const server = await recorder(t, (request) => [401, {
    code: 'INVALID_SIGNATURE',
    detail: 'The signature does not verify',
    signatureBaseSha256: '0'.repeat(64),
    signatureBase: ['"@method": POST', `"@target-uri": http://gateway.internal${request.url}`]
  }])
  const ran = await cli(['call', 'GET', '/v1/clients/', '--scheme', 'rfc9421', '--key', keys.ed25519?.file ?? '', '--token', 'tok', '--url', server.url])
  t.ok(ran.error !== undefined, 'exit 1')
  t.match(ran.stderr, /keygate verified another signature base than this CLI signed;\n {2}signed: {3}"@method": GET\n {2}signed: {3}"@target-uri": http:\/\/127\.0\.0\.1:\d+\/v1\/clients\/\n/)
  t.match(ran.stderr, / {2}verified: "@target-uri": http:\/\/gateway\.internal\/v1\/clients\/\n/)
  const wrong = await cli(['call', 'GET', '/v1/clients/', '--scheme', 'cavage', '--key', keys.ed25519?.file ?? '', '--token', 'tok', '--url', server.url])
  t.match(wrong.error?.message, /--scheme "cavage": give seed/)
  const misplaced = await cli(['call', 'GET', '/v1/clients/', '--components', 'path', '--key', keys.ed25519?.file ?? '', '--token', 'tok', '--url', server.url])
  t.match(misplaced.error?.message, /--components is for --scheme rfc9421/)
})
