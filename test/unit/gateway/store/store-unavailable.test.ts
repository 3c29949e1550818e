// The store cannot be reached: 503 STORE_UNAVAILABLE with Retry-After, fast, and nothing
// unverified forwarded. Redis sits behind a TCP relay the test can cut.
import t from 'tap'
import { send } from '../../../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../../../helpers/keys.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { startRelay } from '../../../helpers/relay.js'
import { addUser, login, registerKey, startTestGateway } from '../../../helpers/stack.js'

t.test('Redis goes away', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('down')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const relay = await startRelay(t, new URL(redisUrl))
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'redis', redisPrefix: prefix, upstreamUrl: recorder.url, config: { redisUrl: relay.url } })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)
  const before = recorder.requests.length

  await relay.cut()
  const unknownKey = { ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' }), 'x-api-key': 'e'.repeat(64) }
  const started = Date.now()
  const res = await send(gw.url, '/v1/clients/', { headers: unknownKey })
  t.equal(res.status, 503)
  t.equal(res.json().code, 'STORE_UNAVAILABLE')
  t.equal(res.headers['retry-after'], '1')
  t.ok(Date.now() - started < 5000, 'answered without waiting on the dead store')

  const loginRes = await send(gw.url, '/v1/auth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'alice', password: 'whatever it is' })
  })
  t.equal(loginRes.status, 503)
  t.equal(loginRes.json().code, 'STORE_UNAVAILABLE')

  // the store methods of issue #20: a dead Redis is STORE_UNAVAILABLE, counted, as for every other
  const errors = gw.store.errors
  await t.rejects(gw.store.pruneRevokedKeys(Date.now(), 100), { code: 'STORE_UNAVAILABLE' }, 'pruneRevokedKeys')
  await t.rejects(gw.store.backfillKeyIndex(() => undefined), { code: 'STORE_UNAVAILABLE' }, 'backfillKeyIndex')
  await t.rejects(gw.store.rememberOnce('replay:down', 60_000), { code: 'STORE_UNAVAILABLE' }, 'rememberOnce')
  t.equal(gw.store.errors, errors + 3, 'each counted in keygate_store_errors_total')

  const ready = await send(gw.url, '/readyz')
  t.equal(ready.status, 503)
  t.equal((await send(gw.url, '/healthz')).status, 200, 'the process itself still serves')
  t.equal(recorder.requests.length, before, 'nothing was forwarded')
})
