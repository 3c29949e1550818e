// The limiter on both stores (the embedded one and a real Redis): exactly the limit passes, a
// refused request counts nowhere, a request's limits are counted together, counters drain and
// fill again, per key, user, agent and address (IPv6 by /64); and with the store gone, what each
// onStoreDown does, counted and logged without a line per request.
import t from 'tap'
import { isGatewayError, type GatewayError } from '../../../../gateway/src/errors.js'
import { createRateLimiter, STORE_FAILURE_LOG_INTERVAL_MS, type RateLimitHeaders } from '../../../../gateway/src/limits/limiter.js'
import { rateLimit, type LimitedRoute, type RateLimit, type StoreDownPolicy } from '../../../../gateway/src/limits/rate-limit.js'
import { readUsage } from '../../../../gateway/src/limits/usage.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createRedisStore } from '../../../../gateway/src/store/redis.js'
import type { Store } from '../../../../gateway/src/store/index.js'
import { rateLimitFields } from '../../../helpers/ratelimit-fields.js'
import { deletePrefix, testRedisStore, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { startRelay } from '../../../helpers/relay.js'

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const STORES: Record<string, (t: Test) => Promise<Store>> = {
  memory: async (t) => {
    const store = createMemoryStore()
    t.teardown(async () => { await store.close() })
    return store
  },
  redis: async (t) => await testRedisStore(t, 'limiter')
}

type Entry = Parameters<typeof rateLimit>[0]
const limitedRoute = (name: string, entries: Entry[], onStoreDown: StoreDownPolicy = 'allow'): LimitedRoute =>
  ({ name, rateLimits: entries.map((entry) => rateLimit(entry, `r:${name}`)), onStoreDown })

const KEY_A = 'a'.repeat(64)
const KEY_B = 'b'.repeat(64)

/** The refusal of a check that must refuse. */
async function refusal (pending: Promise<RateLimitHeaders>): Promise<GatewayError> {
  try {
    await pending
  } catch (err) {
    if (isGatewayError(err)) return err
    throw err
  }
  throw new Error('the check passed')
}

for (const [kind, make] of Object.entries(STORES)) {
  t.test(`${kind}: exactly the limit passes, with the RateLimit fields; then 429 with Retry-After and the limit`, async (t) => {
    const store = await make(t)
    const limited: Array<[string, RateLimit]> = []
    const limiter = createRateLimiter({ store, onLimited: (route, limit) => { limited.push([route.name, limit]) } })
    const route = limitedRoute('things', [{ by: 'key', limit: 5, window: '1m' }])
    const subjects = { key: KEY_A, user: 'alice', address: '203.0.113.7' }
    for (let i = 1; i <= 5; i++) {
      const fields = rateLimitFields(await limiter.check(route, subjects))
      t.same([...fields.policies], [['key-1m', { q: 5, w: 60 }]], `request ${i}: RateLimit-Policy names the limit, its quota and window`)
      t.same([...fields.limits], [['key-1m', { r: 5 - i, t: 12 * i }]], `request ${i}: ${5 - i} left, full again in ${12 * i} s`)
    }
    const error = await refusal(limiter.check(route, subjects))
    t.equal(error.code, 'RATE_LIMITED')
    t.equal(error.statusCode, 429)
    t.equal(error.headers?.['retry-after'], '12', 'Retry-After: when one more fits (a request drains every 60 s / 5)')
    t.match(error.toProblem(), { code: 'RATE_LIMITED', policy: 'key-1m', by: 'key', limit: 5, window: '1m' }, 'the problem says which limit')
    t.same([...rateLimitFields(error.headers ?? {}).limits], [['key-1m', { r: 0, t: 12 }]], 'RateLimit on the 429: none left, for 12 s')
    t.same(limited.map(([route, limit]) => [route, limit.by]), [['things', 'key']], 'the refusal is told once, with its limit')

    const other = rateLimitFields(await limiter.check(route, { ...subjects, key: KEY_B }))
    t.same(other.limits.get('key-1m'), { r: 4, t: 12 }, 'another key counts apart')
  })

  t.test(`${kind}: a request's limits are counted together, a refused one nowhere`, async (t) => {
    const store = await make(t)
    const limiter = createRateLimiter({ store })
    const route = limitedRoute('both', [{ by: 'key', limit: 3, window: '1m' }, { by: 'user', limit: 10, window: '1h' }])
    const alice = { key: KEY_A, user: 'alice', address: '203.0.113.7' }
    for (let i = 0; i < 3; i++) await limiter.check(route, alice)
    for (let i = 0; i < 3; i++) t.equal((await refusal(limiter.check(route, alice))).code, 'RATE_LIMITED', 'the key is used up')
    const [usage] = await readUsage([route], store, { user: 'alice' })
    t.equal(usage?.used, 3, 'the user limit counted the 3 that passed, not the 3 refused')
    const fields = rateLimitFields(await limiter.check(route, { ...alice, key: KEY_B }))
    t.same([...fields.limits.keys()], ['key-1m', 'user-1h'], 'every limit that applies is reported, in the route\'s order')
    t.same(fields.limits.get('user-1h'), { r: 6, t: 1440 }, "the user's other key counts in the user's limit: 4 of 10 used")
    const newKey = { ...alice, key: 'c'.repeat(64) }
    const sharedByAll = await Promise.all(Array.from({ length: 10 }, async () => await limiter.check(route, newKey).then(() => true, () => false)))
    t.equal(sharedByAll.filter(Boolean).length, 3, 'of 10 concurrent requests, the 3 the new key allows pass')
    t.equal((await readUsage([route], store, { user: 'alice' }))[0]?.used, 7)
  })

  t.test(`${kind}: by address, IPv6 by its /64; a limit without its subject does not apply`, async (t) => {
    const store = await make(t)
    const limiter = createRateLimiter({ store })
    const route = limitedRoute('public', [{ by: 'address', limit: 2, window: '1m' }, { by: 'user', limit: 1, window: '1m' }])
    await limiter.check(route, { address: '2001:db8:1:2::1' })
    await limiter.check(route, { address: '2001:db8:1:2:ffff::9' })
    t.equal((await refusal(limiter.check(route, { address: '2001:db8:1:2::3' }))).code, 'RATE_LIMITED', 'one /64 is one client')
    const next = rateLimitFields(await limiter.check(route, { address: '2001:db8:1:3::1' }))
    t.same([...next.limits], [['address-1m', { r: 1, t: 30 }]], 'the next /64 is another; without a user, only the address limit applies')
    await limiter.check(route, { address: '198.51.100.1' })
    await limiter.check(route, { address: '::ffff:198.51.100.1' })
    t.equal((await refusal(limiter.check(route, { address: '198.51.100.1' }))).code, 'RATE_LIMITED', 'an IPv4-mapped address is its IPv4 address')
  })

  t.test(`${kind}: by agent, each directory origin its own counter; the usage read-out by agent`, async (t) => {
    const store = await make(t)
    const limiter = createRateLimiter({ store })
    const route = limitedRoute('agents', [{ by: 'agent', limit: 2, window: '1m' }, { by: 'address', limit: 100, window: '1m' }])
    const agent = { agent: 'https://agent.example', address: '203.0.113.7' }
    await limiter.check(route, agent)
    t.same([...rateLimitFields(await limiter.check(route, agent)).limits], [['agent-1m', { r: 0, t: 60 }], ['address-1m', { r: 98, t: 2 }]])
    const error = await refusal(limiter.check(route, agent))
    t.match(error.toProblem(), { code: 'RATE_LIMITED', policy: 'agent-1m', by: 'agent', limit: 2 }, 'the agent is used up')
    const other = rateLimitFields(await limiter.check(route, { ...agent, agent: 'https://other.example' }))
    t.same(other.limits.get('agent-1m'), { r: 1, t: 30 }, 'another agent, from the same address, counts apart')
    t.match(await readUsage([route], store, { agent: 'https://agent.example' }), [{ by: 'agent', policy: 'agent-1m', used: 2, remaining: 0 }])
    const unsigned = rateLimitFields(await limiter.check(route, { address: '203.0.113.8' }))
    t.same([...unsigned.limits.keys()], ['address-1m'], 'without an agent, only the address limit applies')
  })

  t.test(`${kind}: a counter drains as it goes and is full again after its window`, async (t) => {
    const store = await make(t)
    const limiter = createRateLimiter({ store })
    const route = limitedRoute('short', [{ by: 'key', limit: 2, window: '1s' }])
    const subjects = { key: KEY_A, address: '203.0.113.7' }
    await limiter.check(route, subjects)
    await limiter.check(route, subjects)
    const error = await refusal(limiter.check(route, subjects))
    t.equal(error.headers?.['retry-after'], '1', 'Retry-After in whole seconds, rounded up')
    await new Promise((resolve) => setTimeout(resolve, 600))
    t.same(rateLimitFields(await limiter.check(route, subjects)).limits.get('key-1s')?.r, 0, 'half a window later: one request more (GCRA)')
    await new Promise((resolve) => setTimeout(resolve, 1100))
    t.same(rateLimitFields(await limiter.check(route, subjects)).limits.get('key-1s'), { r: 1, t: 1 }, 'a window later: the whole limit again')
  })
}

t.test('with the store gone: allow forwards uncounted, deny answers 503; counted, and logged once per interval', async (t) => {
  const target = new URL(await testRedisUrl())
  const relay = await startRelay(t, target)
  const prefix = uniquePrefix('limiter-down')
  const store = await createRedisStore({ url: relay.url, prefix, commandTimeoutMs: 200 })
  t.teardown(async () => {
    await store.close()
    await deletePrefix(target.toString(), prefix)
  })
  let clock = 1_000_000
  const failures: string[] = []
  const lines: Array<Record<string, unknown>> = []
  const limiter = createRateLimiter({
    store,
    now: () => clock,
    onStoreFailure: (route, mode) => { failures.push(`${route.name} ${mode}`) },
    log: { warn: (fields) => { lines.push(fields as Record<string, unknown>) } }
  })
  const allow = limitedRoute('lenient', [{ by: 'key', limit: 5, window: '1m' }])
  const deny = limitedRoute('strict', [{ by: 'key', limit: 5, window: '1m' }], 'deny')
  const subjects = { key: KEY_A, address: '203.0.113.7' }
  t.ok(rateLimitFields(await limiter.check(allow, subjects)).limits.has('key-1m'), 'counted while the store answers')

  await relay.cut()
  for (let i = 0; i < 5; i++) {
    t.same(await limiter.check(allow, subjects), { ratelimit: undefined, 'ratelimit-policy': undefined },
      'allow: let through, and the RateLimit fields removed (none the gateway can vouch for)')
  }
  const denied = await refusal(limiter.check(deny, subjects))
  t.equal(denied.code, 'STORE_UNAVAILABLE')
  t.equal(denied.statusCode, 503)
  t.equal(denied.headers?.['retry-after'], '1')
  t.same(failures, [...Array.from({ length: 5 }, () => 'lenient allow'), 'strict deny'], 'every failure is counted, with the route and its mode')
  t.same(lines.map((l) => [l.route, l.onStoreDown, l.failures]), [['lenient', 'allow', 1], ['strict', 'deny', 1]],
    'one line per route and mode, not one per request')
  clock += STORE_FAILURE_LOG_INTERVAL_MS
  await limiter.check(allow, subjects)
  t.same(lines.map((l) => [l.route, l.failures]).slice(2), [['lenient', 5]], 'a line again after the interval, counting the failures it stands for')

  await relay.restore()
  for (let attempt = 0; ; attempt++) {
    const headers = await limiter.check(allow, subjects)
    if (headers.ratelimit !== undefined) {
      t.same(rateLimitFields(headers).limits.get('key-1m')?.r, 3, 'back: the uncounted requests were not counted')
      break
    }
    if (attempt > 50) throw new Error('the store did not come back')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
})
