// GET /v1/time: the clock the timestamp check uses, public and never cached; timestamp errors say
// the same time and the allowed skew.
import t from 'tap'
import { MAX_TIMESTAMP_SKEW_MS } from '@keygate/client/protocol'
import { RESERVED_PATHS } from '../../../../../gateway/src/proxy/route-rules.js'
import { send } from '../../../../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../../../../helpers/keys.js'
import { addUser, login, registerKey, sendSigned, startStack } from '../../../../helpers/stack.js'

t.test('GET /v1/time answers the gateway\'s clock in milliseconds, without credentials, not cacheable', async (t) => {
  let clock = 1_790_000_000_000
  const gw = await startStack(t, { store: 'memory', now: () => clock })
  const res = await send(gw.url, '/v1/time')
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  t.equal(res.headers['cache-control'], 'no-store')
  t.same(res.json(), { serverTime: 1_790_000_000_000 })
  clock += 1234
  t.same((await send(gw.url, '/v1/time')).json(), { serverTime: 1_790_000_001_234 }, 'every answer reads the clock anew')
  const withBadToken = await send(gw.url, '/v1/time', { headers: { authorization: 'Bearer nonsense' } })
  t.equal(withBadToken.status, 200, 'credentials are neither needed nor checked')
  t.equal((await send(gw.url, '/v1/time', { method: 'POST' })).status, 404, 'GET only')
})

t.test('the real clock: within the time of the request', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const before = Date.now()
  const { serverTime } = (await send(gw.url, '/v1/time')).json<{ serverTime: number }>()
  t.ok(Number.isSafeInteger(serverTime) && serverTime >= before && serverTime <= Date.now(), `${serverTime} is now, in milliseconds`)
})

t.test('timestamp errors carry serverTime and maxSkewMs; a client that uses /v1/time gets in', async (t) => {
  // The client's clock is 20 minutes behind the gateway's.
  const skew = 20 * 60 * 1000
  const gw = await startStack(t, { store: 'memory', now: () => Date.now() + skew })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)

  const late = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
  t.equal(late.status, 401)
  const problem = late.json<{ code: string; serverTime: number; maxSkewMs: number; detail: string }>()
  t.equal(problem.code, 'TIMESTAMP_OUT_OF_RANGE')
  t.equal(problem.maxSkewMs, MAX_TIMESTAMP_SKEW_MS)
  t.ok(Math.abs(problem.serverTime - (Date.now() + skew)) < 60_000, 'serverTime is the gateway\'s clock')
  t.match(problem.detail, /GET \/v1\/time/)

  const { serverTime } = (await send(gw.url, '/v1/time')).json<{ serverTime: number }>()
  const offset = serverTime - Date.now()
  const corrected = await send(gw.url, '/v1/clients/', {
    headers: signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/', timestamp: Date.now() + offset })
  })
  t.equal(corrected.status, 200, 'signed with the offset from /v1/time: accepted')
})

t.test('a route file may not take /v1/time', async (t) => {
  t.ok(RESERVED_PATHS.includes('/v1/time'))
})
