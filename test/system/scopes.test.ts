// Scopes end to end, on real sockets and real Redis: users get scopes, keys narrow them at
// registration, routes require them (read and write apart on one prefix), a request without one
// is refused before anything reaches the upstream, and the upstream is told the scopes (a header
// and the identity token's `scope` claim). Two gateways on one Redis: a scope taken from a user, or
// from a key, at one is refused at the other within a second.
import { createLocalJWKSet, jwtVerify } from 'jose'
import t from 'tap'
import { route, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signBase64, type TestKeyPair } from '../helpers/keys.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { startRelay } from '../helpers/relay.js'
import { login, sendSigned, startTestGateway, PASSWORD, type GatewayHandle } from '../helpers/stack.js'

const PROPAGATION_LIMIT_MS = 1000
const DEFAULTS = { bodyLimit: 1024 * 1024, timeoutMs: 5000 }

/** clients: GET needs clients:read, POST clients:write; reports: bearer, reports:read, an identity token; open: signed, no scopes. */
function scopedRoutes (upstream: string): RouteConfig[] {
  return [
    route({ name: 'clients-read', prefix: '/v1/clients/', upstream, auth: 'signed', methods: ['GET'], scopes: ['clients:read'] }, DEFAULTS),
    route({ name: 'clients-write', prefix: '/v1/clients/', upstream, auth: 'signed', methods: ['POST'], scopes: ['clients:write'] }, DEFAULTS),
    route({
      name: 'reports',
      prefix: '/v1/reports/',
      upstream,
      auth: 'bearer',
      methods: ['GET'],
      scopes: ['reports:read'],
      identityToken: { header: 'x-proof', ttlSeconds: 60, audience: 'reports' }
    }, DEFAULTS),
    route({
      name: 'open',
      prefix: '/v1/open/',
      upstream,
      auth: 'signed',
      identityHeaders: { user: 'x-user', key: 'x-key', keyName: 'x-key-name', scopes: 'x-scopes', agent: 'x-agent', agentKey: 'x-agent-key', dpopKey: 'x-dpop-jkt' },
      identityToken: { header: 'x-proof', ttlSeconds: 60, audience: 'open' }
    }, DEFAULTS)
  ]
}

async function register (url: string, token: string, keys: TestKeyPair, name: string, scopes?: unknown) {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name, publicKey: keys.publicPem, signature: signBase64(keys.privateKey, name), ...(scopes !== undefined && { scopes }) })
  })
}

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })

