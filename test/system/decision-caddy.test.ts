// docs/decision/caddy.md's Caddyfile ("The Caddyfile"), read from the page and run in Debian's
// Caddy as written, only its env placeholders filled in: Caddy's forward_auth in front of keygate's
// real decision listener (configured from the page's "keygate's settings", on Redis), with a
// recorder as the upstream. What a user sees at the client and what reaches the upstream: signed
// requests (seed scheme, RFC 9421 with RSA, Ed25519 and P-256 keys) go through with keygate's
// identity headers and nothing forged; tampered ones get keygate's own refusal and never reach
// the upstream; a route's 429 keeps its Retry-After; replay marks hold across decision and inline
// modes; a body keygate is not shown is refused, or passed with X-Keygate-Content-Digest on a
// route that allows it; odd targets are judged exactly as inline judges them (the same request
// sent straight to keygate's public port). One keygate, one Caddy and one recorder for the file;
// a second Caddy, pointed at a keygate that does not answer, for the 504 and the 502.
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { createServer, type Socket } from 'node:net'
import { createSigner, httpbis } from 'http-message-signatures'
import t, { type Test } from 'tap'
import { registerKey as registerWithClient, signRequest } from '../../client/src/index.js'
import { FORWARDED_DIGEST_HEADER } from '../../client/src/protocol/index.js'
import { loadConfig } from '../../gateway/src/config/env.js'
import { DEFAULT_IDENTITY_HEADERS } from '../../gateway/src/proxy/route.js'
import { DEFAULT_IDENTITY_TOKEN_HEADER } from '../../gateway/src/proxy/route-file.js'
import { findCaddy, runCaddy, type Caddy } from '../helpers/caddy.js'
import { blockSettings, docSnippet } from '../helpers/docs.js'
import { send, sendRaw, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder, type RecordedRequest } from '../helpers/recorder.js'
import { forgedValues, headerNames, HOSTILE_EXTRAS, ownApiThroughProxy } from '../helpers/upstream-headers.js'
import { mcpPostHeaders, startMcpServer } from '../helpers/mcp-server.js'
import { freePort } from '../helpers/redis.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway } from '../helpers/stack.js'

const caddy = findCaddy()
const skip = 'reason' in caddy ? `Caddy cannot be installed here: ${caddy.reason}` : false

const PAGE = 'docs/decision/caddy.md'
const CADDYFILE = docSnippet(PAGE, 'The Caddyfile', 'caddyfile')
const SETTINGS = blockSettings(docSnippet(PAGE, "keygate's settings", 'sh'))
/** the page's handle that sends MCP routes to keygate's public port (inline), and where it goes: beside @keygate */
const MCP_HANDLE = docSnippet(PAGE, 'MCP routes', 'caddyfile')
const MCP_HANDLE_BEFORE = '\t# protected resources\' metadata'

// clients: signed, no matrix parameters, refuses a body it is not shown (the default);
// matrix: takes ";" below its prefix; uploads: lets an RFC 9421 signature over content-digest
// stand for the body; limited: 2 requests per key per minute
const ROUTES = `routes:
  - name: clients
    prefix: /v1/clients/
    upstream: UPSTREAM
    auth: signed
    methods: [GET, POST, DELETE]
  - name: matrix
    prefix: /v1/matrix/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    allowMatrixParams: true
  - name: uploads
    prefix: /v1/uploads/
    upstream: UPSTREAM
    auth: signed
    methods: [POST]
    unseenBody: digest
  - name: limited
    prefix: /v1/limited/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: key, limit: 2, window: 1m }
  - path: /mcp
    upstream: MCP_SERVER
    auth: bearer
    scopes: [mcp:use]
    mcp:
      tools: { whoami: [mcp:read], "write-*": [notes:write] }
`

const IDENTITY = ['x-gateway-user', 'x-gateway-key', 'x-gateway-key-name', 'x-gateway-scopes'] as const
/** what a client may try to slip to the upstream: every identity header keygate writes, in odd cases too */
const FORGED = {
  'X-Gateway-User': 'mallory',
  'X-Gateway-Key': 'f'.repeat(64),
  'X-Gateway-Key-Name': 'forged',
  'X-Gateway-Scopes': 'admin',
  'X-Gateway-Agent': 'https://forged.example',
  'x-gateway-agent-key': 'forged-thumbprint',
  'X-Gateway-Dpop-Jkt': 'forged-dpop-thumbprint',
  'X-Keygate-Identity': 'forged.jwt.token',
  'X-Keygate-Content-Digest': 'sha-256=:forged:',
  X_Gateway_User: 'mallory-underscore'
}
const FORGED_NAMES = Object.keys(FORGED).map((name) => name.toLowerCase())

