// The user API's account read-outs, on both stores, over real sockets: GET /v1/routes lists the
// routes the caller's scopes allow as a client calls them (nothing of where they forward, a page at
// a time); GET /v1/api-keys/{apiKey}/usage and GET /v1/usage say where the caller's own key, and
// the caller, stand against those routes' limits, following the requests that passed; another
// user's key is a 404 like an unknown one; no token, or a bad one, is a 401 with WWW-Authenticate.
import { Value } from '@sinclair/typebox/value'
import t from 'tap'
import { OfferedRouteList } from '../../../../../gateway/src/http/schemas/routes.js'
import { KeyUsage } from '../../../../../gateway/src/http/schemas/usage.js'
import { docBlocks } from '../../../../helpers/docs.js'
import { send, type RawResponse } from '../../../../helpers/http.js'
import { rsaKeyPair, signBase64, type TestKeyPair } from '../../../../helpers/keys.js'
import { routesFromYaml } from '../../../../helpers/routes.js'
import { PASSWORD, STORE_KINDS, login, registerKey, sendSigned, startTestGateway, startUpstreamStub } from '../../../../helpers/stack.js'

const ROUTES = `routes:
  - name: clients
    prefix: /v1/clients/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    addHeaders: { x-upstream-secret: s3cret-value }
    removeHeaders: [x-debug]
    rateLimits:
      - { by: key, limit: 5, window: 1m }
      - { by: user, limit: 100, window: 30d, bucket: monthly }
  - name: transactions
    prefix: /v1/transactions/
    upstream: UPSTREAM
    auth: signed
    signature: rfc9421
    scopes: [payments]
    methods: [GET, POST]
    rateLimits:
      - { by: key, limit: 50, window: 1h }
      - { by: user, limit: 100, window: 30d, bucket: monthly }
  - name: reports
    prefix: /reports/
    upstream: UPSTREAM
    rewrite: /internal/reports/
    auth: bearer
    scopes: [reports]
    methods: [GET]
  - name: status
    path: /status
    upstream: UPSTREAM
    auth: public
    methods: [GET]
    rateLimits:
      - { by: address, limit: 10, window: 1s }
`

interface Offered {
  name: string
  prefix?: string
  path?: string
  methods: string[]
  tier: string
  scopes: string[]
  signature?: string[]
  rateLimits: Array<{ by: string; limit: number; window: string; policy: string }>
}
interface Page { items: Offered[]; next_cursor: string | null }
interface UsageItem { routes: string[]; bucket: string | null; by: string; limit: number; window: string; used: number; remaining: number }

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })
const get = async (url: string, token: string | undefined, target: string): Promise<RawResponse> =>
  await send(url, target, { headers: token === undefined ? {} : bearer(token) })

/** registers a key with these scopes (a subset of the user's) */
async function registerWithScopes (url: string, token: string, keys: TestKeyPair, name: string, scopes: string[]): Promise<RawResponse> {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...bearer(token) },
    body: JSON.stringify({ name, publicKey: keys.publicPem, signature: signBase64(keys.privateKey, name), scopes })
  })
}

