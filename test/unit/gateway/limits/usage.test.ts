// The usage read-out (what the admin API's GET /v1/usage answers): every per-key or per-user
// limit of the routes, with its current count, read without counting, on both stores.
import t from 'tap'
import { createRateLimiter } from '../../../../gateway/src/limits/limiter.js'
import { readUsage } from '../../../../gateway/src/limits/usage.js'
import { parseRouteText, routesFromDocument } from '../../../../gateway/src/proxy/route-file.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import type { Store } from '../../../../gateway/src/store/index.js'
import { testRedisStore } from '../../../helpers/redis.js'

const ROUTES = `routes:
  - name: things-read
    prefix: /v1/things/
    upstream: http://127.0.0.1:8081
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: key, limit: 10, window: 10s }
      - { by: user, limit: 1000, window: 30d, bucket: monthly }
      - { by: address, limit: 100, window: 1s }
  - name: things-write
    prefix: /v1/things/
    upstream: http://127.0.0.1:8081
    auth: signed
    methods: [POST]
    rateLimits:
      - { by: key, limit: 2, window: 1m }
      - { by: user, limit: 1000, window: 30d, bucket: monthly }
  - name: reports
    prefix: /reports/
    upstream: http://127.0.0.1:8081
    auth: bearer
    rateLimits:
      - { by: user, limit: 1000, window: 30d, bucket: monthly }
  - name: open
    prefix: /open/
    upstream: http://127.0.0.1:8081
    auth: public
`
const routes = routesFromDocument(parseRouteText(ROUTES, 'routes.yaml'), 'routes.yaml', { upstream: 'http://127.0.0.1:8081', bodyLimit: 1024, timeoutMs: 1000 })
const [read, write] = routes as [typeof routes[number], typeof routes[number]]
const KEY = 'a'.repeat(64)

const STORES: Record<string, (t: { teardown: (fn: () => unknown) => void }) => Promise<Store>> = {
  memory: async () => createMemoryStore(),
  redis: async (t) => await testRedisStore(t, 'usage')
}

for (const [kind, make] of Object.entries(STORES)) {
  t.test(`${kind}: a key's and a user's limits with their counts, read without counting`, async (t) => {
    const store = await make(t)
    const limiter = createRateLimiter({ store })
    const subjects = { key: KEY, user: 'alice', address: '203.0.113.7' }
    t.same(await readUsage(routes, store, { key: KEY }), [
      { routes: ['things-read'], bucket: null, policy: 'key-10s', by: 'key', limit: 10, window: '10s', used: 0, remaining: 10, resetSeconds: 0 },
      { routes: ['things-write'], bucket: null, policy: 'key-1m', by: 'key', limit: 2, window: '1m', used: 0, remaining: 2, resetSeconds: 0 }
    ], 'unused: every per-key limit, each route\'s own counter')

    for (let i = 0; i < 3; i++) await limiter.check(read, subjects)
    await limiter.check(write, subjects)
    const byKey = await readUsage(routes, store, { key: KEY })
    t.match(byKey, [
      { policy: 'key-10s', used: 3, remaining: 7, resetSeconds: 3 },
      { policy: 'key-1m', used: 1, remaining: 1, resetSeconds: 30 }
    ])
    t.same(await readUsage(routes, store, { key: KEY }), byKey, 'reading counts nothing')

    t.same(await readUsage(routes, store, { user: 'alice' }), [{
      routes: ['things-read', 'things-write', 'reports'],
      bucket: 'monthly',
      policy: 'monthly-user-30d',
      by: 'user',
      limit: 1000,
      window: '30d',
      used: 4,
      remaining: 996,
      resetSeconds: 4 * 2592
    }], 'a bucket is one counter, listed once with every route that shares it')
    t.match(await readUsage(routes, store, { user: 'bob' }), [{ policy: 'monthly-user-30d', used: 0, remaining: 1000 }], 'another user: unused')
    t.same(await readUsage([routes[3] as typeof routes[number]], store, { user: 'alice' }), [], 'no limits: nothing to read')
  })
}