/** Polls until `check` holds (true), or the limit passes; returns the ms it took (Infinity past the limit). */
async function msUntil (check: () => Promise<boolean>, since: number): Promise<number> {
  for (;;) {
    if (await check()) return Date.now() - since
    if (Date.now() - since > PROPAGATION_LIMIT_MS) return Number.POSITIVE_INFINITY
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

t.test('one gateway on Redis: registration, routes that require scopes, what the upstream is told', async (t) => {
  const upstream = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'redis', upstreamUrl: upstream.url, routes: scopedRoutes })
  const { users, store } = gw.app.keygate
  await users.upsert('alice', PASSWORD, ['clients:read', 'clients:write', 'reports:read'])
  await users.upsert('bob', PASSWORD)
  const alice = await login(gw.url, 'alice')
  const bob = await login(gw.url, 'bob')
  const reader = rsaKeyPair()
  const writer = rsaKeyPair()
  const everything = rsaKeyPair()

  t.test('registration: a subset, the user\'s scopes by default, never more than the user\'s', async (t) => {
    const subset = await register(gw.url, alice, reader, 'reader', ['clients:read'])
    t.equal(subset.status, 201)
    t.same(subset.json(), { message: 'API key registered', apiKey: reader.apiKey, name: 'reader', scopes: ['clients:read'] })
    t.same((await register(gw.url, alice, writer, 'writer', ['clients:write', 'clients:read'])).json().scopes, ['clients:read', 'clients:write'],
      'the scopes as stored: sorted')
    t.same((await register(gw.url, alice, everything, 'everything')).json().scopes, ['clients:read', 'clients:write', 'reports:read'],
      'no scopes asked: all of the user\'s')

    const extra = rsaKeyPair()
    const refused = await register(gw.url, alice, extra, 'extra', ['clients:read', 'admin', 'billing:write'])
    t.equal(refused.status, 400)
    t.match(refused.json(), {
      code: 'VALIDATION_FAILED',
      detail: /admin, billing:write are not among the scopes of your user \(clients:read, clients:write, reports:read\)/,
      errors: [{ field: 'scopes', message: /^admin, billing:write are not among/ }]
    })
    const bad = await register(gw.url, alice, extra, 'extra', ['clients read'])
    t.equal(bad.status, 400)
    t.match(bad.json(), { code: 'VALIDATION_FAILED', detail: /"clients read" is not a scope: 1-64 letters, digits/, errors: [{ field: 'scopes' }] })
    t.equal((await register(gw.url, alice, extra, 'extra', ['a', 'a'])).json().code, 'VALIDATION_FAILED', 'a scope twice')
    t.equal((await register(gw.url, alice, extra, 'extra', 'clients:read')).json().code, 'VALIDATION_FAILED', 'not a list')
    t.equal((await register(gw.url, bob, extra, 'extra', ['clients:read'])).json().code, 'VALIDATION_FAILED', 'bob has no scopes to give')
    t.equal(await store.getKey(extra.apiKey), null, 'no refused registration stored anything')
    t.same((await register(gw.url, bob, extra, 'bobs', [])).json().scopes, [], 'an empty list is a key with no scopes')
  })

  t.test('GET /v1/api-keys shows each key\'s scopes; a key from before scopes shows null', async (t) => {
    const legacy = rsaKeyPair()
    // stored as keygate stored keys before scopes existed: no scopes field at all
    const record = { apiKey: legacy.apiKey, owner: 'alice', name: 'legacy', publicKey: legacy.publicPem, createdAt: new Date().toISOString() }
    t.equal(await store.createKey(record), 'created')
    const listed = await send(gw.url, '/v1/api-keys', { headers: bearer(alice) })
    t.equal(listed.status, 200)
    const byName = Object.fromEntries(listed.json<{ items: Array<{ name: string; scopes: string[] | null }> }>().items.map((k) => [k.name, k.scopes]))
    t.same(byName, {
      reader: ['clients:read'],
      writer: ['clients:read', 'clients:write'],
      everything: ['clients:read', 'clients:write', 'reports:read'],
      legacy: null
    })
    const res = await sendSigned(gw.url, { keys: legacy, token: alice, method: 'POST', target: '/v1/clients/', body: '{}' })
    t.equal(res.status, 200, 'a key from before scopes has every scope of its user')
    t.equal(upstream.requests.at(-1)?.headers['x-gateway-scopes'], 'clients:read clients:write reports:read')
  })

  t.test('read and write apart: GET passes with clients:read, POST gets 403 naming clients:write and reaches nothing', async (t) => {
    const read = await sendSigned(gw.url, { keys: reader, token: alice, method: 'GET', target: '/v1/clients/', headers: { 'x-gateway-scopes': 'admin' } })
    t.equal(read.status, 200)
    const seen = upstream.requests.at(-1)
    t.equal(seen?.method, 'GET')
    t.equal(seen?.headers['x-gateway-scopes'], 'clients:read', 'the upstream is told the key\'s scopes, never the client\'s copy')
    t.equal(seen?.headers['x-gateway-user'], 'alice')

    const before = upstream.requests.length
    const write = await sendSigned(gw.url, { keys: reader, token: alice, method: 'POST', target: '/v1/clients/', body: '{"name":"x"}' })
    t.equal(write.status, 403)
    t.match(write.json(), {
      code: 'INSUFFICIENT_SCOPE',
      status: 403,
      detail: /requires the scope clients:write; this API key was registered without clients:write/,
      requiredScopes: ['clients:write'],
      missingScopes: ['clients:write']
    })
    t.equal(write.headers['www-authenticate'], 'Bearer realm="keygate", error="insufficient_scope", scope="clients:write"')
    t.equal(upstream.requests.length, before, 'the upstream recorded nothing for it')

    const written = await sendSigned(gw.url, { keys: writer, token: alice, method: 'POST', target: '/v1/clients/', body: '{"name":"x"}' })
    t.equal(written.status, 200, 'a key with clients:write passes')
    t.equal(upstream.requests.at(-1)?.headers['x-gateway-scopes'], 'clients:read clients:write')
    const again = await sendSigned(gw.url, { keys: reader, token: alice, method: 'GET', target: '/v1/clients/?page=2' })
    t.equal(again.status, 200)
  })

  t.test('a route without scopes serves any key, and sends its scopes under the route\'s header name', async (t) => {
    const none = rsaKeyPair()
    t.equal((await register(gw.url, alice, none, 'none', [])).status, 201)
    const forged = { 'x-scopes': 'admin', 'x-gateway-scopes': 'admin' }
    const res = await sendSigned(gw.url, { keys: none, token: alice, method: 'GET', target: '/v1/open/x', headers: forged })
    t.equal(res.status, 200)
    const seen = upstream.requests.at(-1)
    t.equal(seen?.headers['x-scopes'], '', 'no scopes: an empty header, not the client\'s')
    t.equal(seen?.headers['x-gateway-scopes'], undefined, 'the default name is still never forwarded from a client')
    const jwks = (await send(gw.url, '/.well-known/jwks.json')).json()
    const { payload } = await jwtVerify(seen?.headers['x-proof'] as string, createLocalJWKSet(jwks as never), { audience: 'open' })
    t.equal(payload.scope, undefined, 'no scopes: no scope claim')

    t.equal((await sendSigned(gw.url, { keys: reader, token: alice, method: 'GET', target: '/v1/open/y' })).status, 200)
    const token = upstream.requests.at(-1)?.headers['x-proof'] as string
    const verified = await jwtVerify(token, createLocalJWKSet(jwks as never), { audience: 'open' })
    t.equal(verified.payload.scope, 'clients:read', 'the identity token claims the request\'s scopes')
    t.equal(verified.payload.api_key, reader.apiKey)
  })

  t.test('a bearer route: the user\'s scopes; a scope taken from the user takes it from every key at once', async (t) => {
    const res = await send(gw.url, '/v1/reports/q1', { headers: { ...bearer(alice), 'x-gateway-scopes': 'admin' } })
    t.equal(res.status, 200)
    const seen = upstream.requests.at(-1)
    t.equal(seen?.headers['x-gateway-scopes'], 'clients:read clients:write reports:read')
    const jwks = (await send(gw.url, '/.well-known/jwks.json')).json()
    const first = await jwtVerify(seen?.headers['x-proof'] as string, createLocalJWKSet(jwks as never), { audience: 'reports' })
    t.equal(first.payload.scope, 'clients:read clients:write reports:read', 'the token\'s scope claim, space-separated')

    const before = upstream.requests.length
    const refused = await send(gw.url, '/v1/reports/q1', { headers: bearer(bob) })
    t.equal(refused.status, 403)
    t.match(refused.json(), { code: 'INSUFFICIENT_SCOPE', detail: /requires the scope reports:read; your user does not have reports:read/, missingScopes: ['reports:read'] })
    t.equal(upstream.requests.length, before, 'nothing forwarded')

    // Taken from alice: every key of hers loses it, and the identity token is made anew.
    await users.setScopes('alice', ['reports:read'])
    const narrowed = await send(gw.url, '/v1/reports/q2', { headers: bearer(alice) })
    t.equal(narrowed.status, 200)
    const second = await jwtVerify(upstream.requests.at(-1)?.headers['x-proof'] as string, createLocalJWKSet(jwks as never), { audience: 'reports' })
    t.equal(second.payload.scope, 'reports:read', 'a new token: the cached one claimed scopes she no longer has')
    const write = await sendSigned(gw.url, { keys: writer, token: alice, method: 'POST', target: '/v1/clients/', body: '{}' })
    t.equal(write.status, 403)
    t.match(write.json(), { code: 'INSUFFICIENT_SCOPE', detail: /your user does not have clients:write/ })
    await users.setScopes('alice', ['clients:read', 'clients:write', 'reports:read'])
    t.equal((await sendSigned(gw.url, { keys: writer, token: alice, method: 'POST', target: '/v1/clients/', body: '{}' })).status, 200,
      'given back: the key has it again (its own scopes never changed)')
  })
})

