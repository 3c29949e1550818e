// The upstream request as a value: rewrite, header policy and identity, with no sockets. The same
// rules through real sockets: forwarding.test.ts.
import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { compilePolicy } from '../../../../gateway/src/mcp-calls/policy.js'
import { route, type RouteConfig } from '../../../../gateway/src/proxy/route.js'
import { forwardedPath, OVERRIDE_HEADERS, upstreamHeaders, upstreamRequest, type DownstreamRequest } from '../../../../gateway/src/proxy/upstream-request.js'
import { NO_SCOPES, scopeSet } from '../../../../gateway/src/users/scopes.js'

const DEFAULTS = { bodyLimit: 1024, timeoutMs: 5000 }
const keyObject = generateKeyPairSync('ed25519').publicKey
const AUTH: AuthState = { user: 'alice', key: { apiKey: 'a'.repeat(64), owner: 'alice', name: 'laptop', keyObject } }
const client = (fields: Partial<DownstreamRequest> = {}): DownstreamRequest => ({
  method: 'GET', target: '/v1/clients/', headers: {}, ip: '127.0.0.9', ...fields
})

t.test('forwardedPath: the rewrite replaces the prefix only, under the upstream URL\'s own path', async (t) => {
  const cases: Array<[string, Partial<RouteConfig> & { prefix: string; upstream: string }, string, string]> = [
    ['no rewrite', { prefix: '/v1/clients/', upstream: 'http://u' }, '/v1/clients/42', '/v1/clients/42'],
    ['upstream path prepended', { prefix: '/v1/', upstream: 'http://u/api/' }, '/v1/x', '/api/v1/x'],
    ['prefix rewritten', { prefix: '/reports/', upstream: 'http://u', rewrite: '/internal/reports/' }, '/reports/a/b', '/internal/reports/a/b'],
    ['segment prefix, rewrite with slash: one slash', { prefix: '/status', upstream: 'http://u', rewrite: '/health/' }, '/status/x', '/health/x'],
    ['a client\'s double slash is kept', { prefix: '/c', upstream: 'http://u', rewrite: '/internal/' }, '/c//x', '/internal//x'],
    ['exact path rewritten whole', { prefix: '/me', exact: true, upstream: 'http://u', rewrite: '/v2/users/me' }, '/me', '/v2/users/me']
  ]
  for (const [label, fields, path, expected] of cases) {
    t.equal(forwardedPath(route({ auth: 'public', ...fields }, DEFAULTS), path), expected, label)
  }
})

t.test('upstreamHeaders: credentials, hop-by-hop, forwarding and identity headers are the gateway\'s', async (t) => {
  const r = route({ prefix: '/v1/', upstream: 'http://upstream.internal:9000', auth: 'signed', removeHeaders: ['cookie'], addHeaders: { 'x-env': 'test' } }, DEFAULTS)
  const headers = upstreamHeaders(client({
    method: 'POST',
    headers: {
      host: 'gateway.example',
      authorization: 'Bearer t',
      'x-api-key': 'k',
      'x-api-signature': 's',
      'x-gateway-user': 'mallory',
      x_gateway_key: 'forged',
      'x-forwarded-for': '6.6.6.6',
      connection: 'keep-alive, x-trace',
      'x-trace': 'hop',
      cookie: 'c=1',
      'content-length': '999',
      'x-env': 'client',
      accept: 'application/json'
    }
  }), { route: r, body: Buffer.from('{}') }, AUTH)
  t.same(headers, {
    host: 'upstream.internal:9000',
    'x-api-key': 'k',
    accept: 'application/json',
    'x-env': 'test',
    'x-forwarded-for': '127.0.0.9',
    'content-length': '2',
    'x-gateway-user': 'alice',
    'x-gateway-key': 'a'.repeat(64),
    'x-gateway-key-name': 'laptop'
  })
})

t.test('upstreamHeaders: method and URL overrides are stripped on every tier, unless the route keeps one', async (t) => {
  const overrides = {
    'x-http-method-override': 'DELETE',
    'x-http-method': 'DELETE',
    'x-method-override': 'DELETE',
    'x-original-url': '/admin',
    'x-rewrite-url': '/admin',
    x_http_method_override: 'PUT',
    accept: 'application/json'
  }
  t.same(OVERRIDE_HEADERS, ['x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-url', 'x-rewrite-url'], 'one list')
  for (const auth of ['public', 'bearer', 'signed'] as const) {
    const r = route({ prefix: '/', upstream: 'http://u', auth }, DEFAULTS)
    t.same(upstreamHeaders(client({ headers: overrides }), { route: r }, null), { host: 'u', accept: 'application/json', 'x-forwarded-for': '127.0.0.9' }, auth)
  }
  const keeping = route({ prefix: '/', upstream: 'http://u', auth: 'signed', keepHeaders: ['x-http-method-override'] }, DEFAULTS)
  t.same(upstreamHeaders(client({ headers: overrides }), { route: keeping }, null), {
    host: 'u', 'x-http-method-override': 'DELETE', x_http_method_override: 'PUT', accept: 'application/json', 'x-forwarded-for': '127.0.0.9'
  }, 'keepHeaders forwards the named one (in either spelling), and only it')
})

