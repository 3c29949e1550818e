// keygate as a standard OAuth resource server (issue 41), driven by an independent client:
// panva's oauth4webapi, starting from nothing but the API's URL, against a real OpenID Provider
// (oidc-provider, resource indicators on: its tokens carry aud = the resource asked for). The
// client reads the 401's WWW-Authenticate, fetches the resource's metadata (RFC 9728, oauth4webapi
// checks `resource` is the one it asked about), then the authorization server's, gets a token with
// resource= (RFC 8707) and retries; on a 403 insufficient_scope it asks for the scope named and
// retries (step-up). keygate sits behind a balancer at https://keygate.test (the resource's id):
// the client's fetch goes there, the balancer (this test's customFetch) to keygate. Hostile: a
// token for another resource, a token with no aud, a forged Host or X-Forwarded-Host on the
// metadata, and no challenge pointing anywhere but the configured origin. Then the same through a
// real nginx and a real Caddy in decision mode, configured as docs/decision/ says.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { generateKeyPairSync } from 'node:crypto'
import { exportJWK, SignJWT } from 'jose'
import * as oauth from 'oauth4webapi'
import t, { type Test } from 'tap'
import { loadDecisionConfig } from '../../bench/nginx.js'
import { docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { findCaddy, runCaddy } from '../helpers/caddy.js'
import { findNginx, runNginx } from '../helpers/nginx.js'
import { startTestIdp, TEST_IDP_SERVICE_CLIENT } from '../helpers/oidc-provider.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile, routesFromYaml } from '../helpers/routes.js'
import { addUser, login, startTestGateway } from '../helpers/stack.js'

const PUBLIC_ORIGIN = 'https://keygate.test'
const API = `${PUBLIC_ORIGIN}/api` // the resource the test IdP mints tokens for (TEST_IDP_AUDIENCE)
const OTHER = `${PUBLIC_ORIGIN}/other`
const MAPPED = `${PUBLIC_ORIGIN}/mapped`
const nginx = findNginx()
const caddy = findCaddy()

const ROUTES = `resources:
  - id: ${API}
    name: The reports API
    documentation: https://docs.keygate.test/api
    issuers: [corp, local]
  - id: ${OTHER}
    name: Another API
    issuers: [corp]
  - id: ${MAPPED}
    name: An API with scopes of its own
    issuers: [local]
    scopes:
      map: { "reports:read": mapped:read, "reports:write": [mapped:read, mapped:write] }
routes:
  - name: api-read
    prefix: /api/read/
    upstream: UPSTREAM
    auth: bearer
    resource: ${API}
    scopes: [reports:read]
  - name: api-write
    prefix: /api/write/
    upstream: UPSTREAM
    auth: bearer
    resource: ${API}
    scopes: [reports:write]
  - name: other
    prefix: /other/
    upstream: UPSTREAM
    auth: bearer
    resource: ${OTHER}
  - name: mapped-read
    prefix: /mapped/read/
    upstream: UPSTREAM
    auth: bearer
    resource: ${MAPPED}
    scopes: [mapped:read]
  - name: mapped-write
    prefix: /mapped/write/
    upstream: UPSTREAM
    auth: bearer
    resource: ${MAPPED}
    scopes: [mapped:write]
  - name: plain
    prefix: /plain/
    upstream: UPSTREAM
    auth: bearer
`

/** An issuer of the test's own, for tokens oidc-provider will not mint (no aud): its JWKS on a loopback port. */
async function localIssuer (t: Test) {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const jwk = { ...await exportJWK(publicKey), kid: 'local-1', alg: 'ES256', use: 'sig' }
  const server = createServer((_req, res) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify({ keys: [jwk] })) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const mint = async (claims: Record<string, unknown>): Promise<string> => await new SignJWT({ scope: 'reports:read', ...claims })
    .setProtectedHeader({ alg: 'ES256', kid: 'local-1', typ: 'at+jwt' }).setIssuer(issuer).setSubject('robot')
    .setIssuedAt().setExpirationTime('5m').sign(privateKey)
  return { issuer, jwksUri: `${issuer}/jwks`, mint }
}

t.test('a standard OAuth client finds its way in from the API\'s URL alone', async (t) => {
  const idp = await startTestIdp(t)
  const local = await localIssuer(t)
  const upstream = await startRecorder(t)
  // the issuer's own audiences do not repeat the resources': the resources that name it add theirs
  const issuers = routeFile(t, `issuers:
  - name: corp
    issuer: ${idp.issuer}
    audiences: [api://plain]
    accessTokenType: at+jwt
    scopes:
      map: { "api:read": reports:read, "api:write": [reports:read, reports:write] }
  - name: local
    issuer: ${local.issuer}
    jwksUri: ${local.jwksUri}
    audiences: [api://plain]
`, 'issuers.yaml')
  const gw = await startTestGateway(t, {
    store: 'redis',
    upstreamUrl: upstream.url,
    routes: (url) => routesFromYaml(ROUTES, url),
    config: {
      identityProviders: { file: issuers.path, oidc: undefined },
      // a balancer keygate believes: still, nothing it forwards makes the resource's URLs
      clientAddress: { trustedProxies: ['127.0.0.1/32'], header: 'x-forwarded-for' },
      decision: { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1'] }
    }
  })
  // the balancer in front: https://keygate.test/... reaches keygate; anything else is not on the path
  const fetched: string[] = []
  const balancer = async (url: string, init: RequestInit): Promise<Response> => {
    fetched.push(url)
    if (!url.startsWith(`${PUBLIC_ORIGIN}/`)) return await fetch(url, init)
    return await fetch(gw.url + url.slice(PUBLIC_ORIGIN.length), init)
  }
  /**
   * A request as oauth4webapi makes it (protectedResourceRequest): its answer, and the Bearer
   * challenge oauth4webapi parsed from it (it rejects an answer that has one). Without a token, the
   * balancer is told to send none.
   */
  const get = async (path: string, token?: string): Promise<{ response: Response, challenge?: oauth.WWWAuthenticateChallenge }> => {
    const anonymous = async (url: string, init: RequestInit): Promise<Response> => {
      const headers = new Headers(init.headers)
      headers.delete('authorization')
      return await balancer(url, { ...init, headers })
    }
    try {
      const response = await oauth.protectedResourceRequest(token ?? 'none', 'GET', new URL(`${PUBLIC_ORIGIN}${path}`), undefined, null,
        { [oauth.customFetch]: token === undefined ? anonymous : balancer })
      return { response }
    } catch (err) {
      if (!(err instanceof oauth.WWWAuthenticateChallengeError)) throw err
      return { response: err.response, challenge: err.cause.find((c) => c.scheme === 'bearer') }
    }
  }
  const insecure = { [oauth.allowInsecureRequests]: true }
  let decisionUrl: string | undefined
  /** keygate's decision listener, listening from the first proxy test on */
  const deciding = async (): Promise<string> => (decisionUrl ??= await gw.app.keygate.decisions?.listen({ port: 0, host: '127.0.0.1' }) as string)

  t.test('401 -> resource metadata -> AS metadata -> token with resource= -> 200; then a step-up', async (t) => {
    const first = await get('/api/read/reports')
    t.equal(first.response.status, 401)
    t.equal((await first.response.json() as { code: string }).code, 'MISSING_TOKEN', 'the problem+json body as before')
    const bearer = first.challenge
    t.equal(bearer?.parameters.resource_metadata, `${PUBLIC_ORIGIN}/.well-known/oauth-protected-resource/api`, 'the metadata URL, from the id')
    t.equal(bearer?.parameters.error, undefined, 'no token sent: no error')

    const discovery = await oauth.resourceDiscoveryRequest(new URL(API), { [oauth.customFetch]: balancer })
    t.equal(fetched.at(-1), bearer?.parameters.resource_metadata, 'the URL the challenge named is the one RFC 9728 derives from the id')
    t.equal(discovery.headers.get('cache-control'), 'public, max-age=300')
    t.equal(discovery.headers.get('access-control-allow-origin'), '*', 'readable by a client in a browser')
    const rs = await oauth.processResourceDiscoveryResponse(new URL(API), discovery)
    t.same(rs, {
      resource: API,
      authorization_servers: [idp.issuer, local.issuer],
      // corp's names (its map), and local's, which has no map: keygate's names as they are
      scopes_supported: ['api:read', 'api:write', 'reports:read', 'reports:write'],
      bearer_methods_supported: ['header'],
      resource_name: 'The reports API',
      resource_documentation: 'https://docs.keygate.test/api',
      dpop_signing_alg_values_supported: ['ES256', 'EdDSA', 'Ed25519', 'RS256', 'PS256'],
      dpop_bound_access_tokens_required: false
    }, 'every member from configuration; scopes in each issuer\'s terms')

    const issuer = new URL(rs.authorization_servers?.[0] as string)
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure }))
    const client: oauth.Client = { client_id: TEST_IDP_SERVICE_CLIENT.id }
    const tokenFor = async (scope: string, resource: string): Promise<string> => {
      const response = await oauth.clientCredentialsGrantRequest(as, client, oauth.ClientSecretBasic(TEST_IDP_SERVICE_CLIENT.secret),
        { scope, resource }, insecure)
      return (await oauth.processClientCredentialsResponse(as, client, response)).access_token
    }
    const token = await tokenFor('api:read', rs.resource)
    const ok = (await get('/api/read/reports?first=1', token)).response
    t.equal(ok.status, 200, await ok.text())
    const seen = upstream.requests.find((r) => r.url === '/api/read/reports?first=1')
    t.equal(seen?.headers['x-gateway-user'], 'corp:keygate-service')
    t.equal(seen?.headers.authorization, undefined, 'no token passthrough: the upstream never sees the client\'s token')

    // step-up: the write route wants reports:write, which only api:write maps to
    const short = await get('/api/write/x', token)
    t.equal(short.response.status, 403)
    t.equal((await short.response.json() as { code: string }).code, 'INSUFFICIENT_SCOPE')
    const asked = short.challenge
    t.equal(asked?.parameters.error, 'insufficient_scope')
    t.equal(asked?.parameters.scope, 'api:write', 'the scope to ask the IdP for, in its terms')
    t.equal(asked?.parameters.resource_metadata, `${PUBLIC_ORIGIN}/.well-known/oauth-protected-resource/api`)
    const more = await tokenFor(asked?.parameters.scope as string, rs.resource)
    t.equal((await get('/api/write/x?stepped=1', more)).response.status, 200, 'with the scope asked for: through')
  })

  t.test('hostile: a token for another resource, none for any, a forged Host; keygate\'s own tokens still work', async (t) => {
    const forApi = await idp.clientCredentialsToken(['api:read'])
    const onOther = await get('/other/x', forApi)
    t.equal(onOther.response.status, 401, 'a token the same IdP minted for another resource')
    const refused = await onOther.response.json() as { code: string, detail: string }
    t.equal(refused.code, 'INVALID_TOKEN')
    t.match(refused.detail, `This token is for ${API}, not for ${OTHER}`)
    const bearer = onOther.challenge
    t.equal(bearer?.parameters.error, 'invalid_token')
    t.match(bearer?.parameters.error_description ?? '', `not for ${OTHER}`)
    t.equal(bearer?.parameters.resource_metadata, `${PUBLIC_ORIGIN}/.well-known/oauth-protected-resource/other`)
    t.equal((await get('/plain/x', forApi)).response.status, 401, 'nor on a route of no resource: the issuer\'s own audiences only')
    t.equal(upstream.requests.filter((r) => r.url === '/other/x' || r.url === '/plain/x').length, 0, 'neither reached the upstream')

    const noAud = await get('/api/read/x', await local.mint({}))
    t.equal(noAud.response.status, 401, 'a token with no aud')
    t.match(await noAud.response.json(), { code: 'INVALID_TOKEN', detail: /names no audience/ })
    t.equal(noAud.challenge?.parameters.error, 'invalid_token')
    t.equal((await get('/api/read/x?local=1', await local.mint({ aud: API }))).response.status, 200, 'the same issuer\'s token for the resource: through')

    const forged = { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'http', forwarded: 'host=evil.example;proto=http' }
    const honest = await send(gw.url, '/.well-known/oauth-protected-resource/api')
    const lied = await send(gw.url, '/.well-known/oauth-protected-resource/api', { headers: forged })
    t.equal(lied.status, 200)
    t.equal(lied.text, honest.text, 'the same document, whatever the Host says')
    t.notMatch(lied.text, 'evil.example')
    const unauthenticated = await send(gw.url, '/api/read/x', { headers: forged })
    t.equal(unauthenticated.status, 401)
    const metadataUrl = /resource_metadata="([^"]*)"/.exec(String(unauthenticated.headers['www-authenticate']))?.[1]
    t.equal(new URL(metadataUrl ?? 'x:').origin, PUBLIC_ORIGIN, 'the challenge points at the configured origin, never the forged one')
    t.match(await send(gw.url, '/.well-known/oauth-protected-resource/nothing'), { status: 404, headers: { 'content-type': /problem\+json/ } })

    await addUser(gw, 'ann')
    await gw.app.keygate.users.setScopes('ann', ['reports:read'])
    t.equal((await get('/api/read/x?own=1', await login(gw.url, 'ann'))).response.status, 200, 'keygate\'s own token: keygate is its resource server')
  })

  t.test('a resource\'s own scope map: the same IdP scopes mean its scopes on its routes, and its metadata and challenges say so', async (t) => {
    const metadata = await send(gw.url, '/.well-known/oauth-protected-resource/mapped')
    t.match(metadata.json(), { resource: MAPPED, authorization_servers: [local.issuer], scopes_supported: ['reports:read', 'reports:write'] },
      'asked for in the IdP\'s terms, through the resource\'s map')
    const reader = await local.mint({ aud: MAPPED, scope: 'reports:read' })
    const read = await get('/mapped/read/x', reader)
    t.equal(read.response.status, 200, 'reports:read is mapped:read on this resource')
    t.equal(upstream.requests.find((r) => r.url === '/mapped/read/x')?.headers['x-gateway-scopes'], 'mapped:read',
      'the upstream is told the resource\'s scopes, not the IdP\'s')
    const short = await get('/mapped/write/x', reader)
    t.equal(short.response.status, 403)
    t.equal(short.challenge?.parameters.scope, 'reports:write', 'the step-up names the IdP scope the resource maps to mapped:write')
    t.equal((await get('/mapped/write/x?stepped=1', await local.mint({ aud: MAPPED, scope: 'reports:write' }))).response.status, 200)
    // the same token kind on the issuer's other resource: its scopes are taken as named there (local has no map)
    t.equal((await get('/api/read/x?unmapped=1', await local.mint({ aud: API, scope: 'reports:read' }))).response.status, 200)
    t.equal(upstream.requests.find((r) => r.url === '/api/read/x?unmapped=1')?.headers['x-gateway-scopes'], 'reports:read')
  })

  t.test('decision mode behind a real nginx, configured as docs/decision/nginx.md says', { skip: 'reason' in nginx ? nginx.reason : false }, async (t) => {
    const decisionUrl = await deciding()
    const metadataLocation = docSnippet('docs/decision/nginx.md', 'Protected resources', 'nginx').split('\n').map((line) => `    ${line}`).join('\n')
    const config = (port: number): string =>
      loadDecisionConfig()(port, decisionUrl, upstream.url).replace('    location / {', `${metadataLocation}\n    location / {`)
    const proxy = await runNginx(t, 'path' in nginx ? nginx.path : '', config)
    const missing = await send(proxy.url, '/api/read/x')
    t.equal(missing.status, 401)
    t.match(String(missing.headers['www-authenticate']), `resource_metadata="${PUBLIC_ORIGIN}/.well-known/oauth-protected-resource/api"`)
    const wrong = await send(proxy.url, '/other/x', { headers: { authorization: `Bearer ${await idp.clientCredentialsToken(['api:read'])}` } })
    t.equal(wrong.status, 401)
    t.match(String(wrong.headers['www-authenticate']), /error="invalid_token"/)
    const short = await send(proxy.url, '/api/write/x', { headers: { authorization: `Bearer ${await idp.clientCredentialsToken(['api:read'])}` } })
    t.equal(short.status, 403)
    t.match(String(short.headers['www-authenticate']), 'error="insufficient_scope", scope="api:write"')
    const metadata = await send(proxy.url, '/.well-known/oauth-protected-resource/api', { headers: { host: 'evil.example' } })
    t.equal(metadata.status, 200)
    t.equal(metadata.text, (await send(gw.url, '/.well-known/oauth-protected-resource/api')).text, 'the same document through nginx')
    t.equal(metadata.headers['cache-control'], 'public, max-age=300')
  })

  t.test('Traefik\'s and Envoy\'s decision requests: the challenge is in keygate\'s answer, which they hand the client', async (t) => {
    const decide = await deciding()
    const token = await idp.clientCredentialsToken(['api:read'])
    const traefik = await send(decide, '/decide/traefik', {
      headers: {
        'x-forwarded-method': 'GET',
        'x-forwarded-uri': '/api/write/x',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-proto': 'https',
        authorization: `Bearer ${token}`
      }
    })
    t.equal(traefik.status, 403)
    t.equal(traefik.headers['www-authenticate'],
      `Bearer realm="keygate", error="insufficient_scope", scope="api:write", resource_metadata="${PUBLIC_ORIGIN}/.well-known/oauth-protected-resource/api"`)
    const envoy = await send(decide, '/decide/envoy/other/x', { headers: { host: 'evil.example', authorization: `Bearer ${token}` } })
    t.equal(envoy.status, 401)
    t.match(String(envoy.headers['www-authenticate']), `resource_metadata="${PUBLIC_ORIGIN}/.well-known/oauth-protected-resource/other", error="invalid_token"`)
    const metadata = await send(decide, '/.well-known/oauth-protected-resource/other')
    t.match(metadata.json(), { resource: OTHER, authorization_servers: [idp.issuer], scopes_supported: [] })
    t.equal(metadata.headers['cache-control'], 'public, max-age=300', 'the decision listener\'s no-store is for decisions only')
  })

  t.test('decision mode behind a real Caddy, with docs/decision/caddy.md\'s Caddyfile', { skip: 'reason' in caddy ? caddy.reason : false }, async (t) => {
    const decisionUrl = await deciding()
    const proxy = await runCaddy(t, 'path' in caddy ? caddy.path : '', docSnippet('docs/decision/caddy.md', 'The Caddyfile', 'caddyfile'), {
      KEYGATE_DECISION: new URL(decisionUrl).host,
      KEYGATE_PUBLIC: new URL(gw.url).host,
      UPSTREAM: new URL(upstream.url).host
    })
    const missing = await send(proxy.url, '/api/read/x')
    t.equal(missing.status, 401)
    t.match(String(missing.headers['www-authenticate']), `resource_metadata="${PUBLIC_ORIGIN}/.well-known/oauth-protected-resource/api"`)
    const short = await send(proxy.url, '/api/write/x', { headers: { authorization: `Bearer ${await idp.clientCredentialsToken(['api:read'])}` } })
    t.equal(short.status, 403)
    t.match(String(short.headers['www-authenticate']), 'error="insufficient_scope", scope="api:write"')
    const metadata = await send(proxy.url, '/.well-known/oauth-protected-resource/api', { headers: { 'x-forwarded-host': 'evil.example' } })
    t.equal(metadata.status, 200)
    t.equal(metadata.text, (await send(gw.url, '/.well-known/oauth-protected-resource/api')).text, 'the same document through Caddy')
  })
})

t.test('keygate does not start when a resource names an issuer the issuers file does not have', async (t) => {
  await t.rejects(startTestGateway(t, {
    store: 'memory',
    upstreamUrl: 'http://127.0.0.1:9',
    routes: (url) => routesFromYaml(ROUTES, url)
  }), { name: 'RouteFileError', message: /names the issuer "corp", which is not a trusted issuer \(none is configured/ })
})
