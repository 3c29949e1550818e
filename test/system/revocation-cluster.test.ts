// A revocation at one gateway is refused at every other gateway on the same Redis within a second,
// without a restart: the key is cached at the other gateway first, so only the pub/sub invalidation
// can make it refuse. Also after its subscriber connection was killed (it resubscribes and drops
// its cache), and when a user is removed.
import { Redis } from 'ioredis'
import t from 'tap'
import { send } from '../helpers/http.js'
import { rsaKeyPair, type TestKeyPair } from '../helpers/keys.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, startUpstreamStub, type GatewayHandle } from '../helpers/stack.js'

const PROPAGATION_LIMIT_MS = 1000
const POLL_MS = 10

/**
 * Polls B with signed GETs until it refuses the key (or, `refusedAs`, the removed user's token,
 * which the bearer stage checks first); returns the ms that took (Infinity past the limit).
 */
async function msUntilRefused (gw: GatewayHandle, keys: TestKeyPair, token: string, since: number,
  refusedAs: readonly string[] = ['UNKNOWN_API_KEY']): Promise<number> {
  for (;;) {
    const res = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
    const elapsed = Date.now() - since
    if (res.status === 401 && refusedAs.includes(String(res.json().code))) return elapsed
    if (res.status !== 200) throw new Error(`unexpected ${res.status} ${res.text}`)
    if (elapsed > PROPAGATION_LIMIT_MS) return Number.POSITIVE_INFINITY
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
}

/** The CLIENT LIST ids of the subscriber connections serving this prefix. */
async function subscriberIds (admin: Redis, prefix: string): Promise<string[]> {
  const name = `keygate-sub:${prefix}`.replace(/[^\w:.@-]/g, '_')
  const list = String(await admin.call('CLIENT', 'LIST'))
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).flatMap((line) => /(?:^|\s)id=(\d+)/.exec(line)?.[1] ?? [])
}

t.test('two gateways on one Redis: revocation reaches the other within a second', async (t) => {
  const redisPrefix = uniquePrefix('revocation')
  const redisUrl = await testRedisUrl()
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const upstreamUrl = await startUpstreamStub(t)
  const a = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl })
  const b = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl })
  await addUser(a, 'alice')
  await addUser(a, 'bob')
  const tokenA = await login(a.url, 'alice')
  const tokenB = await login(b.url, 'alice')
  const admin = new Redis(redisUrl)
  t.teardown(() => { admin.disconnect() })
  // Both gateways subscribed (one subscriber connection each, the test's stores included).
  for (let i = 0; (await subscriberIds(admin, redisPrefix)).length < 2 && i < 200; i++) await new Promise((resolve) => setTimeout(resolve, 10))

  const cachedAtB = async (keys: TestKeyPair): Promise<void> => {
    t.equal((await registerKey(a.url, tokenA, keys)).status, 201)
    t.equal((await sendSigned(b.url, { keys, token: tokenB, method: 'GET', target: '/v1/clients/' })).status, 200, 'B has the key in its cache')
  }

  t.test('DELETE at A: B refuses within 1 s', async (t) => {
    const keys = rsaKeyPair()
    await cachedAtB(keys)
    const since = Date.now()
    t.equal((await send(a.url, `/v1/api-keys/${keys.apiKey}`, { method: 'DELETE', headers: { authorization: `Bearer ${tokenA}` } })).status, 204)
    const ms = await msUntilRefused(b, keys, tokenB, since)
    t.ok(ms < PROPAGATION_LIMIT_MS, `B refused the revoked key ${ms} ms after the DELETE at A`)
    t.equal((await sendSigned(a.url, { keys, token: tokenA, method: 'GET', target: '/v1/clients/' })).status, 401, 'A refuses it too')
  })

  t.test("after B's subscriber connection is killed, it resubscribes and revocations reach it again", async (t) => {
    const before = await subscriberIds(admin, redisPrefix)
    const keys = rsaKeyPair()
    await cachedAtB(keys)
    for (const id of before) await admin.call('CLIENT', 'KILL', 'ID', id)
    // Wait for both subscribers to come back (new connection ids), then cache the key at B anew.
    for (let i = 0; i < 300; i++) {
      const now = await subscriberIds(admin, redisPrefix)
      if (now.length === before.length && now.every((id) => !before.includes(id))) break
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    t.equal((await subscriberIds(admin, redisPrefix)).filter((id) => before.includes(id)).length, 0, 'the old subscriber connections are gone')
    t.equal((await sendSigned(b.url, { keys, token: tokenB, method: 'GET', target: '/v1/clients/' })).status, 200, 'B serves the key again, cached')
    const since = Date.now()
    t.equal((await send(a.url, `/v1/api-keys/${keys.apiKey}`, { method: 'DELETE', headers: { authorization: `Bearer ${tokenA}` } })).status, 204)
    const ms = await msUntilRefused(b, keys, tokenB, since)
    t.ok(ms < PROPAGATION_LIMIT_MS, `B refused the key ${ms} ms after the revocation`)
  })

  t.test('a revocation made while the subscriber is away still reaches B (it drops its cache on resubscribing)', async (t) => {
    const keys = rsaKeyPair()
    await cachedAtB(keys)
    const ids = await subscriberIds(admin, redisPrefix)
    const since = Date.now()
    for (const id of ids) await admin.call('CLIENT', 'KILL', 'ID', id)
    // Revoked straight in Redis right after the kill: the announcement finds no subscriber.
    t.equal((await a.store.revokeKey(keys.apiKey, new Date().toISOString())).outcome, 'revoked')
    const ms = await msUntilRefused(b, keys, tokenB, since)
    t.ok(ms < PROPAGATION_LIMIT_MS, `B refused the key ${ms} ms after the revocation`)
  })

  t.test('removing a user at A: B refuses their keys within 1 s', async (t) => {
    const bobA = await login(a.url, 'bob')
    const bobB = await login(b.url, 'bob')
    const keys = rsaKeyPair()
    t.equal((await registerKey(a.url, bobA, keys)).status, 201)
    t.equal((await sendSigned(b.url, { keys, token: bobB, method: 'GET', target: '/v1/clients/' })).status, 200)
    const since = Date.now()
    t.same((await a.store.removeUser('bob')).revokedKeys, [keys.apiKey])
    // the removed user's token is refused first (INVALID_TOKEN): it acts for nobody now
    const ms = await msUntilRefused(b, keys, bobB, since, ['INVALID_TOKEN'])
    t.ok(ms < PROPAGATION_LIMIT_MS, `B refused the removed user's token and key ${ms} ms after the removal`)
    // and the key was revoked with the user, as the store tells every gateway
    t.ok((await b.store.getKey(keys.apiKey))?.revokedAt, 'the key is revoked in the store')
    await t.rejects(login(b.url, 'bob'), /401/, 'and the user cannot log in')
  })
})