t.test('two gateways on one Redis: scope changes reach the other within a second', async (t) => {
  const redisPrefix = uniquePrefix('scopes')
  const redisUrl = await testRedisUrl()
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const upstream: Recorder = await startRecorder(t)
  const a: GatewayHandle = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: upstream.url, routes: scopedRoutes })
  const b: GatewayHandle = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: upstream.url, routes: scopedRoutes })
  await a.app.keygate.users.upsert('carol', PASSWORD, ['clients:read', 'clients:write'])
  const tokenB = await login(b.url, 'carol')
  const keys = rsaKeyPair()
  t.equal((await register(a.url, await login(a.url, 'carol'), keys, 'both', ['clients:read', 'clients:write'])).status, 201)
  const writeAtB = async (): Promise<number> =>
    (await sendSigned(b.url, { keys, token: tokenB, method: 'POST', target: '/v1/clients/', body: '{}' })).status
  // B has the key and carol's scopes cached (the later checks would pass on stale copies).
  t.equal(await writeAtB(), 200)
  t.equal(await writeAtB(), 200)

  t.test('a scope taken from the user at A: B refuses within a second', async (t) => {
    const since = Date.now()
    t.same((await a.app.keygate.users.setScopes('carol', ['clients:read']))?.scopes, ['clients:read'])
    const ms = await msUntil(async () => await writeAtB() === 403, since)
    t.ok(ms < PROPAGATION_LIMIT_MS, `B refused clients:write ${ms} ms after it was taken from the user at A`)
    t.equal((await sendSigned(b.url, { keys, token: tokenB, method: 'GET', target: '/v1/clients/' })).status, 200, 'what she still has passes')
    await a.app.keygate.users.setScopes('carol', ['clients:read', 'clients:write'])
    t.ok(await msUntil(async () => await writeAtB() === 200, Date.now()) < PROPAGATION_LIMIT_MS, 'and given back, B serves it again')
  })

  t.test('a key\'s scopes changed at A (KeyRegistry.update): B applies them within a second', async (t) => {
    const since = Date.now()
    const result = await a.app.keygate.keys.update(keys.apiKey, { scopes: ['clients:read'] })
    t.equal(result.outcome, 'updated')
    t.same(result.record?.scopes, ['clients:read'])
    const ms = await msUntil(async () => await writeAtB() === 403, since)
    t.ok(ms < PROPAGATION_LIMIT_MS, `B refused clients:write ${ms} ms after the key lost it at A`)
    const refused = await sendSigned(b.url, { keys, token: tokenB, method: 'POST', target: '/v1/clients/', body: '{}' })
    t.match(refused.json(), { code: 'INSUFFICIENT_SCOPE', detail: /this API key was registered without clients:write/ })
    const before = upstream.requests.length
    t.equal((await sendSigned(b.url, { keys, token: tokenB, method: 'GET', target: '/v1/clients/' })).status, 200)
    t.equal(upstream.requests.length, before + 1)
    t.equal(upstream.requests.at(-1)?.headers['x-gateway-scopes'], 'clients:read', 'B tells the upstream the key\'s new scopes')
  })
})

