// DPoP (RFC 9449, issue 43) with independent software end to end: oidc-provider's DPoP feature
// issues tokens bound to a client's key (cnf.jkt); oauth4webapi's DPoP handle makes the proofs as
// a real client does (its token request, its resource requests, its nonce retry), and panva's
// `dpop` package and jose make the hostile ones. Two keygates on one Redis, behind a balancer
// they trust (X-Forwarded-Proto and -Host: the client addressed https://keygate.test), in front
// of a recorder: each hostile proof is refused with its code and never reaches the upstream; the
// one that passes arrives with x-gateway-dpop-jkt and without the proof or the token. Then the
// challenges, the resource's metadata, server nonces shared by two gateways, and decision mode
// (Traefik's dialect).
import { generateKeyPair as dpopKeyPair, generateProof } from 'dpop'
import { calculateJwkThumbprint, decodeJwt, exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose'
import * as oauth from 'oauth4webapi'
import t from 'tap'
import { accessTokenHash } from '../../gateway/src/dpop/proof.js'
import { send } from '../helpers/http.js'
import { issuersYaml, startTestIdp, TEST_IDP_AUDIENCE, TEST_IDP_SERVICE_CLIENT } from '../helpers/oidc-provider.js'
import { startRecorder } from '../helpers/recorder.js'
import { uniquePrefix, deletePrefix, testRedisUrl } from '../helpers/redis.js'
import { routeFile, routesFromYaml } from '../helpers/routes.js'
import { addUser, login, startTestGateway, type GatewayHandle } from '../helpers/stack.js'

const PUBLIC = 'https://keygate.test'
const STRICT = `${PUBLIC}/strict`
const ROUTES = `resources:
  - id: ${TEST_IDP_AUDIENCE}
    name: The API
    issuers: [corp]
  - id: ${PUBLIC}/strict
    name: A DPoP-only API
    issuers: [corp]
    dpop: required
routes:
  - name: api
    prefix: /api/
    upstream: UPSTREAM
    auth: bearer
    resource: ${TEST_IDP_AUDIENCE}
  - name: strict
    prefix: /strict/
    upstream: UPSTREAM
    auth: bearer
    resource: ${PUBLIC}/strict
  - name: plain
    prefix: /plain/
    upstream: UPSTREAM
    auth: bearer
    dpop: required
`

/** What the trusted balancer in front adds: the client addressed https://keygate.test */
const BALANCED = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'keygate.test' }