for (const kind of STORE_KINDS) {
  t.test(`${kind} store: the routes you may call, and where your keys stand`, async (t) => {
    const upstream = await startUpstreamStub(t)
    const gw = await startTestGateway(t, { store: kind, upstreamUrl: upstream, routes: (url) => routesFromYaml(ROUTES, url) })
    await gw.app.keygate.users.upsert('alice', PASSWORD, ['payments'])
    await gw.app.keygate.users.upsert('bob', PASSWORD)
    const alice = await login(gw.url, 'alice')
    const bob = await login(gw.url, 'bob')

    // GET /v1/routes: by the user's scopes, in route-file order
    const listed = await get(gw.url, alice, '/v1/routes')
    t.equal(listed.status, 200)
    const page = listed.json<Page>()
    t.same(page.items.map((r) => r.name), ['clients', 'transactions', 'status'], "alice's scopes allow all but reports (it needs reports)")
    t.equal(page.next_cursor, null)
    // policy names are the limiter's (limits/rate-limit.ts); here only that each has one
    const withoutPolicies = page.items.map((r) => ({ ...r, rateLimits: r.rateLimits.map(({ policy, ...limit }) => limit) }))
    t.same(withoutPolicies[0], {
      name: 'clients',
      prefix: '/v1/clients/',
      methods: ['GET'],
      tier: 'signed',
      scopes: [],
      signature: ['seed', 'rfc9421'],
      rateLimits: [{ by: 'key', limit: 5, window: '1m' }, { by: 'user', limit: 100, window: '30d' }]
    }, 'a signed route: its prefix, methods, tier, scopes, schemes and limits, and nothing else')
    t.match(page.items[0]?.rateLimits, [{ policy: /^\S+$/ }, { policy: /monthly/ }], 'each limit with its policy name')
    t.match(withoutPolicies[1], { name: 'transactions', tier: 'signed', scopes: ['payments'], signature: ['rfc9421'], methods: ['GET', 'POST'] })
    t.same(withoutPolicies[2],
      { name: 'status', path: '/status', methods: ['GET'], tier: 'public', scopes: [], rateLimits: [{ by: 'address', limit: 10, window: '1s' }] },
      'an exact path as `path`; no signature schemes on an unsigned route')
    for (const leak of ['upstream', 'rewrite', 'addHeaders', 'removeHeaders', 'identityHeaders', 'identityToken', 'timeoutMs', 'bodyLimit',
      'keepHeaders', 'backendNormalises', 'onStoreDown', 'counter', upstream, 's3cret-value', 'x-upstream-secret', 'x-debug', '/internal/']) {
      t.notOk(listed.text.includes(leak), `nothing about forwarding: no ${leak}`)
    }
    t.same((await get(gw.url, bob, '/v1/routes')).json<Page>().items.map((r) => r.name), ['clients', 'status'], 'bob has no scopes: the routes needing none')

    // a page at a time
    const names: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const res = await get(gw.url, alice, `/v1/routes?limit=1${cursor === null ? '' : `&cursor=${cursor}`}`)
      t.equal(res.status, 200)
      const { items, next_cursor: next } = res.json<Page>()
      names.push(...items.map((r) => r.name))
      cursor = next
      pages++
    } while (cursor !== null && pages < 10)
    t.same(names, ['clients', 'transactions', 'status'], 'paged by one: each route once, in order')
    for (const query of ['limit=0', 'limit=1001', 'cursor=not-a-cursor', 'other=1']) {
      const res = await get(gw.url, alice, `/v1/routes?${query}`)
      t.equal(res.status, 400, query)
      t.equal(res.json().code, 'VALIDATION_FAILED', query)
    }

    // usage: a key with all of alice's scopes, one registered with none
    const wide = rsaKeyPair()
    const narrow = rsaKeyPair()
    const bobs = rsaKeyPair()
    t.equal((await registerKey(gw.url, alice, wide, 'wide')).status, 201)
    t.equal((await registerWithScopes(gw.url, alice, narrow, 'narrow', [])).status, 201)
    t.equal((await registerKey(gw.url, bob, bobs, 'bobs')).status, 201)
    const keyUsage = async (token: string, apiKey: string): Promise<{ apiKey: string; items: UsageItem[] }> => {
      const res = await get(gw.url, token, `/v1/api-keys/${apiKey}/usage`)
      t.equal(res.status, 200, `GET /v1/api-keys/${apiKey.slice(0, 8)}.../usage`)
      return res.json()
    }
    for (let i = 0; i < 3; i++) t.equal((await sendSigned(gw.url, { keys: wide, token: alice, method: 'GET', target: '/v1/clients/' })).status, 200)
    t.equal((await sendSigned(gw.url, { keys: narrow, token: alice, method: 'GET', target: '/v1/clients/' })).status, 200)

    const ofWide = await keyUsage(alice, wide.apiKey)
    t.equal(ofWide.apiKey, wide.apiKey)
    t.same(ofWide.items.map((i) => [i.routes, i.by, i.limit, i.window, i.used, i.remaining]),
      [[['clients'], 'key', 5, '1m', 3, 2], [['transactions'], 'key', 50, '1h', 0, 50]], 'three calls on clients; transactions unused')
    t.same((await keyUsage(alice, wide.apiKey)).items.map((i) => i.used), [3, 0], 'reading it again counted nothing')
    t.same((await keyUsage(alice, narrow.apiKey)).items.map((i) => [i.routes, i.used, i.remaining]), [[['clients'], 1, 4]],
      'a key without payments: only the limits of the routes it may call')

    const ofAlice = await get(gw.url, alice, '/v1/usage')
    t.equal(ofAlice.status, 200)
    t.match(ofAlice.json(),
      { user: 'alice', items: [{ routes: ['clients', 'transactions'], bucket: 'monthly', by: 'user', limit: 100, used: 4, remaining: 96 }] },
      "the monthly quota: all of alice's keys together")
    t.equal(ofAlice.json<{ items: unknown[] }>().items.length, 1, 'per-user limits only')
    t.same((await get(gw.url, bob, '/v1/usage')).json<{ items: UsageItem[] }>().items.map((i) => [i.routes, i.used]), [[['clients'], 0]],
      "bob's read-out names only the routes he may call")

    // another user's key, an unknown one and junk: the same 404
    for (const [label, apiKey] of [["alice's key, with bob's token", wide.apiKey], ['an unknown key', 'f'.repeat(64)], ['not an apiKey', 'not-a-key'],
      ["bob's key in upper case", bobs.apiKey.toUpperCase()]] as const) {
      const res = await get(gw.url, bob, `/v1/api-keys/${apiKey}/usage`)
      t.equal(res.status, 404, label)
      t.match(res.json(), { code: 'API_KEY_NOT_FOUND', detail: 'You have no API key with this apiKey; GET /v1/api-keys lists yours' }, label)
    }
    t.equal((await get(gw.url, bob, `/v1/api-keys/${bobs.apiKey}/usage`)).status, 200, "bob's own key")

    // no token, a bad token: 401 with WWW-Authenticate, on each
    for (const target of ['/v1/routes', '/v1/usage', `/v1/api-keys/${wide.apiKey}/usage`]) {
      for (const [token, code] of [[undefined, 'MISSING_TOKEN'], ['not.a.token', 'INVALID_TOKEN']] as const) {
        const res = await get(gw.url, token, target)
        t.equal(res.status, 401, `${target} ${code}`)
        t.equal(res.json().code, code, target)
        t.match(res.headers['www-authenticate'], /^Bearer realm="keygate"/, `${target} ${code}: WWW-Authenticate`)
      }
    }
  })
}

t.test("docs/signing.md's example answers have the shape the endpoints answer", async (t) => {
  const [routes, usage] = docBlocks('docs/signing.md', 'Endpoints', 'json').map((block) => JSON.parse(block) as unknown)
  t.ok(Value.Check(OfferedRouteList, routes), `GET /v1/routes: ${[...Value.Errors(OfferedRouteList, routes)].map((e) => `${e.path} ${e.message}`).join('; ')}`)
  t.ok(Value.Check(KeyUsage, usage), `GET /v1/api-keys/{apiKey}/usage: ${[...Value.Errors(KeyUsage, usage)].map((e) => `${e.path} ${e.message}`).join('; ')}`)
})
