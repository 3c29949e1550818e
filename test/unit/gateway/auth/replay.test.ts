// Replay protection: a signed POST, PUT, PATCH or DELETE is accepted once, across every gateway
// on one Redis; a route may allow repeats; safe methods repeat freely.
import t from 'tap'
import { send } from '../../../helpers/http.js'
import { rsaKeyPair, signBase64, signedHeaders } from '../../../helpers/keys.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { routeFile } from '../../../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway, testConfig } from '../../../helpers/stack.js'

t.test('the same signed POST sent 100 times concurrently across two gateways: exactly 1 forwarded', async (t) => {
  const redisUrl = await testRedisUrl()
  const redisPrefix = uniquePrefix('replay')
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const recorder = await startRecorder(t)
  const a = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: recorder.url })
  const b = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: recorder.url })
  await addUser(a, 'alice')
  const token = await login(a.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(a.url, token, keys)

  const body = '{"name":"Ada","email":"ada@example.com","tax_id":"12345"}'
  const headers = { ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json' }
  const results = await Promise.all(Array.from({ length: 100 }, async (_, i) =>
    await send(i % 2 === 0 ? a.url : b.url, '/v1/clients/', { method: 'POST', headers, body })))
  const accepted = results.filter((r) => r.status === 200)
  const replayed = results.filter((r) => r.status === 401 && r.json().code === 'REPLAYED_REQUEST')
  t.equal(accepted.length, 1, '1 accepted')
  t.equal(replayed.length, 99, '99 refused with REPLAYED_REQUEST')
  t.equal(recorder.requests.length, 1, '1 forwarded')

  const again = await send(b.url, '/v1/clients/', {
    method: 'POST',
    headers: { ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json' },
    body
  })
  t.equal(again.status, 200, 'the same body signed anew (a new timestamp) is a new request')

  const getHeaders = signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' })
  const gets = await Promise.all(Array.from({ length: 10 }, async () => await send(a.url, '/v1/clients/', { headers: getHeaders })))
  t.same(gets.map((r) => r.status), Array(10).fill(200), 'a signed GET may repeat within the window')
})

t.test('replay per route: reject by default, allow when the route says so', async (t) => {
  const recorder = await startRecorder(t)
  const file = routeFile(t, `routes:
  - prefix: /strict/
    upstream: ${recorder.url}
    auth: signed
  - prefix: /lenient/
    upstream: ${recorder.url}
    auth: signed
    replay: allow
`)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: recorder.url, config: testConfig({ routesFile: file.path }) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(gw.url, token, keys)
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
    // a seed-signed body starts with a byte no target holds (JSON does); a signed DELETE carries none
    const body = method === 'DELETE' ? undefined : '{"b":1}'
    const strict = signedHeaders({ keys, token, method, target: '/strict/x', body })
    t.equal((await send(gw.url, '/strict/x', { method, headers: strict, body })).status, 200, `${method} once`)
    const second = await send(gw.url, '/strict/x', { method, headers: strict, body })
    t.equal(second.status, 401, `${method} twice on a strict route`)
    t.equal(second.json().code, 'REPLAYED_REQUEST')
    const lenient = signedHeaders({ keys, token, method, target: '/lenient/x', body })
    t.equal((await send(gw.url, '/lenient/x', { method, headers: lenient, body })).status, 200)
    t.equal((await send(gw.url, '/lenient/x', { method, headers: lenient, body })).status, 200, `${method} twice with replay: allow`)
  }
})

t.test('a key name that could start a signing string is refused at registration', async (t) => {
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid' })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const names = [`${Date.now()}GET/v1/clients/`, `${Date.now()}POST/v1/clients/`, '1234567890123delete/x']
  for (const name of names) {
    const keys = rsaKeyPair()
    const res = await send(gw.url, '/v1/api-keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name, publicKey: keys.publicPem, signature: signBase64(keys.privateKey, name) })
    })
    t.equal(res.status, 400, name)
    t.match(res.json(), { code: 'VALIDATION_FAILED', errors: [{ field: 'name' }] }, name)
  }
  const fine = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, fine, '2026 laptop')).status, 201, 'digits alone are fine')
})