const digestOf = (body: string): string => `sha-256=:${createHash('sha256').update(body).digest('base64')}:`

interface Key { type: string; alg: string; privateKey: KeyObject; apiKey: string; name: string }

/** Headers of a request signed with RFC 9421 by http-message-signatures (independent of keygate), for `origin` as the client addresses it. */
async function rfcSigned (origin: string, token: string, key: Key, method: string, target: string,
  options: { body?: string; fields?: string[]; digest?: string } = {}): Promise<Record<string, string>> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, host: new URL(origin).host }
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json'
    headers['content-digest'] = options.digest ?? digestOf(options.body)
  }
  const fields = options.fields ?? (options.body === undefined ? ['@method', '@target-uri'] : ['@method', '@target-uri', 'content-type', 'content-digest'])
  const signed = await httpbis.signMessage({
    key: createSigner(key.privateKey, key.alg as 'ed25519', key.apiKey),
    fields,
    params: ['keyid', 'alg', 'created'],
    paramValues: { created: new Date() }
  }, { method, url: origin + target, headers })
  return Object.fromEntries(Object.entries(signed.headers).map(([name, value]) => [name.toLowerCase(), String(value)]))
}

/** A request (a POST by default) whose body goes chunked (no Content-Length), as streaming clients send it. */
async function sendChunked (url: string, target: string, headers: Record<string, string>, chunks: string[], method = 'POST'): Promise<RawResponse> {
  const { hostname, port } = new URL(url)
  return await new Promise((resolve, reject) => {
    const options = { host: hostname, port, method, path: target, headers: { ...headers, 'transfer-encoding': 'chunked' }, agent: false }
    const req = httpRequest(options, (res) => {
      const parts: Buffer[] = []
      res.on('data', (chunk: Buffer) => parts.push(chunk))
      res.on('end', () => {
        const body = Buffer.concat(parts)
        const text = body.toString('utf8')
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json: <T>() => JSON.parse(text) as T })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    for (const chunk of chunks) req.write(chunk)
    req.end()
  })
}

t.test('docs/decision/caddy.md: Caddy forward_auth in front of keygate\'s decision listener', { skip }, async (t) => {
  if ('reason' in caddy) return
  const upstream = await startRecorder(t)
  const mcp = await startMcpServer(t)
  const decision = { ...loadConfig(SETTINGS).decision, port: 0 }
  t.same(decision.trustedProxies, ['127.0.0.1'], 'the page\'s settings trust Caddy on this machine')
  const gw = await startTestGateway(t, {
    store: 'redis',
    upstreamUrl: upstream.url,
    routes: (url) => routesFromYaml(ROUTES.replace('MCP_SERVER', mcp.url), url),
    config: { decision }
  })
  const decisionUrl = await gw.app.keygate.decisions!.listen({ port: 0, host: decision.host })
  const proxy: Caddy = await runCaddy(t, caddy.path, CADDYFILE, {
    KEYGATE_DECISION: new URL(decisionUrl).host,
    KEYGATE_PUBLIC: new URL(gw.url).host,
    UPSTREAM: new URL(upstream.url).host
  })

  // logged in and keys registered through Caddy, at keygate's public port (the page's @keygate handle)
  await addUser(gw, 'alice')
  await gw.app.keygate.users.setScopes('alice', ['mcp:use', 'mcp:read'])
  const token = await login(proxy.url, 'alice')
  const rsa = rsaKeyPair()
  t.equal((await registerKey(proxy.url, token, rsa, 'alice rsa')).status, 201)
  const keys: Key[] = [{ type: 'rsa', alg: 'rsa-v1_5-sha256', privateKey: rsa.privateKey, apiKey: rsa.apiKey, name: 'alice rsa' }]
  for (const [type, alg, pair] of [
    ['ed25519', 'ed25519', generateKeyPairSync('ed25519')],
    ['p256', 'ecdsa-p256-sha256', generateKeyPairSync('ec', { namedCurve: 'P-256' })]
  ] as const) {
    const name = `alice ${type}`
    const { apiKey } = await registerWithClient({ baseUrl: proxy.url, token, name, privateKey: pair.privateKey })
    keys.push({ type, alg, privateKey: pair.privateKey, apiKey, name })
  }
  const [rsaKey] = keys as [Key]

  /** The seed scheme's headers: keys.ts's own signing for RSA, @keygate/client's for the others. */
  const seedSigned = async (key: Key, method: string, target: string, body?: string, timestamp = Date.now()): Promise<Record<string, string>> => {
    if (key.type === 'rsa') return signedHeaders({ keys: rsa, token, method, target, ...(body !== undefined && { body }), timestamp })
    const headers = await signRequest({ method, target, apiKey: key.apiKey, privateKey: key.privateKey, timestamp, ...(body !== undefined && { body }) })
    return { ...headers, authorization: `Bearer ${token}` }
  }

  /** What reached the upstream while `act` ran. */
  const seen = async <T>(act: () => Promise<T>): Promise<[T, RecordedRequest[]]> => {
    const before = upstream.requests.length
    const result = await act()
    return [result, upstream.requests.slice(before)]
  }

  /** `res` is keygate's refusal `code` with `status`, as problem+json, and nothing reached the upstream. */
  const refusedWith = (t: Test, what: string, [res, reached]: [RawResponse, RecordedRequest[]], status: number, code: string): void => {
    t.equal(res.status, status, `${what}: ${status} at the client: ${res.text}`)
    t.match(res.headers['content-type'], /^application\/problem\+json/, `${what}: a problem+json body`)
    t.equal(res.json().code, code, `${what}: ${code}`)
    t.same(reached, [], `${what}: the upstream never saw it`)
  }

  /** The upstream got the request as `alice` with `key`, keygate's identity headers and none of the client's. */
  const identityOf = (t: Test, what: string, request: RecordedRequest | undefined, key: Key): void => {
    t.equal(request?.headers['x-gateway-user'], 'alice', `${what}: X-Gateway-User`)
    t.equal(request?.headers['x-gateway-key'], key.apiKey, `${what}: X-Gateway-Key`)
    t.equal(request?.headers['x-gateway-key-name'], key.name, `${what}: X-Gateway-Key-Name`)
    t.type(request?.headers['x-gateway-scopes'], 'string', `${what}: X-Gateway-Scopes`)
    t.equal(request?.headers['x-keygate-identity'], undefined, `${what}: no X-Keygate-Identity (the route has no identity token)`)
  }

  t.test('signed GETs with a query reach the upstream with keygate\'s identity: seed scheme and RFC 9421, RSA, Ed25519 and P-256', async (t) => {
    for (const key of keys) {
      const target = `/v1/clients/?limit=2&q=a%20b&key=${key.type}`
      const [seed, seedSeen] = await seen(async () => await send(proxy.url, target, { headers: await seedSigned(key, 'GET', target) }))
      t.equal(seed.status, 200, `seed, ${key.type}: ${seed.text}`)
      t.equal(seed.text, '{"recorded":' + String(upstream.requests.length) + '}', `seed, ${key.type}: the client gets the upstream's answer`)
      t.equal(seedSeen.length, 1)
      t.equal(seedSeen[0]?.url, target, `seed, ${key.type}: the upstream gets the target as sent`)
      identityOf(t, `seed, ${key.type}`, seedSeen[0], key)

      const [rfc, rfcSeen] = await seen(async () => await send(proxy.url, target, { headers: await rfcSigned(proxy.url, token, key, 'GET', target) }))
      t.equal(rfc.status, 200, `RFC 9421, ${key.type} (@target-uri ${proxy.url}${target}): ${rfc.text}`)
      t.equal(rfcSeen[0]?.url, target)
      identityOf(t, `RFC 9421, ${key.type}`, rfcSeen[0], key)
    }
    // what inline mode sends the upstream for the same request: the same identity
    const target = '/v1/clients/?same=1'
    const headers = await seedSigned(rsaKey, 'GET', target)
    const [, [viaCaddy]] = await seen(async () => await send(proxy.url, target, { headers }))
    const [, [inline]] = await seen(async () => await send(gw.url, target, { headers }))
    t.same(IDENTITY.map((name) => viaCaddy?.headers[name]), IDENTITY.map((name) => inline?.headers[name]), 'the same identity headers as inline mode')
  })

  t.test('keygate\'s own API and portal through Caddy: keygate\'s public port, never the application', async (t) => {
    await ownApiThroughProxy(t, proxy.url, upstream)
  })

  t.test('the site address names a host, not an interface: Caddy listens on every interface (the page says so)', async (t) => {
    const port = Number(new URL(proxy.url).port).toString(16).toUpperCase().padStart(4, '0')
    const listening = ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((file) => {
      try { return readFileSync(file, 'utf8').split('\n').slice(1) } catch { return [] }
    }).map((line) => line.trim().split(/\s+/)).filter((f) => f[3] === '0A' && f[1]?.endsWith(`:${port}`)).map((f) => f[1]?.split(':')[0])
    t.ok(listening.length > 0, 'Caddy listens on its port')
    t.ok(listening.every((address) => /^0+$/.test(address ?? '')), `on the wildcard address, not 127.0.0.1 only (${listening.join(', ')})`)
  })

  t.test('the upstream receives the headers inline mode sends it, for the same signed request, both schemes', async (t) => {
    // Caddy's reverse_proxy writes these itself (the client's copies are dropped: Caddy trusts no
    // proxy here), and Go's transport asks for gzip when the client did not
    const CADDY_OWN = ['x-forwarded-host', 'x-forwarded-proto', 'accept-encoding']
    const key = keys[1] as Key
    const extras = { ...HOSTILE_EXTRAS, 'X-Gateway-Tenant': 'forged', x_gateway_user: 'mallory', X_API_Signature: 'forged', x_http_method_override: 'DELETE' }
    for (const scheme of ['seed', 'rfc9421'] as const) {
      const sign = async (origin: string, target: string): Promise<Record<string, string>> => ({
        ...(scheme === 'seed' ? await seedSigned(key, 'GET', target) : await rfcSigned(origin, token, key, 'GET', target)),
        ...extras
      })
      const viaCaddy = `/v1/clients/?same=${scheme}&via=caddy`
      const inline = `/v1/clients/?same=${scheme}&via=inline`
      const [decidedAnswer, [decided]] = await seen(async () => await send(proxy.url, viaCaddy, { headers: await sign(proxy.url, viaCaddy) }))
      const [inlineAnswer, [direct]] = await seen(async () => await send(gw.url, inline, { headers: await sign(gw.url, inline) }))
      t.equal(decidedAnswer.status, 200, `${scheme} through Caddy: ${decidedAnswer.text}`)
      t.equal(inlineAnswer.status, 200, `${scheme} inline: ${inlineAnswer.text}`)
      t.same(headerNames(decided, CADDY_OWN), headerNames(direct), `${scheme}: the same header names, but Caddy's own ${CADDY_OWN.join(', ')}`)
      t.same(forgedValues(decided), [], `${scheme}: no forged value through Caddy`)
      t.equal(decided?.headers['x-forwarded-for'], '127.0.0.1', `${scheme}: the client's address, not its claim`)
      t.equal(decided?.headers.authorization, undefined, `${scheme}: the bearer token stays out of the application`)
      t.equal(decided?.headers['x-custom'], 'kept')
    }
  })

  t.test('tampered requests: keygate\'s own refusal at the client, nothing at the upstream', async (t) => {
    const target = '/v1/clients/7?view=full'
    /** `sent` (by default the signed target) with the headers of a seed-signed GET of the signed target */
    const signedGet = async (sent = target, method = 'GET'): Promise<RawResponse> =>
      await send(proxy.url, sent, { method, headers: await seedSigned(rsaKey, 'GET', target) })
    const cases: Array<[string, () => Promise<RawResponse>, number, string]> = [
      ['method changed (signed GET, sent as DELETE)', async () => await signedGet(target, 'DELETE'), 401, 'INVALID_SIGNATURE'],
      ['path changed', async () => await signedGet('/v1/clients/8?view=full'), 401, 'INVALID_SIGNATURE'],
      ['query changed', async () => await signedGet('/v1/clients/7?view=all'), 401, 'INVALID_SIGNATURE'],
      ['another registered key named', async () => await send(proxy.url, target, {
        headers: { ...await seedSigned(rsaKey, 'GET', target), 'x-api-key': (keys[1] as Key).apiKey }
      }), 401, 'INVALID_SIGNATURE'],
      ['timestamp changed after signing', async () => {
        const headers = await seedSigned(rsaKey, 'GET', target)
        return await send(proxy.url, target, { headers: { ...headers, 'x-api-timestamp': String(Number(headers['x-api-timestamp']) + 1) } })
      }, 401, 'INVALID_SIGNATURE'],
      ['timestamp 20 minutes old', async () =>
        await send(proxy.url, target, { headers: await seedSigned(rsaKey, 'GET', target, undefined, Date.now() - 20 * 60_000) }),
      401, 'TIMESTAMP_OUT_OF_RANGE'],
      ['RFC 9421 signed for another origin', async () => await send(proxy.url, target, {
        headers: { ...await rfcSigned(gw.url, token, rsaKey, 'GET', target), host: new URL(proxy.url).host }
      }), 401, 'INVALID_SIGNATURE'],
      ['signed GET sent as DELETE elsewhere, with the client\'s own X-Forwarded-Method and -Uri naming the signed request', async () =>
        await send(proxy.url, '/v1/clients/9', {
          method: 'DELETE',
          headers: {
            ...await seedSigned(rsaKey, 'GET', target), 'x-forwarded-method': 'GET', 'x-forwarded-uri': target, 'x-forwarded-host': 'elsewhere.example'
          }
        }), 401, 'INVALID_SIGNATURE'],
      ['no signature at all', async () => await send(proxy.url, target, { headers: { authorization: `Bearer ${token}`, ...FORGED } }),
        401, 'MISSING_SIGNATURE_HEADERS']
    ]
    for (const [what, sending, status, code] of cases) refusedWith(t, what, await seen(sending), status, code)
    // a bearer token's refusal carries its challenges: Bearer's and DPoP's (docs/dpop.md), in one field
    const dpop = ', DPoP algs="ES256 EdDSA Ed25519 RS256 PS256"'
    const bearer: Array<[string, Record<string, string>, string, string]> = [
      ['no bearer token', { ...await seedSigned(rsaKey, 'GET', target), authorization: '' }, 'MISSING_TOKEN', `Bearer realm="keygate"${dpop}`],
      ['a bearer token tampered with', { ...await seedSigned(rsaKey, 'GET', target), authorization: `Bearer ${token.slice(0, -2)}xx` },
        'INVALID_TOKEN', `Bearer realm="keygate", error="invalid_token"${dpop}`]
    ]
    for (const [what, headers, code, challenge] of bearer) {
      const result = await seen(async () => await send(proxy.url, target, { headers }))
      refusedWith(t, what, result, 401, code)
      t.equal(result[0].headers['www-authenticate'], challenge, `${what}: WWW-Authenticate`)
    }
    // the same refusal as inline mode sends, field for field but the request's own
    const headers = await seedSigned(rsaKey, 'GET', target)
    const viaCaddy = await send(proxy.url, '/v1/clients/8?view=full', { headers })
    const inline = await send(gw.url, '/v1/clients/8?view=full', { headers })
    const comparable = (res: RawResponse): Record<string, unknown> => {
      const { instance, requestId, serverTime, ...rest } = res.json()
      return rest
    }
    t.same(comparable(viaCaddy), comparable(inline), 'the problem is inline mode\'s')
    t.equal(viaCaddy.headers['www-authenticate'], inline.headers['www-authenticate'])
  })

  t.test('forged identity headers never reach the upstream, nor keygate\'s own carriers', async (t) => {
    // every header the upstream hears only from keygate, by the code's names: stripped first, then copied from the answer
    const copied = [...CADDYFILE.matchAll(/^\s*copy_headers ([^\n]+)/gm)].flatMap((m) => (m[1] as string).toLowerCase().split(/\s+/))
    // unconditional deletions: a name, or a prefix ending in * (Caddy's wildcard)
    const deleted = [...CADDYFILE.matchAll(/^\s*request_header -(\S+)$/gm)].map((m) => (m[1] as string).toLowerCase())
    const strips = (name: string): boolean => deleted.some((d) => d.endsWith('*') ? name.startsWith(d.slice(0, -1)) : name === d)
    for (const name of [...Object.values(DEFAULT_IDENTITY_HEADERS), DEFAULT_IDENTITY_TOKEN_HEADER, FORWARDED_DIGEST_HEADER]) {
      t.ok(strips(name), `the Caddyfile strips the client's ${name}`)
      t.ok(copied.includes(name), `and copies ${name} from keygate's answer`)
      t.ok(FORGED_NAMES.includes(name), `the forgeries below include ${name}`)
    }
    for (const key of keys) {
      const target = `/v1/clients/?forged=${key.type}`
      const [res, [request]] = await seen(async () => await send(proxy.url, target, { headers: { ...FORGED, ...await seedSigned(key, 'GET', target) } }))
      t.equal(res.status, 200, res.text)
      identityOf(t, `forged headers, ${key.type}`, request, key)
      t.equal(request?.headers['x-keygate-content-digest'], undefined, 'no X-Keygate-Content-Digest')
      t.equal(request?.headers.x_gateway_user, undefined, 'no X_Gateway_User')
      const names = (request?.rawHeaders ?? []).filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase())
      t.equal(names.filter((name) => name === 'x-gateway-user').length, 1, 'one X-Gateway-User line')
      t.notOk(names.some((name) => name.startsWith('x-keygate-client-') || name.startsWith('ratelimit')), 'no RateLimit carriers')
      t.notOk((request?.rawHeaders ?? []).some((value) => value.includes('{http.')), 'no unresolved Caddy placeholder')
    }
  })

  t.test('a route\'s rate limit: RateLimit on allowed answers, 429 with Retry-After at the client, the upstream spared', async (t) => {
    const get = async (i: number): Promise<[RawResponse, RecordedRequest[]]> =>
      await seen(async () => await send(proxy.url, `/v1/limited/${i}`, { headers: await seedSigned(rsaKey, 'GET', `/v1/limited/${i}`) }))
    for (const i of [1, 2]) {
      const [res, reached] = await get(i)
      t.equal(res.status, 200, res.text)
      t.equal(reached.length, 1)
      t.match(res.headers.ratelimit, /r=\d+/, `allowed ${i}: keygate's RateLimit at the client`)
      t.ok(res.headers['ratelimit-policy'], `allowed ${i}: RateLimit-Policy at the client`)
    }
    const limited = await get(3)
    refusedWith(t, 'the third in a minute', limited, 429, 'RATE_LIMITED')
    t.match(limited[0].headers['retry-after'], /^[1-9]\d*$/, 'Retry-After in seconds')
    t.match(limited[0].headers.ratelimit, /r=0/)
  })

  t.test('replay marks hold across decision and inline modes', async (t) => {
    const del = await seedSigned(rsaKey, 'DELETE', '/v1/clients/41')
    const [first, reached] = await seen(async () => await send(proxy.url, '/v1/clients/41', { method: 'DELETE', headers: del }))
    t.equal(first.status, 200, `a signed DELETE via Caddy: ${first.text}`)
    t.equal(reached[0]?.method, 'DELETE')
    refusedWith(t, 'the same DELETE straight to keygate', await seen(async () => await send(gw.url, '/v1/clients/41', { method: 'DELETE', headers: del })),
      401, 'REPLAYED_REQUEST')

    const post = await seedSigned(rsaKey, 'POST', '/v1/clients/', '')
    const [inline] = await seen(async () => await send(gw.url, '/v1/clients/', { method: 'POST', headers: post, body: '' }))
    t.equal(inline.status, 200, `a signed POST with Content-Length: 0 straight to keygate: ${inline.text}`)
    refusedWith(t, 'the same POST via Caddy', await seen(async () => await send(proxy.url, '/v1/clients/', { method: 'POST', headers: post, body: '' })),
      401, 'REPLAYED_REQUEST')

    const again = await seedSigned(rsaKey, 'POST', '/v1/clients/', '')
    const [viaCaddy, [request]] = await seen(async () => await send(proxy.url, '/v1/clients/', { method: 'POST', headers: again, body: '' }))
    t.equal(viaCaddy.status, 200, `a new one via Caddy (Content-Length: 0 is no body): ${viaCaddy.text}`)
    t.equal(request?.body.length, 0)
  })

  t.test('bodies Caddy does not show keygate', async (t) => {
    const body = '{"name":"Ada","file":"report.pdf"}'
    for (const target of ['/v1/clients/', '/v1/uploads/']) {
      refusedWith(t, `seed-signed POST with a body, ${target}`,
        await seen(async () => await send(proxy.url, target, { method: 'POST', headers: await seedSigned(rsaKey, 'POST', target, body), body })),
        400, 'UNSEEN_BODY')
    }
    refusedWith(t, 'RFC 9421 POST over content-digest, on a route whose unseenBody is refuse',
      await seen(async () => await send(proxy.url, '/v1/clients/', {
        method: 'POST', headers: await rfcSigned(proxy.url, token, rsaKey, 'POST', '/v1/clients/', { body }), body
      })),
      400, 'UNSEEN_BODY')
    refusedWith(t, 'RFC 9421 POST not covering content-digest, on the digest route (as inline: the body must be covered)',
      await seen(async () => await send(proxy.url, '/v1/uploads/', {
        method: 'POST', headers: await rfcSigned(proxy.url, token, rsaKey, 'POST', '/v1/uploads/', { body, fields: ['@method', '@target-uri'] }), body
      })), 401, 'INVALID_SIGNATURE')

    for (const key of keys) {
      const target = `/v1/uploads/?key=${key.type}`
      const headers = await rfcSigned(proxy.url, token, key, 'POST', target, { body })
      const [res, [request]] = await seen(async () => await send(proxy.url, target, { method: 'POST', headers, body }))
      t.equal(res.status, 200, `RFC 9421 over content-digest, unseenBody digest, ${key.type}: ${res.text}`)
      t.equal(request?.headers['x-keygate-content-digest'], headers['content-digest'], `${key.type}: X-Keygate-Content-Digest is the signed Content-Digest`)
      t.equal(request?.body.toString(), body, `${key.type}: the upstream gets the body as sent`)
      identityOf(t, `digest route, ${key.type}`, request, key)
    }

    // a signed Content-Digest keygate could not check against a body either: refused as inline
    // refuses it, never passed on for the upstream to make sense of
    for (const [what, digest] of [
      ['only an algorithm keygate does not compute', 'sha-1=:3YzcbuV2eHuNmJU8c6F+q0GNTQ4=:'],
      ['not a Structured Fields dictionary', 'sha-256=abc'],
      ['sha-256 not a byte sequence', 'sha-256="abc"'],
      ['sha-256 of 3 bytes', 'sha-256=:YWJj:']
    ] as const) {
      const signedFor = async (origin: string): Promise<Record<string, string>> =>
        await rfcSigned(origin, token, rsaKey, 'POST', '/v1/uploads/', { body, digest })
      const inline = await send(gw.url, '/v1/uploads/', { method: 'POST', headers: await signedFor(gw.url), body })
      t.equal(inline.status, 401, `inline, Content-Digest with ${what}: ${inline.text}`)
      refusedWith(t, `Content-Digest with ${what}, via Caddy`,
        await seen(async () => await send(proxy.url, '/v1/uploads/', { method: 'POST', headers: await signedFor(proxy.url), body })),
        inline.status, inline.json().code as string)
    }

    // chunked: no Content-Length, so keygate cannot tell the body from none; a POST counts as one
    refusedWith(t, 'seed-signed chunked POST',
      await seen(async () =>
        await sendChunked(proxy.url, '/v1/clients/', await seedSigned(rsaKey, 'POST', '/v1/clients/', body), [body.slice(0, 10), body.slice(10)])),
      400, 'UNSEEN_BODY')
    refusedWith(t, 'seed-signed chunked POST, the client claiming X-Original-Content-Length: 0',
      await seen(async () => await sendChunked(proxy.url, '/v1/clients/', {
        ...await seedSigned(rsaKey, 'POST', '/v1/clients/'), 'x-original-content-length': '0'
      }, [body])), 400, 'UNSEEN_BODY')
    refusedWith(t, 'seed-signed chunked POST with no body bytes at all',
      await seen(async () => await sendChunked(proxy.url, '/v1/clients/', await seedSigned(rsaKey, 'POST', '/v1/clients/', ''), [])), 400, 'UNSEEN_BODY')
    // a GET or DELETE without Content-Length is taken to have no body: the Caddyfile's step 1b makes it so
    for (const method of ['GET', 'DELETE']) {
      const target = `/v1/clients/chunked-${method}`
      const [answer, reached] = await seen(async () => await sendChunked(proxy.url, target, await seedSigned(rsaKey, method, target), ['{x:1}'], method))
      t.equal(answer.status, 400, `a chunked ${method} with a body: 400 from Caddy`)
      t.equal(reached.length, 0, `a chunked ${method}: the upstream never sees it`)
    }
    const headers = await rfcSigned(proxy.url, token, rsaKey, 'POST', '/v1/uploads/chunked', { body })
    const [res, [request]] = await seen(async () => await sendChunked(proxy.url, '/v1/uploads/chunked', headers, [body.slice(0, 10), body.slice(10)]))
    t.equal(res.status, 200, `RFC 9421 chunked POST over content-digest, digest route: ${res.text}`)
    t.equal(request?.headers['x-keygate-content-digest'], digestOf(body))
    t.equal(request?.body.toString(), body)
  })

  t.test('odd targets: judged exactly as inline mode judges them, never a valid one refused', async (t) => {
    const long = `/v1/clients/?q=${'a%20b%2Fc-'.repeat(300)}`
    const targets = [
      '/v1/clients/a%20b?x=1&y=a%2Fb+c&z=%26%3D',
      '/v1/clients/a+b?q=1+2',
      '/v1/clients/a%2Fb',
      '/v1/clients/x;v=1',
      '/v1/matrix/x;v=1?q=1',
      long,
      '/v1/clients/caf%C3%A9?q=%C3%A9%E2%82%AC',
      '/v1/clients/caf%c3%a9',
      '/v1/clients/%7Bid%7D',
      '/v1/clients/a|b{c}"d',
      '/v1/clients/../limited/9',
      '/v1/clients/%2e%2e/limited/9',
      '//v1/clients/',
      '/v1/clients/x?',
      '/v1/clients/x?a=1&a=2&b='
    ]
    t.ok(long.length > 3000, 'a query of over 3 KB')
    for (const target of targets) {
      // GETs are not replay-guarded: the same seed-signed headers go both ways
      const headers = await seedSigned(rsaKey, 'GET', target)
      const [viaCaddy, caddySeen] = await seen(async () => await send(proxy.url, target, { headers }))
      const [inline, inlineSeen] = await seen(async () => await send(gw.url, target, { headers }))
      const what = `seed ${target.slice(0, 60)}`
      t.equal(viaCaddy.status, inline.status, `${what}: ${inline.status} as inline (${inline.text.slice(0, 200)})`)
      if (inline.status === 200) {
        t.equal(caddySeen.length, 1, `${what}: reached the upstream`)
        t.equal(caddySeen[0]?.url, inlineSeen[0]?.url, `${what}: the same target upstream as inline`)
        identityOf(t, what, caddySeen[0], rsaKey)
      } else {
        refusedWith(t, what, [viaCaddy, caddySeen], inline.status, inline.json().code as string)
      }
      // RFC 9421 signs the target URI the client used: one signature for each origin
      const [rfcCaddy] = await seen(async () => await send(proxy.url, target, { headers: await rfcSigned(proxy.url, token, rsaKey, 'GET', target) }))
      const rfcInline = await send(gw.url, target, { headers: await rfcSigned(gw.url, token, rsaKey, 'GET', target) })
      t.equal(rfcCaddy.status, rfcInline.status, `RFC 9421 ${target.slice(0, 60)}: ${rfcInline.status} as inline (${rfcCaddy.text.slice(0, 200)})`)
      if (rfcInline.status !== 200) t.equal(rfcCaddy.json().code, rfcInline.json().code)
    }

    // raw UTF-8 in the request line: Caddy takes it, and keygate refuses the target as inline does
    const raw = Buffer.concat([Buffer.from('GET /v1/clients/caf'), Buffer.from('é'), Buffer.from(' HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')])
    const [viaCaddy, reached] = await seen(async () => await sendRaw(proxy.url, raw))
    const inline = await sendRaw(gw.url, raw)
    t.equal(viaCaddy.status, 400, `raw UTF-8 target via Caddy: ${viaCaddy.text.slice(0, 300)}`)
    t.equal(inline.status, 400, 'raw UTF-8 target straight to keygate')
    t.same(reached, [], 'the upstream never saw it')
  })

  t.test('an MCP route: decided, a tools/call is 400 UNSEEN_BODY; through the page\'s MCP handle (inline), each tool judged', async (t) => {
    const call = (name: string, id: number | string): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } })
    const post = async (url: string, body: string): Promise<RawResponse> => await send(url, '/mcp', { method: 'POST', headers: mcpPostHeaders(token), body })
    const before = mcp.requests.length
    const unseen = await post(proxy.url, call('whoami', 1))
    t.equal(unseen.status, 400, unseen.text)
    t.match(unseen.headers['content-type'], /^application\/json/)
    t.match(unseen.json(), { jsonrpc: '2.0', id: null, error: { code: -32001, data: { code: 'UNSEEN_BODY' } } }, 'a JSON-RPC error an MCP client reads')
    t.equal(mcp.requests.length, before, 'nothing reached the MCP server')

    t.ok(CADDYFILE.includes(MCP_HANDLE_BEFORE), 'the page\'s Caddyfile has the place the handle goes')
    const inline = await runCaddy(t, caddy.path, CADDYFILE.replace(MCP_HANDLE_BEFORE, `${MCP_HANDLE}\n${MCP_HANDLE_BEFORE}`), {
      KEYGATE_DECISION: new URL(decisionUrl).host,
      KEYGATE_PUBLIC: new URL(gw.url).host,
      UPSTREAM: new URL(upstream.url).host
    })
    const allowed = await post(inline.url, call('whoami', 2))
    t.equal(allowed.status, 200, allowed.text)
    t.match(allowed.json(), { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text' }] } }, 'the MCP server\'s answer')
    t.equal(mcp.calls('whoami').at(-1)?.headers['x-gateway-user'], 'alice', 'keygate forwarded it as alice')
    const forbidden = await post(inline.url, call('write-note', 3))
    t.equal(forbidden.status, 403)
    t.match(forbidden.headers['www-authenticate'], /error="insufficient_scope", scope="mcp:use notes:write"/)
    t.match(forbidden.json(), { jsonrpc: '2.0', id: 3, error: { code: -32001, data: { code: 'INSUFFICIENT_SCOPE' } } })
    t.equal(mcp.calls('write-note').length, 0, 'the forbidden tool never reached the MCP server')
  })

  t.test('keygate not answering: 504 after KEYGATE_DECISION_TIMEOUT, not listening: 502; the upstream never reached', async (t) => {
    const held: Socket[] = []
    const silent = createServer((socket) => { held.push(socket) })
    const port = await freePort()
    await new Promise<void>((resolve) => silent.listen(port, '127.0.0.1', resolve))
    t.teardown(() => { for (const socket of held) socket.destroy(); if (silent.listening) silent.close() })
    const down = await runCaddy(t, caddy.path, CADDYFILE, {
      KEYGATE_DECISION: `127.0.0.1:${port}`, UPSTREAM: new URL(upstream.url).host, KEYGATE_DECISION_TIMEOUT: '1s'
    })
    const target = '/v1/clients/?down=1'
    const [timeout, reachedOnTimeout] = await seen(async () => await send(down.url, target, { headers: await seedSigned(rsaKey, 'GET', target) }))
    t.equal(timeout.status, 504, 'keygate silent: 504')
    t.equal(timeout.body.length, 0, 'an empty body')
    t.same(reachedOnTimeout, [])
    for (const socket of held) socket.destroy()
    await new Promise((resolve) => silent.close(resolve))
    const [refused, reachedWhenDown] = await seen(async () => await send(down.url, target, { headers: await seedSigned(rsaKey, 'GET', target) }))
    t.equal(refused.status, 502, 'keygate not listening: 502')
    t.equal(refused.body.length, 0, 'an empty body')
    t.same(reachedWhenDown, [])
  })
})