t.test('upstreamHeaders: a bodyless method gets no Content-Length; no identity without one', async (t) => {
  const r = route({ prefix: '/', upstream: 'http://u', auth: 'public' }, DEFAULTS)
  t.same(upstreamHeaders(client(), { route: r }, {}), { host: 'u', 'x-forwarded-for': '127.0.0.9' })
  t.same(upstreamHeaders(client({ method: 'DELETE' }), { route: r }, null), { host: 'u', 'x-forwarded-for': '127.0.0.9', 'content-length': '0' })
})

t.test('upstreamHeaders: a route\'s own identity header names and identity token header', async (t) => {
  const r = route({
    prefix: '/',
    upstream: 'http://u',
    auth: 'signed',
    identityHeaders: { user: 'x-user', key: 'x-key', keyName: 'x-key-name', scopes: 'x-scopes', agent: 'x-agent', agentKey: 'x-agent-key', dpopKey: 'x-dpop-jkt' },
    identityToken: { header: 'x-proof', ttlSeconds: 60, audience: 'http://u' }
  }, DEFAULTS)
  const forged = client({ headers: { 'x-user': 'mallory', 'x-proof': 'forged', 'x-key-name': 'forged', 'x-scopes': 'admin' } })
  const headers = upstreamHeaders(forged, { route: r, identityToken: 'jwt' }, AUTH)
  t.same(headers, { host: 'u', 'x-forwarded-for': '127.0.0.9', 'x-user': 'alice', 'x-key': 'a'.repeat(64), 'x-key-name': 'laptop', 'x-proof': 'jwt' })
  const scoped = upstreamHeaders(forged, { route: r, identityToken: 'jwt' }, { ...AUTH, scopes: scopeSet(['clients:read', 'clients:write']) })
  t.equal(scoped['x-scopes'], 'clients:read clients:write', 'the scopes under the route\'s name, space-separated; the client\'s copy dropped')
  t.equal(upstreamHeaders(forged, { route: r }, { ...AUTH, scopes: NO_SCOPES })['x-scopes'], '', 'no scopes: an empty header, never the client\'s')
})

t.test('upstreamHeaders: through a trusted proxy, its chain and forwarding headers; the route\'s own headers still win', async (t) => {
  const r = route({ prefix: '/', upstream: 'http://u', auth: 'public', removeHeaders: ['x-forwarded-host'], addHeaders: { 'x-forwarded-proto': 'https' } }, DEFAULTS)
  const proxied = client({
    ip: '203.0.113.7',
    headers: { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'api.example.com', forwarded: 'for=6.6.6.6' },
    proxyHop: { forwardedFor: '203.0.113.7, 127.0.0.1', headers: { 'x-forwarded-proto': 'http', 'x-forwarded-host': 'api.example.com' } }
  })
  t.same(upstreamHeaders(proxied, { route: r }, null), { host: 'u', 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.7, 127.0.0.1' },
    'the chain with the proxy; X-Forwarded-Host removed by the route, X-Forwarded-Proto set by it; the client\'s copies never')
  t.same(upstreamHeaders(client({ proxyHop: null, headers: { 'x-forwarded-proto': 'http' } }), { route: r }, null),
    { host: 'u', 'x-forwarded-proto': 'https', 'x-forwarded-for': '127.0.0.9' }, 'no trusted proxy: the client\'s address alone')
  const addsFor = route({ prefix: '/', upstream: 'http://u', auth: 'public', addHeaders: { 'x-forwarded-for': 'forged' } }, DEFAULTS)
  t.equal(upstreamHeaders(client(), { route: addsFor }, null)['x-forwarded-for'], '127.0.0.9', 'X-Forwarded-For is always the gateway\'s')
})

t.test('upstreamRequest: origin, rewritten path with the query as sent, body and timeout', async (t) => {
  const r = route({ prefix: '/reports/', upstream: 'https://reports.internal:8443/base/', auth: 'bearer', rewrite: '/v2/', timeoutMs: 1234 }, DEFAULTS)
  const body = Buffer.from('x')
  const request = upstreamRequest(client({ method: 'POST', target: '/reports/a?b=%20&a=1' }), { route: r, body }, { user: 'alice' })
  t.equal(request.origin, 'https://reports.internal:8443')
  t.equal(request.path, '/base/v2/a?b=%20&a=1')
  t.equal(request.method, 'POST')
  t.equal(request.body, body)
  t.equal(request.timeoutMs, 1234)
  t.equal(request.idleMs, 1234, 'the gaps in the answer bounded by the same timeoutMs')
  t.equal(request.headers['x-gateway-user'], 'alice')
  const mcp = route({ prefix: '/mcp', upstream: 'http://mcp.internal', auth: 'bearer', timeoutMs: 1234, mcp: compilePolicy({ streams: { idleSeconds: 60 } }) }, DEFAULTS)
  const streamed = upstreamRequest(client({ method: 'GET', target: '/mcp' }), { route: mcp }, { user: 'alice' })
  t.same([streamed.timeoutMs, streamed.idleMs], [1234, 60_000], 'an MCP route: timeoutMs for the headers, the streams\' idle bound for the gaps')
})
