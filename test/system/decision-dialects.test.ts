// Decision mode as Envoy (ext_authz http_service), Traefik (forwardAuth) and ingress-nginx
// (auth-url) ask: a real keygate decision listener on Redis, and decision requests written byte
// for byte on raw sockets in the shape each proxy sends (the comment above each names where that
// shape comes from: /work/notes22/dialects.md, which cites the proxies' docs and source). None of
// the three proxies runs here (Envoy and Traefik cannot be installed, ingress-nginx is
// Kubernetes): what is tested is keygate's side of the exchange. The configuration blocks of
// docs/decision/{envoy,traefik,ingress-nginx}.md are read from the pages and checked against the
// same contract: the paths, headers and limits they name are the ones these requests use.
import { createHash } from 'node:crypto'
import { connect } from 'node:net'
import { createSigner, httpbis } from 'http-message-signatures'
import t, { type Test } from 'tap'
import { parseAllDocuments, parse as parseYaml } from 'yaml'
import { DEFAULT_BODY_LIMIT, loadConfig, type GatewayConfig } from '../../gateway/src/config/env.js'
import { ERRORS } from '../../gateway/src/errors.js'
import { DEFAULT_IDENTITY_HEADERS, route, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { DEFAULT_IDENTITY_TOKEN_HEADER } from '../../gateway/src/proxy/route-file.js'
import { blockSettings, docSnippet } from '../helpers/docs.js'
import { rsaKeyPair, signedHeaders, type TestKeyPair } from '../helpers/keys.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway } from '../helpers/stack.js'

/** the route limit the body tests use; the docs' limits must be at least keygate's default */
const BODY_LIMIT = 2048
const DEFAULTS = { bodyLimit: BODY_LIMIT, timeoutMs: 5000 }

/** an MCP route (docs/mcp.md): whoami needs mcp:read (alice has it), write-* notes:write (she has not); echo once an hour a user */
const MCP_ROUTES = `routes:
  - path: /mcp
    upstream: UPSTREAM
    auth: bearer
    scopes: [mcp:use]
    mcp:
      tools: { whoami: [mcp:read], "write-*": [notes:write], echo: [mcp:read] }
      default: deny
      origins: [https://app.example.com]
      toolRateLimits: { echo: [{ by: user, limit: 1, window: 1h }] }
`

function routes (upstream: string): RouteConfig[] {
  return [
    route({ name: 'clients', prefix: '/v1/clients/', upstream, auth: 'signed', methods: ['GET', 'POST'] }, DEFAULTS),
    route({ name: 'me', prefix: '/v1/me/', upstream, auth: 'bearer', methods: ['GET'] }, DEFAULTS),
    ...routesFromYaml(MCP_ROUTES, upstream)
  ]
}

/** A tools/call message, as an MCP client sends it */
const toolCall = (name: string, id: number | string): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } })

/** The host the client addressed, as each proxy reports it (Envoy's :authority, Traefik's X-Forwarded-Host, ingress-nginx's X-Original-URL). */
const CLIENT_HOST = 'api.example.com:8443'

interface Answer { status: number; headers: Record<string, string[]>; body: string }

/**
 * Writes `head` (the request line and header lines, as a proxy writes them) and `body` on a new
 * connection, reads one answer (keygate always sends Content-Length), and closes. The connection
 * is not marked Connection: close: the proxies keep theirs open.
 */
async function ask (url: string, head: string[], body: string | Buffer = ''): Promise<Answer> {
  const { hostname, port } = new URL(url)
  return await new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    let received = Buffer.alloc(0)
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      const end = received.indexOf('\r\n\r\n')
      if (end === -1) return
      const lines = received.subarray(0, end).toString('latin1').split('\r\n')
      const headers: Record<string, string[]> = {}
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':')
        const name = line.slice(0, colon).toLowerCase()
        ;(headers[name] ??= []).push(line.slice(colon + 1).trim())
      }
      const length = Number(headers['content-length']?.[0] ?? 0)
      if (received.length < end + 4 + length) return
      socket.destroy()
      resolve({ status: Number((lines[0] ?? '').split(' ')[1]), headers, body: received.subarray(end + 4, end + 4 + length).toString('utf8') })
    })
    socket.on('error', reject)
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')))
    socket.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(body)]))
  })
}

/** One header of the answer, which must appear once at most. */
/**
 * What inline mode never forwards of a client's and Envoy does unless told (docs/routes.md, "What
 * the upstream receives"): every Envoy answer names them for removal, present or not.
 */
const INLINE_DROPS = ['authorization', 'x-api-signature', 'dpop', 'ratelimit', 'ratelimit-policy', 'forwarded', 'x-forwarded-host', 'x-real-ip',
  'x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-url', 'x-rewrite-url']
/** the names of an Envoy answer's x-envoy-auth-headers-to-remove, sorted */
const removed = (answer: Answer): string[] => (header(answer, 'x-envoy-auth-headers-to-remove') ?? '').split(',').filter((name) => name !== '').sort()

function header (answer: Answer, name: string): string | undefined {
  const values = answer.headers[name]
  if (values !== undefined && values.length > 1) throw new Error(`${name} answered ${values.length} times`)
  return values?.[0]
}

const problemOf = (answer: Answer): Record<string, unknown> => JSON.parse(answer.body) as Record<string, unknown>

/** A chunked body as Go's client writes it (one chunk, then the last). */
const chunked = (body: string): string => `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`

/** `Name: value` lines of a header record. */
const lines = (headers: Record<string, string>): string[] => Object.entries(headers).map(([name, value]) => `${name}: ${value}`)

