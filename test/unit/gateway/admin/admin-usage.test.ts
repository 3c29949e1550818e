// The admin API's GET /v1/usage: where a key or a user stands against the rate limits and quotas
// of the routes in force, on a gateway on the real Redis, over real sockets. What it reports
// follows the requests that passed, reading it counts nothing, a bucket shared by two routes is
// one entry naming both, and bad or unknown subjects get clear errors.
import t from 'tap'
import { admin, startAdminGateway } from '../../../helpers/admin.js'
import { rsaKeyPair } from '../../../helpers/keys.js'
import { routesFromYaml } from '../../../helpers/routes.js'
import { PASSWORD, login, registerKey, sendSigned, startUpstreamStub } from '../../../helpers/stack.js'

const ROUTES = `routes:
  - name: clients
    prefix: /v1/clients/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: key, limit: 5, window: 1m }
      - { by: user, limit: 100, window: 30d, bucket: monthly }
  - name: transactions
    prefix: /v1/transactions/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: user, limit: 100, window: 30d, bucket: monthly }
      - { by: address, limit: 1000, window: 1m }
`

interface UsageItem {
  routes: string[]
  bucket: string | null
  policy: string
  by: string
  limit: number
  window: string
  used: number
  remaining: number
  resetSeconds: number
}

t.test('usage of a key and of a user: what passed, read without counting', async (t) => {
  const upstream = await startUpstreamStub(t)
  const routes = routesFromYaml(ROUTES, upstream)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream, routes })
  t.equal((await admin(gw, 'PUT', '/v1/users/alice', { body: { password: PASSWORD } })).status, 201)
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)

  const usage = async (query: string): Promise<{ key?: string; user?: string; items: UsageItem[] }> => {
    const res = await admin(gw, 'GET', `/v1/usage?${query}`)
    t.equal(res.status, 200, `GET /v1/usage?${query}`)
    return res.json()
  }
  const fresh = await usage(`key=${keys.apiKey}`)
  t.same(fresh.items.map((i) => [i.routes, i.by, i.limit, i.window, i.used, i.remaining, i.resetSeconds]),
    [[['clients'], 'key', 5, '1m', 0, 5, 0]], 'a fresh key: its one per-key limit, unused')

  for (let i = 0; i < 3; i++) t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200)
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/transactions/' })).status, 200)

  const byKey = await usage(`key=${keys.apiKey}`)
  t.equal(byKey.key, keys.apiKey)
  t.match(byKey.items, [{ routes: ['clients'], bucket: null, by: 'key', limit: 5, used: 3, remaining: 2 }], 'three requests on clients')
  t.ok((byKey.items[0]?.resetSeconds ?? 0) > 0, 'and a time until the counter is full again')
  t.same((await usage(`key=${keys.apiKey}`)).items.map((i) => i.used), [3], 'reading it again counted nothing')

  const byUser = await usage('user=alice')
  t.equal(byUser.user, 'alice')
  t.match(byUser.items, [{ routes: ['clients', 'transactions'], bucket: 'monthly', by: 'user', limit: 100, window: '30d', used: 4, remaining: 96 }],
    'the shared monthly quota: one entry naming both routes, four requests')
  t.notOk(byUser.items.some((i) => i.by === 'address'), 'limits by address are not listed')

  // the limit the read-out reports is the one the gateway enforces
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200)
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200)
  t.match((await usage(`key=${keys.apiKey}`)).items, [{ used: 5, remaining: 0 }])
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).json().code, 'RATE_LIMITED', 'remaining 0: the next is refused')
  t.match((await usage(`key=${keys.apiKey}`)).items, [{ used: 5, remaining: 0 }], 'a refused request is not counted')
})

t.test('usage: exactly one of key, user and agent; unknown keys and users are 404', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream })
  t.equal((await admin(gw, 'PUT', '/v1/users/bob', { body: { password: PASSWORD } })).status, 201)
  for (const query of ['', `?key=${'a'.repeat(64)}&user=bob`, '?key=not-an-api-key', '?owner=bob', '?agent=http://agent.example',
    '?agent=https://agent.example&user=bob']) {
    const res = await admin(gw, 'GET', `/v1/usage${query}`)
    t.equal(res.status, 400, `GET /v1/usage${query}`)
    t.equal(res.json().code, 'VALIDATION_FAILED')
  }
  t.equal((await admin(gw, 'GET', `/v1/usage?key=${'f'.repeat(64)}`)).json().code, 'API_KEY_NOT_FOUND')
  t.equal((await admin(gw, 'GET', '/v1/usage?user=nobody')).json().code, 'USER_NOT_FOUND')
  t.same((await admin(gw, 'GET', '/v1/usage?user=bob')).json(), { user: 'bob', items: [] }, 'no route limits bob: nothing to list')
  t.same((await admin(gw, 'GET', '/v1/usage?agent=https://agent.example')).json(), { agent: 'https://agent.example', items: [] },
    'an agent has no account: any origin is read, and none limits it here')
  t.equal((await admin(gw, 'GET', '/v1/usage?user=bob', { token: null })).status, 401, 'the admin token, as everywhere')
})