t.test('Redis away and a user not cached: its token cannot be checked against the user, so every route is 503; Redis back, both serve', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('scopes-down')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const relay = await startRelay(t, new URL(redisUrl))
  const upstream = await startRecorder(t)
  const routes = (url: string): RouteConfig[] => [
    route({ name: 'open', prefix: '/open/', upstream: url, auth: 'bearer' }, DEFAULTS),
    route({ name: 'scoped', prefix: '/scoped/', upstream: url, auth: 'bearer', scopes: ['reports:read'] }, DEFAULTS)
  ]
  const gw = await startTestGateway(t, { store: 'redis', redisPrefix: prefix, upstreamUrl: upstream.url, routes, config: { redisUrl: relay.url } })
  await gw.app.keygate.users.upsert('dave', PASSWORD, ['reports:read'])
  const token = await login(gw.url, 'dave')

  await relay.cut()
  const before = upstream.requests.length
  // the user may have been removed, created again or given a new password meanwhile: unknown, so refused
  const open = await send(gw.url, '/open/x', { headers: { ...bearer(token), 'x-gateway-scopes': 'admin' } })
  t.equal(open.status, 503, 'a route that requires no scope')
  t.equal(open.json().code, 'STORE_UNAVAILABLE')
  const scoped = await send(gw.url, '/scoped/x', { headers: bearer(token) })
  t.equal(scoped.status, 503, 'and one that requires some')
  t.equal(scoped.json().code, 'STORE_UNAVAILABLE')
  t.equal(upstream.requests.length, before, 'nothing forwarded')

  await relay.restore()
  let status = 0
  for (let i = 0; i < 100 && status !== 200; i++) {
    status = (await send(gw.url, '/scoped/x', { headers: bearer(token) })).status
    if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.equal(status, 200, 'Redis back: the scoped route serves')
  t.equal(upstream.requests.at(-1)?.headers['x-gateway-scopes'], 'reports:read')
  const open2 = await send(gw.url, '/open/x', { headers: { ...bearer(token), 'x-gateway-scopes': 'admin' } })
  t.equal(open2.status, 200, 'and the open one')
  t.equal(upstream.requests.at(-1)?.headers['x-gateway-scopes'], 'reports:read', 'with the user\'s scopes, never the client\'s')
})

t.test('/docs/json: a route\'s required scopes and INSUFFICIENT_SCOPE', async (t) => {
  const upstream = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: upstream.url, routes: scopedRoutes })
  const doc = (await send(gw.url, '/docs/json')).json<{ paths: Record<string, Record<string, Record<string, unknown>>> }>()
  const post = doc.paths['/v1/clients/']?.post
  t.match(post?.description, /Requires the scope `clients:write` \(403 INSUFFICIENT_SCOPE without\)/)
  t.ok((post?.['x-keygate-errors'] as string[]).includes('INSUFFICIENT_SCOPE'))
  t.match(post?.['x-keygate-route'], { auth: 'signed', scopes: ['clients:write'] })
  t.notOk((doc.paths['/v1/open/']?.get?.['x-keygate-errors'] as string[]).includes('INSUFFICIENT_SCOPE'), 'a route without scopes never answers it')
})