const digestOf = (body: string): string => `sha-256=:${createHash('sha256').update(body).digest('base64')}:`

/** The headers of an RFC 9421 request signed by http-message-signatures for `origin` + `target` (what the proxy reports). */
async function rfcHeaders (keys: TestKeyPair, token: string, method: string, origin: string, target: string, body?: string): Promise<Record<string, string>> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, host: new URL(origin).host }
  if (body !== undefined) {
    headers['content-type'] = 'application/json'
    headers['content-digest'] = digestOf(body)
  }
  const created = new Date()
  const signed = await httpbis.signMessage({
    key: createSigner(keys.privateKey, 'rsa-v1_5-sha256', keys.apiKey),
    fields: body === undefined ? ['@method', '@target-uri'] : ['@method', '@target-uri', 'content-type', 'content-digest'],
    params: ['keyid', 'alg', 'created', 'expires'],
    paramValues: { created, expires: new Date(created.getTime() + 300_000) }
  }, { method, url: origin + target, headers })
  const out = Object.fromEntries(Object.entries(signed.headers).map(([name, value]) => [name.toLowerCase(), String(value)]))
  delete out.host
  return out
}

// ---------------------------------------------------------------- the docs' configurations

const ENVOY_PAGE = 'docs/decision/envoy.md'
const TRAEFIK_PAGE = 'docs/decision/traefik.md'
const INGRESS_PAGE = 'docs/decision/ingress-nginx.md'

type Yaml = Record<string, any>

const envoyConfig = parseYaml(docSnippet(ENVOY_PAGE, 'The Envoy configuration', 'yaml')) as Yaml
const hcm = envoyConfig.static_resources.listeners[0].filter_chains[0].filters[0].typed_config as Yaml
const extAuthz = (hcm.http_filters as Yaml[])[0]?.typed_config as Yaml
const exactNames = (list: Yaml | undefined): string[] => ((list?.patterns ?? []) as Yaml[]).filter((p) => p.exact !== undefined).map((p) => String(p.exact))
const prefixes = (list: Yaml | undefined): string[] => ((list?.patterns ?? []) as Yaml[]).filter((p) => p.prefix !== undefined).map((p) => String(p.prefix))
/**
 * the client headers Envoy sends the HTTP service: the docs' allowed_headers and those always
 * sent (ext_authz.proto: Host, Method, Path, Content-Length, Authorization)
 */
const ENVOY_SENDS = new Set([...exactNames(extAuthz.allowed_headers), 'host', 'content-length', 'authorization'])
/** headers Envoy adds to every check request itself (check_request_utils.cc, async_client_impl.cc) */
const ENVOY_OWN = new Set(['x-envoy-internal', 'x-envoy-auth-partial-body', 'x-forwarded-for'])
/** the allowed_headers prefixes: a client header of such a name goes to keygate too */
const ENVOY_SENDS_PREFIXED = prefixes(extAuthz.allowed_headers)
const envoySends = (name: string): boolean => ENVOY_SENDS.has(name) || ENVOY_OWN.has(name) || ENVOY_SENDS_PREFIXED.some((prefix) => name.startsWith(prefix))
const ENVOY_PREFIX = extAuthz.http_service.path_prefix as string

const traefikConfig = parseYaml(docSnippet(TRAEFIK_PAGE, 'The dynamic configuration', 'yaml')) as Yaml
const forwardAuth = traefikConfig.http.middlewares.keygate.forwardAuth as Yaml
/** the address's path and query (?forwardBody=true: the middleware sends every body) */
const TRAEFIK_ADDRESS = new URL(forwardAuth.address as string)
const TRAEFIK_PATH = `${TRAEFIK_ADDRESS.pathname}${TRAEFIK_ADDRESS.search}`

const ingressDocs = parseAllDocuments(docSnippet(INGRESS_PAGE, 'The Ingress and its ConfigMap', 'yaml')).map((d) => d.toJS() as Yaml)
const authHeaders = ingressDocs.find((d) => d.kind === 'ConfigMap') as Yaml
const ingress = ingressDocs.find((d) => d.kind === 'Ingress') as Yaml
const annotation = (doc: Yaml, name: string): string => doc.metadata.annotations[`nginx.ingress.kubernetes.io/${name}`] as string
const INGRESS_AUTH_URL = new URL(annotation(ingress, 'auth-url'))
/** the ConfigMap's X-Original-Content-Length as nginx expands it for a request with this Content-Length (none: '') */
const originalContentLength = (contentLength: string): string =>
  (authHeaders.data['X-Original-Content-Length'] as string).replace('$content_length', contentLength)

/** Envoy's node address, which its HTTP client appends to every check request's X-Forwarded-For (listed in the Envoy page's settings) */
const ENVOY_NODE = '10.0.0.5'