t.test('DPoP-bound tokens from oidc-provider, proofs from oauth4webapi and dpop, through keygate', async (t) => {
  const idp = await startTestIdp(t, { dpop: true, algorithm: 'ES256' })
  const upstream = await startRecorder(t)
  const issuers = routeFile(t, issuersYaml(idp, { name: 'corp', audiences: ['api://plain'] }), 'issuers.yaml')
  const redisUrl = await testRedisUrl()
  const redisPrefix = uniquePrefix('dpop')
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const gateway = async (extra: Record<string, unknown> = {}): Promise<GatewayHandle> => await startTestGateway(t, {
    store: 'redis',
    redisPrefix,
    upstreamUrl: upstream.url,
    routes: (url) => routesFromYaml(ROUTES, url),
    config: {
      identityProviders: { file: issuers.path, oidc: undefined },
      clientAddress: { trustedProxies: ['127.0.0.1/32'], header: 'x-forwarded-for' },
      ...extra
    }
  })
  const a = await gateway({ decision: { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1'] } })
  const b = await gateway()
  /** the balancer: https://keygate.test/... reaches `to` with the forwarded scheme and host */
  const balancer = (to: GatewayHandle) => async (url: string, init: RequestInit): Promise<Response> => {
    if (!url.startsWith(`${PUBLIC}/`)) return await fetch(url, init)
    const headers = new Headers(init.headers)
    for (const [name, value] of Object.entries(BALANCED)) headers.set(name, value)
    return await fetch(to.url + url.slice(PUBLIC.length), { ...init, headers })
  }

  // the client: a key pair, oauth4webapi's DPoP handle, and a bound token from the IdP's token endpoint
  const keys = await dpopKeyPair('ES256')
  const jkt = await calculateJwkThumbprint(await exportJWK(keys.publicKey) as JWK)
  const client: oauth.Client = { client_id: TEST_IDP_SERVICE_CLIENT.id }
  const DPoP = oauth.DPoP(client, keys)
  const as = await oauth.processDiscoveryResponse(new URL(idp.issuer),
    await oauth.discoveryRequest(new URL(idp.issuer), { algorithm: 'oidc', [oauth.allowInsecureRequests]: true }))
  await idp.addResource(STRICT)
  const grant = async (handle: oauth.DPoPHandle | undefined, resource = TEST_IDP_AUDIENCE): Promise<oauth.TokenEndpointResponse> =>
    await oauth.processClientCredentialsResponse(as, client, await oauth.clientCredentialsGrantRequest(as, client,
      oauth.ClientSecretBasic(TEST_IDP_SERVICE_CLIENT.secret), { resource },
      { [oauth.allowInsecureRequests]: true, ...(handle !== undefined && { DPoP: handle }) }))
  const issued = await grant(DPoP)
  const token = issued.access_token
  t.equal(issued.token_type, 'dpop', 'oidc-provider issued a DPoP token')
  t.same(decodeJwt(token).cnf, { jkt }, 'bound to the client\'s key (cnf.jkt)')

  const forwarded = (): number => upstream.requests.length
  await t.test('the client\'s own requests (oauth4webapi) pass, and the upstream learns the key, never the proof or the token', async (t) => {
    const response = await oauth.protectedResourceRequest(token, 'GET', new URL(`${PUBLIC}/api/things?page=2`), undefined, null,
      { DPoP, [oauth.customFetch]: balancer(a) })
    t.equal(response.status, 200, 'a GET with its proof (htu without the query) passes')
    const post = await oauth.protectedResourceRequest(token, 'POST', new URL(`${PUBLIC}/api/things`), new Headers({ 'content-type': 'application/json' }),
      '{"a":1}', { DPoP, [oauth.customFetch]: balancer(b) })
    t.equal(post.status, 200, 'a POST at the other gateway passes')
    const seen = upstream.requests.at(-1)
    t.equal(seen?.headers['x-gateway-dpop-jkt'], jkt, 'x-gateway-dpop-jkt: the proof key\'s thumbprint')
    t.equal(seen?.headers.dpop, undefined, 'no DPoP header upstream')
    t.equal(seen?.headers.authorization, undefined, 'no token upstream')
    t.match(seen?.headers['x-gateway-user'], /^corp:/, 'the token\'s user')
  })

  /** a request straight to a gateway, as the balancer would send it */
  const call = async (to: GatewayHandle, path: string, headers: Record<string, string | string[]>, method = 'GET') =>
    await send(to.url, path, { method, headers: { ...BALANCED, ...headers } })
  const proof = async (options: { htu?: string, htm?: string, accessToken?: string | null, pair?: typeof keys } = {}): Promise<string> =>
    await generateProof(options.pair ?? keys, options.htu ?? `${PUBLIC}/api/things`, options.htm ?? 'GET', undefined,
      options.accessToken === null ? undefined : options.accessToken ?? token)
  /** a proof signed by hand: any header and claims */
  const forged = async (header: Record<string, unknown>, claims: Record<string, unknown>): Promise<string> =>
    await new SignJWT({
      htm: 'GET', htu: `${PUBLIC}/api/things`, iat: Math.floor(Date.now() / 1000), jti: crypto.randomUUID(), ath: accessTokenHash(token), ...claims
    })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(keys.publicKey), ...header } as never).sign(keys.privateKey)

  await t.test('each hostile proof is refused with its code and never reaches the upstream', async (t) => {
    const now = Math.floor(Date.now() / 1000)
    const segment = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
    const none = `${segment({ alg: 'none', typ: 'dpop+jwt', jwk: await exportJWK(keys.publicKey) })}.` +
      `${segment({ htm: 'GET', htu: `${PUBLIC}/api/things`, iat: now, jti: 'none-1', ath: accessTokenHash(token) })}.`
    const hs256 = await new SignJWT({ htm: 'GET', htu: `${PUBLIC}/api/things`, iat: now, jti: 'hs-1', ath: accessTokenHash(token) })
      .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'c2VjcmV0' } } as never)
      .sign(new TextEncoder().encode('a secret of thirty-two bytes!!!!'))
    const withPrivate = await forged({ jwk: await exportJWK((await generateKeyPair('ES256', { extractable: true })).privateKey) }, {})
    const other = await dpopKeyPair('ES256')
    const replayed = await proof()
    t.equal((await call(a, '/api/things', { authorization: `DPoP ${token}`, dpop: replayed })).status, 200, 'a fresh proof passes once')
    const before = forwarded()
    const cases: Array<[string, Record<string, string | string[]>, string, string?]> = [
      ['alg none', { dpop: none }, 'INVALID_DPOP_PROOF'],
      ['HS256', { dpop: hs256 }, 'INVALID_DPOP_PROOF'],
      ['a private key in jwk', { dpop: withPrivate }, 'INVALID_DPOP_PROOF'],
      ['wrong htm', { dpop: await proof({ htm: 'POST' }) }, 'INVALID_DPOP_PROOF'],
      ['htu of another path', { dpop: await proof({ htu: `${PUBLIC}/api/other` }) }, 'INVALID_DPOP_PROOF'],
      ['htu of another host', { dpop: await proof({ htu: 'https://evil.test/api/things' }) }, 'INVALID_DPOP_PROOF'],
      ['htu of the address behind the balancer', { dpop: await proof({ htu: `${a.url}/api/things` }) }, 'INVALID_DPOP_PROOF'],
      ['a stale iat', { dpop: await forged({}, { iat: now - 600 }) }, 'INVALID_DPOP_PROOF'],
      ['a future iat', { dpop: await forged({}, { iat: now + 600 }) }, 'INVALID_DPOP_PROOF'],
      ['a replayed jti', { dpop: replayed }, 'INVALID_DPOP_PROOF'],
      ['no ath', { dpop: await proof({ accessToken: null }) }, 'INVALID_DPOP_PROOF'],
      ['a wrong ath', { dpop: await proof({ accessToken: 'another-token' }) }, 'INVALID_DPOP_PROOF'],
      ['a proof key other than cnf.jkt', { dpop: await proof({ pair: other }) }, 'INVALID_DPOP_PROOF'],
      ['wrong typ', { dpop: await forged({ typ: 'JWT' }, {}) }, 'INVALID_DPOP_PROOF'],
      ['two DPoP headers', { dpop: [await proof(), await proof()] }, 'INVALID_DPOP_PROOF'],
      ['no proof', {}, 'INVALID_DPOP_PROOF'],
      ['the bound token sent as Bearer', { dpop: await proof() }, 'DPOP_REQUIRED', 'Bearer'],
      ['the bound token sent as Bearer without a proof', {}, 'DPOP_REQUIRED', 'Bearer']
    ]
    for (const [name, headers, code, scheme] of cases) {
      const res = await call(a, '/api/things', { authorization: `${scheme ?? 'DPoP'} ${token}`, ...headers })
      t.equal(res.status, 401, `${name}: 401`)
      t.equal(res.json<{ code: string }>().code, code, `${name}: ${code}`)
    }
    // a proof for the root, steered at another path by a Host the URL parser reads otherwise: refused
    const root = await send(a.url, '/api/things', { headers: { host: 'keygate.test#', authorization: `DPoP ${token}`, dpop: await proof({ htu: 'http://keygate.test/' }) } })
    t.equal(root.json<{ code: string }>().code, 'INVALID_DPOP_PROOF', 'a Host with a fragment: no URI, the proof refused')
    // a proof the client made for another server, replayed here with that server's name in Host: the resource's origin decides
    const elsewhere = await send(a.url, '/api/things', { headers: { host: 'evil.test', authorization: `DPoP ${token}`, dpop: await proof({ htu: 'http://evil.test/api/things' }) } })
    t.equal(elsewhere.json<{ code: string }>().code, 'INVALID_DPOP_PROOF', 'a proof for another host, sent with that Host: refused on a resource\'s route')
    const again = await call(b, '/api/things', { authorization: `DPoP ${token}`, dpop: replayed })
    t.equal(again.json<{ code: string }>().code, 'INVALID_DPOP_PROOF', 'the replayed jti at the second gateway (same Redis): refused')
    t.equal(forwarded(), before, 'none of them reached the upstream')
    const ignored = await call(a, '/api/things?x=1', { authorization: `DPoP ${token}`, dpop: await proof({ htu: `${PUBLIC}/api/things?y=2#frag` }) })
    t.equal(ignored.status, 200, 'a query or fragment is ignored on both sides (RFC 9449 §4.3)')
  })

  await t.test('no downgrade, and a route or resource may take DPoP-bound tokens only', async (t) => {
    await addUser(a, 'alice')
    const own = await login(a.url, 'alice')
    t.equal((await call(a, '/api/things', { authorization: `Bearer ${own}` })).status, 200, 'a bearer token where DPoP is allowed: passes')
    const plain = await call(a, '/plain/x', { authorization: `Bearer ${own}` })
    t.equal(plain.json<{ code: string }>().code, 'DPOP_REQUIRED', 'on a route with dpop: required: DPOP_REQUIRED')
    t.same(plain.headers['www-authenticate'], `DPoP algs="ES256 EdDSA Ed25519 RS256 PS256", error="invalid_token", error_description=${
      JSON.stringify(plain.json<{ detail: string }>().detail.replace(/"/g, '\''))}`, 'its one challenge is DPoP\'s')
    const unbound = await call(a, '/api/things', { authorization: `DPoP ${own}`, dpop: await proof({ accessToken: own }) })
    t.equal(unbound.json<{ code: string }>().code, 'INVALID_TOKEN', 'an unbound token sent as DPoP: INVALID_TOKEN')
    const bearerIdp = (await grant(undefined, STRICT)).access_token
    t.equal(decodeJwt(bearerIdp).cnf, undefined, 'without a proof at its token endpoint, the IdP issues a bearer token')
    const strict = await call(a, '/strict/x', { authorization: `Bearer ${bearerIdp}` })
    t.equal(strict.json<{ code: string }>().code, 'DPOP_REQUIRED', 'an IdP bearer token on a resource with dpop: required: DPOP_REQUIRED')
    const bound = (await grant(DPoP, STRICT)).access_token
    const passed = await oauth.protectedResourceRequest(bound, 'GET', new URL(`${STRICT}/x`), undefined, null, { DPoP, [oauth.customFetch]: balancer(a) })
    t.equal(passed.status, 200, 'a bound token for it, with its proof, passes there')
  })

  await t.test('challenges and the resource\'s metadata', async (t) => {
    const missing = await call(a, '/api/things', {})
    t.same(missing.distinct?.['www-authenticate'], [
      `Bearer realm="keygate", resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/api", ` +
      `DPoP algs="ES256 EdDSA Ed25519 RS256 PS256", resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/api"`
    ], 'no token: the Bearer challenge and the DPoP one in one field line, both pointing at the metadata')
    const refused = await call(a, '/api/things', { authorization: `DPoP ${token}`, dpop: await proof({ htm: 'PUT' }) })
    t.match(refused.headers['www-authenticate'], /^Bearer [^,]+, [^,]+, DPoP algs="[^"]+", resource_metadata="[^"]+", error="invalid_dpop_proof", error_description="The DPoP proof's htm/,
      'a refused proof: error="invalid_dpop_proof" on the DPoP challenge')
    const metadata = await send(a.url, '/.well-known/oauth-protected-resource/api')
    t.same(metadata.json<Record<string, unknown>>().dpop_signing_alg_values_supported, ['ES256', 'EdDSA', 'Ed25519', 'RS256', 'PS256'], 'the algorithms')
    t.equal(metadata.json<Record<string, unknown>>().dpop_bound_access_tokens_required, false, 'the API takes bearer tokens too')
    const strict = await send(a.url, '/.well-known/oauth-protected-resource/strict')
    t.equal(strict.json<Record<string, unknown>>().dpop_bound_access_tokens_required, true, 'the DPoP-only resource says so')
  })

  await t.test('decision mode (Traefik\'s forwardAuth): the same checks on the original request', async (t) => {
    const decide = await a.app.keygate.decisions?.listen({ port: 0, host: '127.0.0.1' }) as string
    const original = { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'keygate.test', 'x-forwarded-uri': '/api/things' }
    const good = await proof()
    const allowed = await send(decide, '/decide/traefik', { headers: { ...original, authorization: `DPoP ${token}`, dpop: good } })
    t.equal(allowed.status, 200, 'allowed')
    t.equal(allowed.headers['x-gateway-dpop-jkt'], jkt, 'with the key\'s thumbprint for the upstream')
    const replay = await send(decide, '/decide/traefik', { headers: { ...original, authorization: `DPoP ${token}`, dpop: good } })
    t.equal(replay.status, 401, 'the same proof again: refused')
    t.equal(replay.json<{ code: string }>().code, 'INVALID_DPOP_PROOF')
    const elsewhere = await send(decide, '/decide/traefik',
      { headers: { ...original, 'x-forwarded-uri': '/api/other', authorization: `DPoP ${token}`, dpop: await proof() } })
    t.equal(elsewhere.json<{ code: string }>().code, 'INVALID_DPOP_PROOF', 'a proof for another URI than the original\'s: refused')
    const asBearer = await send(decide, '/decide/traefik', { headers: { ...original, authorization: `Bearer ${token}` } })
    t.equal(asBearer.json<{ code: string }>().code, 'DPOP_REQUIRED', 'the bound token as Bearer: refused')
  })

  await t.test('server nonces: oauth4webapi retries with the nonce, which every gateway of the store accepts', async (t) => {
    const nonced = { dpop: { nonceSeconds: 300 } }
    const c = await gateway({ ...nonced, decision: { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1'] } })
    const d = await gateway(nonced)
    const handle = oauth.DPoP(client, keys)
    const request = async (to: GatewayHandle): Promise<Response> =>
      await oauth.protectedResourceRequest(token, 'GET', new URL(`${PUBLIC}/api/things`), undefined, null, { DPoP: handle, [oauth.customFetch]: balancer(to) })
    let first: unknown
    try {
      await request(c)
    } catch (err) {
      first = err
    }
    t.ok(oauth.isDPoPNonceError(first), 'the first request: 401 use_dpop_nonce, which oauth4webapi recognises')
    const before = forwarded()
    t.equal((await request(c)).status, 200, 'its retry with the nonce (kept by its DPoP handle) passes')
    t.equal((await request(d)).status, 200, 'the same nonce passes at another gateway of the store')
    t.equal(forwarded(), before + 2, 'both forwarded, the refused one not')
    const madeUp = await generateProof(keys, `${PUBLIC}/api/things`, 'GET', 'made-up', token)
    const stale = await call(c, '/api/things', { authorization: `DPoP ${token}`, dpop: madeUp })
    t.equal(stale.json<{ code: string }>().code, 'USE_DPOP_NONCE', 'a made-up nonce: USE_DPOP_NONCE')
    t.match(stale.headers['dpop-nonce'], /^[A-Za-z0-9_-]{32}$/, 'with DPoP-Nonce')
    t.match(stale.headers['www-authenticate'], /, DPoP .*error="use_dpop_nonce"/, 'and error="use_dpop_nonce"')
    // decision mode: the answer carries the nonce for the proxy to pass on
    const decide = await c.app.keygate.decisions?.listen({ port: 0, host: '127.0.0.1' }) as string
    const original = { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'keygate.test', 'x-forwarded-uri': '/api/things' }
    const asked = await send(decide, '/decide/traefik', { headers: { ...original, authorization: `DPoP ${token}`, dpop: await proof() } })
    t.equal(asked.json<{ code: string }>().code, 'USE_DPOP_NONCE', 'decision mode: USE_DPOP_NONCE')
    const nonce = asked.headers['dpop-nonce'] as string
    const withNonce = await generateProof(keys, `${PUBLIC}/api/things`, 'GET', nonce, token)
    t.equal((await send(decide, '/decide/traefik', { headers: { ...original, authorization: `DPoP ${token}`, dpop: withNonce } })).status, 200,
      'and its nonce lets the next proof pass')
  })
})
