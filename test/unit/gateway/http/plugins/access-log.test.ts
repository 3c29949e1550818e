// One log line per request, with the denial reason; never a token, password, signature or key.
import { Writable } from 'node:stream'
import t from 'tap'
import { loggerOptions } from '../../../../../gateway/src/app.js'
import { send } from '../../../../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../../../../helpers/keys.js'
import { PASSWORD, addUser, login, registerKey, sendSigned, startStack } from '../../../../helpers/stack.js'

t.test('access log', async (t) => {
  const lines: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(...chunk.toString().split('\n').filter(Boolean)); done() } })
  const gw = await startStack(t, { store: 'memory', logger: { ...loggerOptions('info') as object, stream } })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(gw.url, token, keys, 'alice key')
  const ok = await sendSigned(gw.url, {
    keys,
    token,
    method: 'POST',
    target: '/v1/clients/',
    body: JSON.stringify({ name: 'A', email: 'a@example.com', tax_id: '12345' })
  })
  t.equal(ok.status, 201)
  const badSignature = { ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' }), 'x-api-signature': 'QUJD' }
  const deniedResponse = await send(gw.url, '/v1/clients/', { headers: badSignature })
  t.equal(deniedResponse.status, 401)
  await send(gw.url, '/v1/auth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'alice', password: 'a wrong password' })
  })
  await send(gw.url, '/v1/auth/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":"alice","password":"broken json' })

  const requestLines = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request')
  t.same(requestLines.map((l) => [l.method, l.url, l.status, l.reason]), [
    ['POST', '/v1/auth/token', 200, undefined],
    ['POST', '/v1/api-keys', 201, undefined],
    ['POST', '/v1/clients/', 201, undefined],
    ['GET', '/v1/clients/', 401, 'INVALID_SIGNATURE'],
    ['POST', '/v1/auth/token', 401, 'INVALID_CREDENTIALS'],
    ['POST', '/v1/auth/token', 400, 'VALIDATION_FAILED']
  ], 'one line per request, with the denial reason code')
  t.match(requestLines[2], { user: 'alice', apiKey: keys.apiKey, reqId: String, route: '/v1/clients/', ip: '127.0.0.1' })
  // A signed request refused at the last stage: the line names the request, who, which key and why.
  const denied = requestLines[3] ?? {}
  t.match(denied, { reqId: String, user: 'alice', apiKey: keys.apiKey, reason: 'INVALID_SIGNATURE', route: '/v1/clients/', status: 401 })
  t.equal(deniedResponse.headers['x-request-id'], denied.reqId, 'reqId is the x-request-id the client got')
  t.equal(new Set(requestLines.map((l) => l.reqId)).size, requestLines.length, 'each request has its own id')

  const everything = lines.join('\n')
  const secrets: Array<[string, string]> = [
    ['the bearer token', token],
    ['the token signature part', token.split('.')[2] ?? ''],
    ['the password', PASSWORD],
    ['the wrong password', 'a wrong password'],
    ['a request signature', signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' })['x-api-signature'] ?? ''],
    ['the bad signature', 'QUJD'],
    ['the private key', keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString().split('\n')[1] ?? '']
  ]
  for (const [what, secret] of secrets) {
    t.ok(secret.length > 3, `${what} is a real string`)
    t.notOk(everything.includes(secret), `no log line holds ${what}`)
  }
})

t.test('the configured redaction censors secrets anything might log', async (t) => {
  const lines: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(chunk.toString()); done() } })
  const gw = await startStack(t, { store: 'memory', logger: { ...loggerOptions('info') as object, stream } })
  gw.app.log.info({
    req: { headers: { authorization: 'Bearer secret-token', 'x-api-signature': 'secret-sig' } },
    body: { password: 'secret-pw' },
    privateKey: 'secret-key'
  }, 'careless')
  const line = lines.find((l) => l.includes('careless')) ?? ''
  t.ok(line.length > 0)
  for (const secret of ['secret-token', 'secret-sig', 'secret-pw', 'secret-key']) t.notOk(line.includes(secret), secret)
  t.match(line, /\[redacted\]/)
})