t.test('decision dialects on the wire, as each proxy asks', async (t) => {
  const gw = await startTestGateway(t, {
    store: 'redis',
    upstreamUrl: 'http://127.0.0.1:9',
    routes,
    config: { decision: { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1', ENVOY_NODE] } }
  })
  const decide = await gw.app.keygate.decisions!.listen({ port: 0, host: '127.0.0.1' })
  const decideHost = new URL(decide).host
  await addUser(gw, 'alice')
  await gw.app.keygate.users.setScopes('alice', ['mcp:use', 'mcp:read'])
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'alice laptop')).status, 201)

  const seed = (method: string, target: string, body?: string): Record<string, string> =>
    signedHeaders({ keys, token, method, target, ...(body !== undefined && { body }) })

  /** The identity of an allowed decision: alice, her key, and no body. */
  const allowedAsAlice = (t: Test, res: Answer): void => {
    t.equal(res.status, 200, res.body)
    t.equal(header(res, 'x-gateway-user'), 'alice')
    t.equal(header(res, 'x-gateway-key'), keys.apiKey)
    t.equal(header(res, 'x-gateway-key-name'), 'alice laptop')
    t.equal(header(res, 'cache-control'), 'no-store')
    t.equal(res.body, '', 'an allowed decision has no body')
  }

  /** A refusal with keygate's own status and problem+json body (Envoy, Traefik). */
  const refusedWith = (t: Test, res: Answer, status: number, code: string): Record<string, unknown> => {
    t.equal(res.status, status, res.body)
    t.match(header(res, 'content-type'), /^application\/problem\+json/)
    const problem = problemOf(res)
    t.equal(problem.code, code)
    t.same(JSON.parse(header(res, 'x-keygate-problem') ?? '{}'), problem, 'X-Keygate-Problem is the same problem on one line')
    return problem
  }

  /**
   * An MCP route's refusal, as the proxy hands it to the client (Envoy, Traefik): keygate's status,
   * a JSON-RPC error with the request's id (null when none was read) and the problem as its data.
   */
  const rpcRefused = (t: Test, res: Answer, status: number, code: string, rpcCode: number, id: number | string | null): void => {
    t.equal(res.status, status, res.body)
    t.match(header(res, 'content-type'), /^application\/json/, 'a JSON-RPC error, which MCP clients read')
    t.match(JSON.parse(res.body), { jsonrpc: '2.0', id, error: { code: rpcCode, data: { code, status } } }, `${code}, JSON-RPC ${rpcCode}`)
  }
  const mcpCalls = { whoami: toolCall('whoami', 1), forbidden: toolCall('write-note', 'req-2') }

  t.test('Envoy ext_authz http_service', async (t) => {
    // The check request (dialects.md 1.1, 1.4): the original method; path_prefix + the original
    // :path, query included (ext_authz_http_impl.cc RawHttpClientImpl::check, StrCat(pathPrefix,
    // :path)); Host = the original :authority; only allowed_headers plus Host, Method, Path,
    // Content-Length, Authorization (ext_authz.proto:229-252); content-length 0 without a body,
    // the body's length with with_request_body (ext_authz.proto:240-246); x-envoy-auth-partial-body
    // whenever a body was buffered (check_request_utils.cc setHttpRequest); x-envoy-internal and
    // Envoy's own address appended to x-forwarded-for (async_client_impl.cc sendHeaders). Lower-case names.
    const check = async (method: string, target: string, headers: Record<string, string>, body?: string, partial = false): Promise<Answer> => {
      const all: Record<string, string> = {
        host: CLIENT_HOST,
        'content-length': String(Buffer.byteLength(body ?? '')),
        ...headers,
        'x-forwarded-proto': 'http',
        'x-request-id': 'c0ffee00-0000-4000-8000-000000000001',
        ...(body !== undefined && { 'x-envoy-auth-partial-body': String(partial) }),
        'x-envoy-internal': 'true',
        'x-forwarded-for': `192.0.2.7,${ENVOY_NODE}`
      }
      for (const name of Object.keys(all)) {
        if (!envoySends(name)) throw new Error(`Envoy with ${ENVOY_PAGE}'s configuration does not send ${name} to keygate`)
      }
      return await ask(decide, [`${method} ${ENVOY_PREFIX}${target} HTTP/1.1`, ...lines(all)], body)
    }

    t.test('a seed-signed GET with a query: 200, the identity, and the identity headers not set to remove', async (t) => {
      const target = '/v1/clients/?limit=2&q=a%20b'
      const res = await check('GET', target, seed('GET', target))
      allowedAsAlice(t, res)
      t.same(removed(res), ['x-gateway-agent', 'x-gateway-agent-key', 'x-gateway-dpop-jkt', 'x-keygate-content-digest', ...INLINE_DROPS].sort())
    })

    t.test('an RFC 9421 GET signed for the authority Envoy reports: 200', async (t) => {
      const target = '/v1/clients/?limit=3'
      const res = await check('GET', target, await rfcHeaders(keys, token, 'GET', `http://${CLIENT_HOST}`, target))
      allowedAsAlice(t, res)
      t.same(removed(res), ['x-gateway-agent', 'x-gateway-agent-key', 'x-gateway-dpop-jkt', 'x-keygate-content-digest', ...INLINE_DROPS].sort())
    })

    t.test('a client\'s copies of keygate\'s headers, of any name, are named for removal; keygate\'s own never', async (t) => {
      const target = '/v1/clients/?forged'
      const res = await check('GET', target, {
        ...seed('GET', target),
        'x-gateway-user': 'mallory',
        'x-gateway-tenant': 'forged',
        'x-keygate-status': '200',
        'x-keygate-anything': 'forged'
      })
      allowedAsAlice(t, res)
      t.same(removed(res), ['x-gateway-agent', 'x-gateway-agent-key', 'x-gateway-dpop-jkt', 'x-gateway-tenant', 'x-keygate-anything',
        'x-keygate-content-digest', 'x-keygate-status',
        ...INLINE_DROPS].sort())
      t.notOk(removed(res).includes('x-gateway-user'), 'keygate sets x-gateway-user over the client\'s copy')
    })

    t.test('a bearer route: the key headers keygate did not set are named for removal', async (t) => {
      const res = await check('GET', '/v1/me/', { authorization: `Bearer ${token}` })
      t.equal(res.status, 200, res.body)
      t.equal(header(res, 'x-gateway-user'), 'alice')
      t.equal(header(res, 'x-gateway-key'), undefined)
      t.same(removed(res),
        ['x-gateway-agent', 'x-gateway-agent-key', 'x-gateway-dpop-jkt', 'x-gateway-key', 'x-gateway-key-name', 'x-keygate-content-digest',
          ...INLINE_DROPS].sort())
    })

    t.test('with_request_body: a seed-signed POST with its body verifies; the same headers with another body do not', async (t) => {
      const body = '{"name":"envoy-ada"}'
      const target = '/v1/clients/?src=envoy'
      const signed = { 'content-type': 'application/json', ...seed('POST', target, body) }
      allowedAsAlice(t, await check('POST', target, signed, body))
      refusedWith(t, await check('POST', target, signed, '{"name":"envoy-eve"}'), 401, 'INVALID_SIGNATURE')
    })

    t.test('x-envoy-auth-partial-body: true (allow_partial_message): 413, keygate verifies whole bodies only', async (t) => {
      const body = '{"name":"envoy-cut'
      const target = '/v1/clients/'
      refusedWith(t, await check('POST', target, { 'content-type': 'application/json', ...seed('POST', target, body) }, body, true), 413, 'PAYLOAD_TOO_LARGE')
    })

    t.test('a body over the route\'s bodyLimit: 413', async (t) => {
      const body = JSON.stringify({ name: 'x'.repeat(BODY_LIMIT) })
      const target = '/v1/clients/'
      refusedWith(t, await check('POST', target, { 'content-type': 'application/json', ...seed('POST', target, body) }, body), 413, 'PAYLOAD_TOO_LARGE')
    })

    t.test('an MCP route: each tools/call judged on the body Envoy sends; a cut or missing body never allowed', async (t) => {
      const mcp = { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18' }
      const allowed = await check('POST', '/mcp', mcp, mcpCalls.whoami)
      t.equal(allowed.status, 200, allowed.body)
      t.equal(header(allowed, 'x-gateway-user'), 'alice')
      const forbidden = await check('POST', '/mcp', mcp, mcpCalls.forbidden)
      rpcRefused(t, forbidden, 403, 'INSUFFICIENT_SCOPE', -32001, 'req-2')
      t.match(header(forbidden, 'www-authenticate'), /error="insufficient_scope", scope="mcp:use notes:write"/, 'the step-up challenge')
      rpcRefused(t, await check('POST', '/mcp', mcp, '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","name":"write-note"}}'),
        400, 'MCP_PARSE_ERROR', -32700, null)
      rpcRefused(t, await check('POST', '/mcp', { ...mcp, origin: 'https://evil.example' }, mcpCalls.whoami), 403, 'ORIGIN_NOT_ALLOWED', -32001, null)
      // a tool's own limit (mcp.toolRateLimits), decided as inline
      t.equal((await check('POST', '/mcp', mcp, toolCall('echo', 8))).status, 200, 'a tool with a limit of its own: its first call')
      const over = await check('POST', '/mcp', mcp, toolCall('echo', 9))
      rpcRefused(t, over, 429, 'RATE_LIMITED', -32001, 9)
      t.match(header(over, 'ratelimit-policy'), /^"tool-user-1h";q=1;w=3600$/, 'the second: refused by the tool\'s limit')
      // allow_partial_message: the first bytes only, marked; the mark in any other form than Envoy's
      // "false" (two copies: Node reads "false, true") is no whole body's either
      const cut = mcpCalls.whoami.slice(0, 40)
      rpcRefused(t, await check('POST', '/mcp', mcp, cut, true), 413, 'PAYLOAD_TOO_LARGE', -32600, null)
      const twice = await ask(decide, [`POST ${ENVOY_PREFIX}/mcp HTTP/1.1`, `host: ${CLIENT_HOST}`, `content-length: ${cut.length}`, ...lines(mcp),
        'x-envoy-auth-partial-body: false', 'x-envoy-auth-partial-body: true', `x-forwarded-for: 192.0.2.7,${ENVOY_NODE}`], cut)
      rpcRefused(t, twice, 413, 'PAYLOAD_TOO_LARGE', -32600, null)
      // a body cut without the mark is no JSON-RPC message; no body (with_request_body off) is no message
      rpcRefused(t, await check('POST', '/mcp', mcp, cut), 400, 'MCP_PARSE_ERROR', -32700, null)
      rpcRefused(t, await check('POST', '/mcp', mcp), 400, 'MCP_INVALID_MESSAGE', -32600, null)
    })
  })

  t.test('Traefik forwardAuth', async (t) => {
    // The auth request (dialects.md 2.1, 2.5): always GET to the address's path (forward.go:161-166);
    // Host = the address's host; the client's headers (Go canonicalises names); X-Forwarded-For =
    // Traefik's peer, -Host = the client's Host, -Method, -Port, -Proto, -Uri = RequestURI()
    // (forward.go:446-474); Accept-Encoding: gzip from Go's client. forwardBody (forward.go:175-207):
    // the body on the GET, chunked before v3.6.24/v3.7.9, with the original's Content-Length since.
    const forwarded = (method: string, target: string): string[] => [
      'X-Forwarded-For: 192.0.2.7',
      `X-Forwarded-Host: ${CLIENT_HOST}`,
      `X-Forwarded-Method: ${method}`,
      'X-Forwarded-Port: 8443',
      'X-Forwarded-Proto: http',
      `X-Forwarded-Uri: ${target}`
    ]
    const canonical = (headers: Record<string, string>): string[] =>
      lines(Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.replace(/(^|-)([a-z])/g, (m) => m.toUpperCase()), value])))
    const authRequest = (headers: string[], path = TRAEFIK_PATH): string[] =>
      [`GET ${path} HTTP/1.1`, `Host: ${decideHost}`, 'User-Agent: curl/8', ...headers, 'Accept-Encoding: gzip']

    t.test('a seed-signed GET: 200 with the identity (no Envoy header)', async (t) => {
      const target = '/v1/clients/?a=1'
      const res = await ask(decide, authRequest([...canonical(seed('GET', target)), ...forwarded('GET', target)]))
      allowedAsAlice(t, res)
      t.equal(header(res, 'x-envoy-auth-headers-to-remove'), undefined)
    })

    t.test('forwardBody, v3.3 to v3.6.23: the body chunked on the GET, verified', async (t) => {
      const body = '{"name":"traefik-chunked"}'
      const target = '/v1/clients/?a=2'
      const res = await ask(decide, authRequest([
        'Transfer-Encoding: chunked', 'Content-Type: application/json', ...canonical(seed('POST', target, body)), ...forwarded('POST', target)
      ]), chunked(body))
      allowedAsAlice(t, res)
    })

    t.test('forwardBody, v3.6.24 and later: the original\'s Content-Length, verified; another body refused', async (t) => {
      const body = '{"name":"traefik-length"}'
      const target = '/v1/clients/?a=3'
      const head = authRequest([
        `Content-Length: ${Buffer.byteLength(body)}`, 'Content-Type: application/json', ...canonical(seed('POST', target, body)), ...forwarded('POST', target)
      ])
      allowedAsAlice(t, await ask(decide, head, body))
      refusedWith(t, await ask(decide, head, '{"name":"traefik-lengtx"}'), 401, 'INVALID_SIGNATURE')

      const rfcBody = '{"name":"traefik-rfc"}'
      const rfc = await rfcHeaders(keys, token, 'POST', `http://${CLIENT_HOST}`, target, rfcBody)
      const rfcHead = authRequest([`Content-Length: ${Buffer.byteLength(rfcBody)}`, ...canonical(rfc), ...forwarded('POST', target)])
      allowedAsAlice(t, await ask(decide, rfcHead, rfcBody))
      refusedWith(t, await ask(decide, rfcHead, '{"name":"traefik-rfx"}'), 401, 'INVALID_CONTENT_DIGEST')
    })

    t.test('forwardBody off (no ?forwardBody=true): a signed POST arrives without a body, 400 UNSEEN_BODY', async (t) => {
      const body = '{"name":"traefik-unseen"}'
      const target = '/v1/clients/'
      refusedWith(t, await ask(decide, authRequest([
        'Content-Type: application/json', ...canonical(seed('POST', target, body)), ...forwarded('POST', target)
      ], TRAEFIK_ADDRESS.pathname)), 400, 'UNSEEN_BODY')
    })

    t.test('forwardBody on, as the address says: a POST with an empty body arrives with none, and passes as inline', async (t) => {
      const target = '/v1/clients/?empty=1'
      // forward.go:181-203: an empty body is sent as none, and Go writes no Content-Length for it
      allowedAsAlice(t, await ask(decide, authRequest([...canonical(seed('POST', target)), ...forwarded('POST', target)])))
      const other = '/v1/clients/?empty=2'
      refusedWith(t, await ask(decide, authRequest([...canonical(seed('POST', other, '{"a":1}')), ...forwarded('POST', other)])), 401, 'INVALID_SIGNATURE')
    })

    t.test('X-Forwarded-Uri twice, X-Forwarded-Host holding a list: 400 INVALID_DECISION_REQUEST', async (t) => {
      const target = '/v1/clients/?a=4'
      const twice = await ask(decide, authRequest([...canonical(seed('GET', target)), ...forwarded('GET', target), 'X-Forwarded-Uri: /v1/other/']))
      t.match(refusedWith(t, twice, 400, 'INVALID_DECISION_REQUEST').detail, /X-Forwarded-Uri was sent 2 times/)
      const list = await ask(decide, authRequest([
        ...canonical(seed('GET', target)),
        ...forwarded('GET', target).filter((l) => !l.startsWith('X-Forwarded-Host')),
        `X-Forwarded-Host: ${CLIENT_HOST}, evil.example`
      ]))
      t.match(refusedWith(t, list, 400, 'INVALID_DECISION_REQUEST').detail, /X-Forwarded-Host holds a list/)
    })

    t.test('an MCP route: tools/call judged with forwardBody; without it, 400 UNSEEN_BODY', async (t) => {
      const mcp = canonical({ authorization: `Bearer ${token}`, 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18' })
      const withBody = (body: string, path = TRAEFIK_PATH): string[] =>
        authRequest([`Content-Length: ${Buffer.byteLength(body)}`, ...mcp, ...forwarded('POST', '/mcp')], path)
      const allowed = await ask(decide, withBody(mcpCalls.whoami), mcpCalls.whoami)
      t.equal(allowed.status, 200, allowed.body)
      t.equal(header(allowed, 'x-gateway-user'), 'alice')
      const forbidden = await ask(decide, withBody(mcpCalls.forbidden), mcpCalls.forbidden)
      rpcRefused(t, forbidden, 403, 'INSUFFICIENT_SCOPE', -32001, 'req-2')
      t.match(header(forbidden, 'www-authenticate'), /error="insufficient_scope", scope="mcp:use notes:write"/)
      const unseen = await ask(decide, authRequest([...mcp, ...forwarded('POST', '/mcp')], TRAEFIK_ADDRESS.pathname))
      rpcRefused(t, unseen, 400, 'UNSEEN_BODY', -32001, null)
    })
  })

  t.test('ingress-nginx auth-url', async (t) => {
    // The auth subrequest (dialects.md 3.1, 3.5; nginx.tmpl:1045-1110 of controller v1.15.1): GET to
    // the auth-url's path, Host = its hostname without the port, no body and no Content-Length;
    // X-Request-ID, X-Original-URL = $scheme://$http_host$request_uri, X-Original-Method, with
    // auth-method also X-Original-URI = $request_uri and X-Scheme; X-Sent-From, X-Real-IP,
    // X-Forwarded-For = $remote_addr, X-Auth-Request-Redirect; the client's other headers; then the
    // auth-proxy-set-headers ConfigMap's lines (buildAuthProxySetHeaders), empty values not sent.
    const subrequest = (method: string, target: string, client: Record<string, string>, contentLength = '', uri = target): string[] => [
      `GET ${INGRESS_AUTH_URL.pathname} HTTP/1.1`,
      'X-Request-ID: a76e4d93ed1c3f2689b3106cadddd172',
      `Host: ${INGRESS_AUTH_URL.hostname}`,
      `X-Original-URI: ${uri}`,
      'X-Scheme: http',
      `X-Original-URL: http://${CLIENT_HOST}${target}`,
      `X-Original-Method: ${method}`,
      'X-Sent-From: nginx-ingress-controller',
      'X-Real-IP: 192.0.2.7',
      'X-Forwarded-For: 192.0.2.7',
      `X-Auth-Request-Redirect: ${target}`,
      'Connection: close',
      ...lines(client),
      ...(originalContentLength(contentLength) === '' ? [] : [`X-Original-Content-Length: ${originalContentLength(contentLength)}`])
    ]
    /** every refusal is a 403 on the wire, the real status and problem in headers, no body */
    const refusedInHeaders = (t: Test, res: Answer, status: number, code: string): Record<string, unknown> => {
      t.equal(res.status, 403, 'nginx passes 401 and 403 only: the wire status is 403')
      t.equal(header(res, 'x-keygate-status'), String(status))
      t.equal(res.body, '', 'no body: nginx would drop it')
      const problem = JSON.parse(header(res, 'x-keygate-problem') ?? '{}') as Record<string, unknown>
      t.equal(problem.code, code)
      t.equal(problem.status, status)
      return problem
    }

    t.test('X-Original-URL, X-Original-Method and the ConfigMap\'s X-Original-Content-Length: 200', async (t) => {
      const target = '/v1/clients/?a=1&b=%7e;c'
      const res = await ask(decide, subrequest('GET', target, { ...seed('GET', target), 'x-keygate-status': '200', forwarded: 'for=evil' }))
      allowedAsAlice(t, res)
      // the page's auth-response-headers remove a client's copy of each header the allowed answer lacks
      const removedByNginx = ['authorization', 'x-api-signature', 'x-keygate-status', 'x-keygate-problem', 'forwarded',
        'x-http-method-override', 'x-original-url']
      for (const name of removedByNginx) {
        t.equal(header(res, name), undefined, `the allowed answer has no ${name}`)
      }
    })

    t.test('X-Original-URI naming another target than X-Original-URL: 400 INVALID_DECISION_REQUEST, in headers', async (t) => {
      const target = '/v1/clients/?a=2'
      refusedInHeaders(t, await ask(decide, subrequest('GET', target, seed('GET', target), '', '/v1/clients/?a=3')), 400, 'INVALID_DECISION_REQUEST')
    })

    t.test('no X-Original-Content-Length (no auth-proxy-set-headers): 400 INVALID_DECISION_REQUEST, in headers', async (t) => {
      const target = '/v1/clients/?a=4'
      const head = subrequest('GET', target, seed('GET', target)).filter((l) => !l.startsWith('X-Original-Content-Length'))
      t.match(refusedInHeaders(t, await ask(decide, head), 400, 'INVALID_DECISION_REQUEST').detail, /X-Original-Content-Length/)
    })

    t.test('refusals: wire 403, X-Keygate-Status 401 and X-Keygate-Problem, WWW-Authenticate where it applies', async (t) => {
      const target = '/v1/clients/?a=5'
      const signed = { ...seed('GET', target), 'x-api-signature': seed('GET', '/v1/clients/?a=6')['x-api-signature'] as string }
      refusedInHeaders(t, await ask(decide, subrequest('GET', target, signed)), 401, 'INVALID_SIGNATURE')
      const bearer = await ask(decide, subrequest('GET', '/v1/me/', {}))
      refusedInHeaders(t, bearer, 401, 'MISSING_TOKEN')
      t.equal(header(bearer, 'www-authenticate'), 'Bearer realm="keygate", DPoP algs="ES256 EdDSA Ed25519 RS256 PS256"', 'for the server-snippet to pass on')
    })

    t.test('a seed-signed POST: the body is never sent, 400 UNSEEN_BODY ("0" + Content-Length read as its length)', async (t) => {
      const body = '{"name":"ingress"}'
      const target = '/v1/clients/'
      const client = { 'Content-Type': 'application/json', ...seed('POST', target, body) }
      refusedInHeaders(t, await ask(decide, subrequest('POST', target, client, String(Buffer.byteLength(body)))), 400, 'UNSEEN_BODY')
    })

    t.test('an MCP tools/call: the body is never sent, 400 UNSEEN_BODY, its JSON-RPC error in X-Keygate-Problem', async (t) => {
      const client = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'MCP-Protocol-Version': '2025-06-18' }
      const res = await ask(decide, subrequest('POST', '/mcp', client, String(Buffer.byteLength(mcpCalls.whoami))))
      t.equal(res.status, 403, 'nginx passes 401 and 403 only')
      t.equal(header(res, 'x-keygate-status'), '400')
      t.match(JSON.parse(header(res, 'x-keygate-problem') ?? '{}'), { jsonrpc: '2.0', id: null, error: { code: -32001, data: { code: 'UNSEEN_BODY' } } })
    })
  })

  t.test('any dialect: /decide/xyz is 404; a peer not trusted is 403 UNTRUSTED_PROXY', async (t) => {
    const unknown = await ask(decide, ['GET /decide/xyz HTTP/1.1', `Host: ${decideHost}`, 'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /v1/clients/'])
    refusedWith(t, unknown, 404, 'NOT_FOUND')

    const other = await startTestGateway(t, {
      store: 'memory',
      upstreamUrl: 'http://127.0.0.1:9',
      routes,
      config: { decision: { port: 0, host: '127.0.0.1', trustedProxies: ['10.0.0.1'] } }
    })
    const untrusting = await other.app.keygate.decisions!.listen({ port: 0, host: '127.0.0.1' })
    const target = '/v1/clients/'
    const res = await ask(untrusting, [`GET ${TRAEFIK_PATH} HTTP/1.1`, `Host: ${new URL(untrusting).host}`, ...lines(seed('GET', target)),
      'X-Forwarded-Method: GET', `X-Forwarded-Uri: ${target}`, `X-Forwarded-Host: ${CLIENT_HOST}`, 'X-Forwarded-Proto: http', 'X-Forwarded-For: 192.0.2.7'])
    refusedWith(t, res, 403, 'UNTRUSTED_PROXY')
    const envoy = await ask(untrusting, [`GET ${ENVOY_PREFIX}${target} HTTP/1.1`, `host: ${CLIENT_HOST}`, 'content-length: 0'])
    refusedWith(t, envoy, 403, 'UNTRUSTED_PROXY')
  })
})

t.test('the docs\' configurations name what keygate serves and reads', async (t) => {
  const identity = [...Object.values(DEFAULT_IDENTITY_HEADERS), DEFAULT_IDENTITY_TOKEN_HEADER, 'x-keygate-content-digest'].sort()
  const settingsOf = (page: string): GatewayConfig['decision'] => loadConfig(blockSettings(docSnippet(page, "keygate's settings", 'sh'))).decision

  t.test(`${ENVOY_PAGE}: ext_authz before the router, at /decide/envoy, whole bodies, identity headers set over the client's`, async (t) => {
    const settings = settingsOf(ENVOY_PAGE)
    const filters = hcm.http_filters as Yaml[]
    t.equal(filters[0]?.name, 'envoy.filters.http.ext_authz')
    t.equal(filters.at(-1)?.name, 'envoy.filters.http.router')
    t.equal(hcm.normalize_path, false)
    t.equal(hcm.merge_slashes, false)
    t.equal(hcm.path_with_escaped_slashes_action, 'KEEP_UNCHANGED')
    t.equal(hcm.use_remote_address, true, 'the client\'s address in X-Forwarded-For')
    t.equal(hcm.common_http_protocol_options?.headers_with_underscores_action, 'REJECT_REQUEST', 'no X_Gateway_User beside X-Gateway-User')
    t.equal(extAuthz.transport_api_version, 'V3')
    t.equal(extAuthz.failure_mode_allow, false)
    t.equal(ENVOY_PREFIX, '/decide/envoy')
    t.ok(extAuthz.with_request_body.max_request_bytes >= DEFAULT_BODY_LIMIT, 'max_request_bytes at least the default bodyLimit')
    t.equal(extAuthz.with_request_body.allow_partial_message, false)
    t.equal(extAuthz.with_request_body.pack_as_bytes, undefined)
    const allowed = exactNames(extAuthz.allowed_headers)
    const signedOver = ['x-api-key', 'x-api-timestamp', 'x-api-signature', 'signature-input', 'signature', 'content-digest', 'content-type']
    // origin and mcp-protocol-version: what an MCP route reads besides the body (docs/mcp.md)
    for (const name of [...signedOver, 'x-forwarded-for', 'x-forwarded-proto', 'origin', 'mcp-protocol-version']) {
      t.ok(allowed.includes(name), `allowed_headers: ${name}`)
    }
    t.notOk(allowed.includes('content-length'), 'Envoy writes its own Content-Length')
    t.same(prefixes(extAuthz.allowed_headers).sort(), ['x-gateway-', 'x-keygate-'],
      'allowed_headers: keygate sees a client\'s copies of its headers, to name them for removal')
    const response = extAuthz.http_service.authorization_response as Yaml
    t.same(exactNames(response.allowed_upstream_headers).sort(), identity, 'allowed_upstream_headers: every identity header')
    t.equal(response.allowed_upstream_headers_to_append, undefined, 'never appended beside a client\'s copy')
    t.same(exactNames(response.allowed_client_headers_on_success).sort(), ['ratelimit', 'ratelimit-policy'])
    for (const name of ['content-type', 'retry-after', 'ratelimit', 'ratelimit-policy']) {
      t.ok(exactNames(response.allowed_client_headers).includes(name), `refusals: ${name}`)
    }
    const server = extAuthz.http_service.server_uri as Yaml
    t.equal(new URL(server.uri as string).host, `${settings.host}:${settings.port}`, 'server_uri: keygate\'s decision listener')
    const cluster = (envoyConfig.static_resources.clusters as Yaml[]).find((c) => c.name === server.cluster) as Yaml
    const socket = cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address as Yaml
    t.same([socket.address, socket.port_value], [settings.host, settings.port], 'its cluster: keygate\'s decision listener')
    t.ok(settings.trustedProxies.includes(ENVOY_NODE), 'the settings trust Envoy\'s node address')
  })

  t.test(`${TRAEFIK_PAGE}: forwardAuth at /decide/traefik with the body, every identity header`, async (t) => {
    const settings = settingsOf(TRAEFIK_PAGE)
    t.equal(forwardAuth.address, `http://${settings.host}:${settings.port}/decide/traefik?forwardBody=true`)
    const spellings = new RegExp((forwardAuth.authResponseHeadersRegex as string).replace(/^\(\?i\)/, ''), 'i')
    for (const name of identity) {
      t.match(name, spellings, `authResponseHeadersRegex: ${name}`)
      t.match(name.replaceAll('-', '_'), spellings, `authResponseHeadersRegex: ${name.replaceAll('-', '_')}`)
    }
    t.equal(forwardAuth.trustForwardHeader, false)
    t.equal(forwardAuth.forwardBody, true)
    t.ok(forwardAuth.maxBodySize >= DEFAULT_BODY_LIMIT, 'maxBodySize at least the default bodyLimit')
    t.same((forwardAuth.authResponseHeaders as string[]).map((h) => h.toLowerCase()).sort(), identity)
    t.same(traefikConfig.http.routers.api.middlewares, ['keygate', 'keygate-drop'], 'keygate first; then what inline never forwards is dropped')
    const dropped = traefikConfig.http.middlewares['keygate-drop'].headers.customRequestHeaders as Record<string, string>
    const traefikWrites = ['x-forwarded-host', 'x-real-ip']
    for (const name of INLINE_DROPS.filter((name) => !traefikWrites.includes(name))) {
      t.equal(dropped[Object.keys(dropped).find((key) => key.toLowerCase() === name) ?? name], '', `keygate-drop deletes ${name}`)
    }
    for (const name of ['x-api-signature', 'x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-url', 'x-rewrite-url']) {
      const underscored = name.replaceAll('-', '_')
      t.equal(dropped[Object.keys(dropped).find((key) => key.toLowerCase() === underscored) ?? underscored], '', `keygate-drop deletes ${underscored}`)
    }
  })

  t.test(`${INGRESS_PAGE}: auth-url at /decide/ingress-nginx, X-Original-Content-Length, every identity header`, async (t) => {
    const settings = settingsOf(INGRESS_PAGE)
    t.equal(INGRESS_AUTH_URL.pathname, '/decide/ingress-nginx')
    t.equal(Number(INGRESS_AUTH_URL.port), settings.port)
    t.equal(settings.host, '0.0.0.0', 'the controller connects from another pod')
    t.equal(annotation(ingress, 'auth-method'), 'GET', 'X-Original-URI is sent too')
    t.equal(annotation(ingress, 'auth-proxy-set-headers'), `${authHeaders.metadata.namespace}/${authHeaders.metadata.name}`)
    t.equal(authHeaders.metadata.namespace, ingress.metadata.namespace, 'the controller refuses another namespace\'s ConfigMap by default')
    t.equal(originalContentLength(''), '0', 'no Content-Length: 0, which nginx sends (it drops empty values)')
    t.equal(originalContentLength('16'), '016')
    // every identity header, and what inline never forwards that keygate's allowed answer never has (so nginx removes it)
    const ingressOwn = ['x-forwarded-host', 'x-real-ip']
    const answered = ['ratelimit', 'ratelimit-policy']
    const absentFromAnswer = [...INLINE_DROPS.filter((name) => !ingressOwn.includes(name) && !answered.includes(name)), 'x-keygate-problem', 'x-keygate-status']
    t.same(annotation(ingress, 'auth-response-headers').split(',').map((h) => h.trim().toLowerCase()).sort(), [...identity, ...absentFromAnswer].sort())
    t.ok(Number(/^(\d+)k$/.exec(annotation(ingress, 'proxy-buffer-size'))?.[1]) >= 16, 'room for an 8 KB X-Keygate-Problem')
  })

  t.test(`${INGRESS_PAGE}: the server-snippet variant answers every status keygate uses`, async (t) => {
    const docs = parseAllDocuments(docSnippet(INGRESS_PAGE, 'Real statuses: the server-snippet', 'yaml')).map((d) => d.toJS() as Yaml)
    const controller = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.namespace === 'ingress-nginx') as Yaml
    t.same(controller.data, { 'allow-snippet-annotations': 'true', 'annotations-risk-level': 'Critical' })
    t.same(docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === authHeaders.metadata.name), authHeaders, 'the same auth headers ConfigMap')
    const snippetIngress = docs.find((d) => d.kind === 'Ingress') as Yaml
    const { 'nginx.ingress.kubernetes.io/configuration-snippet': location, 'nginx.ingress.kubernetes.io/server-snippet': server, ...rest } =
      snippetIngress.metadata.annotations as Record<string, string>
    t.same(rest, ingress.metadata.annotations, 'otherwise the same annotations')
    t.same(snippetIngress.spec, ingress.spec)
    t.match(location, /auth_request_set \$keygate_status +\$upstream_http_x_keygate_status;/)
    t.match(location, /auth_request_set \$keygate_problem +\$upstream_http_x_keygate_problem;/)
    t.match(location, /error_page 403 500 = @keygate_refused;/)
    t.match(server, /^location @keygate_refused \{/)
    const statuses = [...new Set(Object.values(ERRORS).map((e) => e.status))].sort()
    const answered = [...(server ?? '').matchAll(/if \(\$keygate_status = (\d{3})\) \{ return (\d{3}) \$keygate_problem; \}/g)].map((m) => {
      t.equal(m[1], m[2])
      return Number(m[1])
    })
    t.same(answered.sort(), statuses, 'one line per status of keygate\'s errors')
  })
})
