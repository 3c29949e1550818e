// Decision mode behind a real nginx (Debian's, auth_request), run with docs/decision/nginx.md's
// configuration as the page gives it (its three `# EDIT:` lines pointed at this test's ports),
// in front of a recording upstream, keygate deciding on Redis. What the client and the upstream
// see: signed GETs with a query pass with the identity headers, in both schemes and with each
// key type; tampering is refused with keygate's own status and body at the client, and the
// upstream never sees it; forged identity headers never reach the upstream; 429s of a limit and
// of the failed-signature budget stay 429s with Retry-After; a replay across decision and inline
// mode is refused; awkward targets verify (or are refused exactly as inline refuses them); and a
// body nginx does not send is refused, or passes as a digest the upstream checks.
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exportJWK } from 'jose'
import { helpers, jwkToKeyID, signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import t, { type Test } from 'tap'
import { registerKey as registerClientKey, signRequest } from '../../client/src/index.js'
import { loadDecisionConfig } from '../../bench/nginx.js'
import { blockSettings, docSnippet } from '../helpers/docs.js'
import { send, sendRaw, type RawResponse } from '../helpers/http.js'
import type { GatewayConfig } from '../../gateway/src/config/env.js'
import { FORWARDED_DIGEST_HEADER } from '../../client/src/protocol/index.js'
import { DEFAULT_IDENTITY_HEADERS } from '../../gateway/src/proxy/route.js'
import { DEFAULT_IDENTITY_TOKEN_HEADER } from '../../gateway/src/proxy/route-file.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { mcpPostHeaders, startMcpServer, type TestMcpServer } from '../helpers/mcp-server.js'
import { findNginx, runNginx } from '../helpers/nginx.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { forgedValues, headerNames, HOSTILE_EXTRAS, ownApiThroughProxy } from '../helpers/upstream-headers.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway, type GatewayHandle } from '../helpers/stack.js'

const nginx = findNginx()
const skip = 'reason' in nginx ? `nginx cannot be installed here: ${nginx.reason}` : false
const nginxPath = 'path' in nginx ? nginx.path : ''
/** what the upstream hears only from keygate: the identity headers, the identity token, the digest to check */
const IDENTITY = [...Object.values(DEFAULT_IDENTITY_HEADERS), DEFAULT_IDENTITY_TOKEN_HEADER, FORWARDED_DIGEST_HEADER]

/** keygate's side, as the page sets it: the decision listener's host and the proxies it believes */
const SETTINGS = blockSettings(docSnippet('docs/decision/nginx.md', 'keygate\'s side', 'sh'))
const DECISION = {
  port: 0,
  host: SETTINGS.KEYGATE_DECISION_HOST as string,
  trustedProxies: (SETTINGS.KEYGATE_DECISION_TRUSTED_PROXIES as string).split(',')
}

const ROUTES = `routes:
  - name: clients
    prefix: /v1/clients/
    upstream: UPSTREAM
    auth: signed
  - name: limited
    prefix: /v1/limited/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: key, limit: 2, window: 1m }
  - name: uploads
    prefix: /v1/uploads/
    upstream: UPSTREAM
    auth: signed
    unseenBody: digest
  - name: matrix
    prefix: /v1/matrix/
    upstream: UPSTREAM
    auth: signed
    allowMatrixParams: true
  - name: proven
    prefix: /v1/proven/
    upstream: UPSTREAM
    auth: signed
    identityToken: {}
  - name: agents
    prefix: /v1/agents/
    upstream: UPSTREAM
    auth: agent
    agents: [https://agent.example]
    methods: [GET]
  - path: /mcp
    upstream: MCP_SERVER
    auth: bearer
    mcp:
      tools: { whoami: [], "write-*": [notes:write] }
`

/** The page's configuration, its `# EDIT:` lines pointed at this test's nginx port, keygate and upstream (as the bench reads it). */
const pageConfig = loadDecisionConfig()
/** The page's location for keygate's own API, and its upstream: added to the configuration as the page says */
const [publicUpstream, publicLocation] = docSnippet('docs/decision/nginx.md', 'Where clients log in and register keys', 'nginx')
  .split('# in the server block, beside location /') as [string, string]
const withPublicPort = (config: string, publicUrl: string): string => {
  const upstream = publicUpstream.replace(/server \S+;\s*# EDIT:.*/, `server ${new URL(publicUrl).host};`)
  const location = publicLocation.split('\n').map((line) => `    ${line}`).join('\n')
  return upstream + config.replace('    location / {', `${location}\n    location / {`)
}

interface Key { apiKey: string; privateKey: KeyObject }

interface Setup {
  gateway: GatewayHandle
  nginxUrl: string
  recorder: Recorder
  token: string
  keys: Record<'rsa' | 'ed25519' | 'p256', Key>
}

const json = (res: RawResponse): Record<string, unknown> => JSON.parse(res.text) as Record<string, unknown>

/**
 * A recorder, keygate on Redis deciding (with `config` besides), nginx with the page's configuration
 * in front, and alice's token; the MCP route's upstream a real MCP server; `extra`: more of the
 * page's locations, beside `location /`.
 */
async function decidingStack (t: Test, config: Partial<GatewayConfig> = {}, extra = '') {
  const recorder = await startRecorder(t)
  const mcp: TestMcpServer = await startMcpServer(t)
  const gateway = await startTestGateway(t, {
    store: 'redis',
    upstreamUrl: recorder.url,
    routes: (upstream) => routesFromYaml(ROUTES.replace('MCP_SERVER', mcp.url), upstream),
    config: { decision: DECISION, ...config }
  })
  const decisionUrl = await gateway.app.keygate.decisions?.listen({ port: 0, host: DECISION.host }) as string
  const located = (config: string): string => extra === '' ? config : config.replace('    location / {', `${indented(extra)}\n    location / {`)
  const proxy = await runNginx(t, nginxPath, (port) => located(withPublicPort(pageConfig(port, decisionUrl, recorder.url), gateway.url)))
  await addUser(gateway, 'alice')
  // logged in through nginx, at keygate's public port (the page's location for keygate's own API)
  return { recorder, mcp, gateway, proxy, token: await login(proxy.url, 'alice') }
}

const indented = (block: string): string => block.split('\n').map((line) => `    ${line}`).join('\n')
/** the page's location that sends MCP routes to keygate's public port (inline) */
const MCP_LOCATION = docSnippet('docs/decision/nginx.md', 'MCP routes', 'nginx')

t.test('nginx auth_request with keygate deciding, configured as docs/decision/nginx.md says', { skip }, async (t) => {
  const { recorder, gateway, proxy, token } = await decidingStack(t)
  const privateKeys = {
    rsa: rsaKeyPair().privateKey,
    ed25519: generateKeyPairSync('ed25519').privateKey,
    p256: generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey
  }
  const keys = {} as Setup['keys']
  for (const [type, privateKey] of Object.entries(privateKeys) as Array<[keyof Setup['keys'], KeyObject]>) {
    // registered through nginx too
    const { apiKey } = await registerClientKey({ baseUrl: proxy.url, token, name: 'test key', privateKey })
    keys[type] = { apiKey, privateKey }
  }
  const s: Setup = { gateway, nginxUrl: proxy.url, recorder, token, keys }
  const reached = (target: string): number => recorder.requests.filter((r) => r.url === target).length

  const seed = async (pair: Key, method: string, target: string, extra: Record<string, string> = {}) => {
    const headers = await signRequest({ method, target, apiKey: pair.apiKey, privateKey: pair.privateKey })
    return await send(s.nginxUrl, target, { method, headers: { ...headers, authorization: `Bearer ${token}`, ...extra } })
  }
  const seedHeaders = async (pair: Key, method: string, target: string): Promise<Record<string, string>> =>
    ({ ...await signRequest({ method, target, apiKey: pair.apiKey, privateKey: pair.privateKey }), authorization: `Bearer ${token}` })
  const rfc9421 = async (pair: Key, method: string, target: string, body?: string, baseUrl = s.nginxUrl) => {
    const headers = await signRequest({ scheme: 'rfc9421', method, target, body, apiKey: pair.apiKey, privateKey: pair.privateKey, baseUrl })
    return await send(s.nginxUrl, target, { method, headers: { ...headers, authorization: `Bearer ${token}` }, ...(body !== undefined && { body }) })
  }

  t.test('keygate\'s own API and portal through nginx: served by keygate\'s public port, never the application', async (t) => {
    await ownApiThroughProxy(t, s.nginxUrl, recorder)
  })

  t.test('signed GETs with a query reach the upstream with the identity headers, both schemes, every key type', async (t) => {
    for (const [type, pair] of Object.entries(s.keys)) {
      for (const scheme of ['seed', 'rfc9421'] as const) {
        const target = `/v1/clients/?type=${type}&scheme=${scheme}&q=a%2Fb+c`
        const res = scheme === 'seed' ? await seed(pair, 'GET', target) : await rfc9421(pair, 'GET', target)
        t.equal(res.status, 200, `${type} ${scheme}: ${res.text}`)
        const got = recorder.requests.find((r) => r.url === target)
        t.ok(got, `${type} ${scheme}: the upstream got the target byte for byte`)
        t.equal(got?.headers['x-gateway-user'], 'alice')
        t.equal(got?.headers['x-gateway-key'], pair.apiKey)
        t.equal(got?.headers['x-gateway-key-name'], 'test key')
        t.equal(got?.headers['cache-control'], undefined, 'the decision\'s no-store is nginx\'s, not the upstream\'s')
      }
    }
  })

  t.test('tampered requests get keygate\'s own status and problem at the client; the upstream never sees them', async (t) => {
    const pair = s.keys.rsa
    const target = '/v1/clients/?tamper=1'
    const signed = await seedHeaders(pair, 'GET', target)
    const other = await seedHeaders(s.keys.ed25519, 'GET', target)
    const cases: Array<[string, string, string, Record<string, string>, number, string]> = [
      ['method', 'DELETE', target, signed, 401, 'INVALID_SIGNATURE'],
      ['path', 'GET', '/v1/clients/42?tamper=1', signed, 401, 'INVALID_SIGNATURE'],
      ['query', 'GET', '/v1/clients/?tamper=2', signed, 401, 'INVALID_SIGNATURE'],
      ['key', 'GET', target, { ...signed, 'X-API-Key': other['X-API-Key'] as string }, 401, 'INVALID_SIGNATURE'],
      ['timestamp', 'GET', target, { ...signed, 'X-API-Timestamp': String(Date.now() - 3_600_000) }, 401, 'TIMESTAMP_OUT_OF_RANGE'],
      ['no token', 'GET', target, { ...signed, authorization: '' }, 401, 'MISSING_TOKEN'],
      ['no route', 'GET', '/nowhere', signed, 404, 'NOT_FOUND']
    ]
    const before = recorder.requests.length
    for (const [what, method, sentTarget, headers, status, code] of cases) {
      const res = await send(s.nginxUrl, sentTarget, { method, headers })
      t.equal(res.status, status, `${what}: ${res.text}`)
      t.match(res.headers['content-type'], /^application\/problem\+json/, `${what}: problem+json`)
      t.equal(json(res).code, code, `${what}: keygate's code`)
      t.equal(json(res).status, status, `${what}: the body's status`)
    }
    // an absolute-form request line: nginx would pick a server by its host; refused before keygate is asked
    const absolute = await sendRaw(s.nginxUrl, `GET http://internal.test${target} HTTP/1.1\r\nHost: api.test\r\n` +
      Object.entries(signed).map(([name, value]) => `${name}: ${value}\r\n`).join('') + 'Connection: close\r\n\r\n')
    t.equal(absolute.status, 400, 'absolute form: 400 from nginx, as inline')
    const missing = await send(s.nginxUrl, target, { headers: { ...signed, authorization: '' } })
    t.equal(missing.headers['www-authenticate'], 'Bearer realm="keygate", DPoP algs="ES256 EdDSA Ed25519 RS256 PS256"',
      'WWW-Authenticate once (Bearer\'s and DPoP\'s challenges in one field), as inline')
    t.equal(recorder.requests.length, before, 'nothing reached the upstream')
    // the same refusal inline, for the same request: the same answer
    const inline = await send(gateway.url, '/v1/clients/?tamper=2', { headers: signed })
    const viaNginx = await send(s.nginxUrl, '/v1/clients/?tamper=2', { headers: signed })
    t.same({ ...json(viaNginx), detail: undefined }, { ...json(inline), detail: undefined }, 'the body is inline\'s')
  })

  t.test('identity headers a client forges never reach the upstream; the identity token keygate makes does', async (t) => {
    const block = docSnippet('docs/decision/nginx.md', 'The configuration', 'nginx')
    for (const name of IDENTITY) t.match(block, new RegExp(`proxy_set_header ${name} `, 'i'), `the configuration sets ${name} from the decision`)
    const target = '/v1/clients/?forged=1'
    const forged = Object.fromEntries(IDENTITY.map((name) => [name, 'mallory']))
    t.equal((await seed(s.keys.rsa, 'GET', target, forged)).status, 200)
    const got = recorder.requests.find((r) => r.url === target)
    t.equal(got?.headers['x-gateway-user'], 'alice')
    t.equal(got?.headers['x-gateway-key'], s.keys.rsa.apiKey)
    for (const name of [DEFAULT_IDENTITY_TOKEN_HEADER, FORWARDED_DIGEST_HEADER]) t.equal(got?.headers[name], undefined, `${name}: not sent`)
    t.notOk(got?.rawHeaders.includes('mallory'), 'no forged value anywhere')
    const proven = '/v1/proven/?forged=1'
    t.equal((await seed(s.keys.rsa, 'GET', proven, forged)).status, 200)
    const token = recorder.requests.find((r) => r.url === proven)?.headers[DEFAULT_IDENTITY_TOKEN_HEADER]
    t.match(token, /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/, 'the route\'s identity token, a JWT keygate signed')
    const claims = JSON.parse(Buffer.from(String(token).split('.')[1] as string, 'base64url').toString()) as Record<string, unknown>
    t.equal(claims.sub, 'alice')
  })

  t.test('the upstream receives the headers inline mode sends it, for the same signed request, both schemes', async (t) => {
    // nginx's own forwarding of the request: none of these is the client's (the page's block writes
    // X-Forwarded-For, the client's address, as inline does)
    const pair = s.keys.ed25519
    for (const scheme of ['seed', 'rfc9421'] as const) {
      const viaNginx = `/v1/clients/?same=${scheme}&via=nginx`
      const inline = `/v1/clients/?same=${scheme}&via=inline`
      const as = { method: 'GET', target: '', apiKey: pair.apiKey, privateKey: pair.privateKey }
      const sign = async (baseUrl: string, target: string): Promise<Record<string, string>> => ({
        ...scheme === 'seed' ? await signRequest({ ...as, target }) : await signRequest({ ...as, scheme, target, baseUrl }),
        authorization: `Bearer ${token}`,
        ...HOSTILE_EXTRAS
      })
      t.equal((await send(s.nginxUrl, viaNginx, { headers: await sign(s.nginxUrl, viaNginx) })).status, 200, `${scheme}: through nginx`)
      t.equal((await send(gateway.url, inline, { headers: await sign(gateway.url, inline) })).status, 200, `${scheme}: inline`)
      const decided = recorder.requests.find((r) => r.url === viaNginx)
      const direct = recorder.requests.find((r) => r.url === inline)
      // nginx never sends a header set to an empty value: alice's scopes (none) are an empty
      // X-Gateway-Scopes inline, and no header through nginx (the page says so)
      t.equal(direct?.headers['x-gateway-scopes'], '', `${scheme}: inline, no scopes is an empty header`)
      t.equal(decided?.headers['x-gateway-scopes'], undefined, `${scheme}: through nginx, no header`)
      t.same(headerNames(decided), headerNames(direct, ['x-gateway-scopes']), `${scheme}: the same header names`)
      t.same(forgedValues(decided), [], `${scheme}: no forged value through nginx`)
      t.equal(decided?.headers['x-forwarded-for'], '127.0.0.1', `${scheme}: the client's address, not its claim`)
      t.equal(decided?.headers.authorization, undefined, `${scheme}: the bearer token stays out of the application`)
      t.equal(decided?.headers['x-custom'], 'kept')
    }
    // a body the application checks against the digest keygate verified: Content-Digest as inline
    // sends it, and the digest to check, which only decision mode needs
    const body = '{"name":"Ada"}'
    const sign = async (baseUrl: string, target: string): Promise<Record<string, string>> => ({
      ...await signRequest({ scheme: 'rfc9421', method: 'POST', target, body, apiKey: pair.apiKey, privateKey: pair.privateKey, baseUrl }),
      authorization: `Bearer ${token}`,
      ...HOSTILE_EXTRAS
    })
    for (const [url, via] of [[s.nginxUrl, 'nginx'], [gateway.url, 'inline']] as const) {
      const target = `/v1/uploads/?via=${via}`
      t.equal((await send(url, target, { method: 'POST', headers: await sign(url, target), body })).status, 200, `the upload ${via}`)
    }
    const decided = headerNames(recorder.requests.find((r) => r.url === '/v1/uploads/?via=nginx'))
    const direct = headerNames(recorder.requests.find((r) => r.url === '/v1/uploads/?via=inline'), ['x-gateway-scopes'])
    t.ok(direct.includes('content-digest') && decided.includes('content-digest'), 'Content-Digest in both')
    t.same(decided, [...direct, FORWARDED_DIGEST_HEADER].sort(), 'the same names, and the digest for the application to check')
  })

  t.test('a route\'s rate limit: 429 with Retry-After at the client', async (t) => {
    const statuses: number[] = []
    let last: RawResponse | undefined
    for (let i = 0; i < 3; i++) {
      last = await seed(s.keys.rsa, 'GET', `/v1/limited/?n=${i}`)
      statuses.push(last.status)
    }
    t.same(statuses, [200, 200, 429])
    t.equal(json(last as RawResponse).code, 'RATE_LIMITED')
    t.match(last?.headers['retry-after'], /^[0-9]+$/, 'Retry-After')
    t.match(last?.headers.ratelimit, /r=0/, 'RateLimit at the client')
    t.equal(reached('/v1/limited/?n=2'), 0)
  })
})

t.test('decision and inline share the replay guard; targets; bodies', { skip }, async (t) => {
  const { recorder, gateway, proxy, token } = await decidingStack(t, { signatureFailures: { limit: 3, windowSeconds: 60, delayMs: 0 } })
  const pair = rsaKeyPair()
  t.equal((await registerKey(gateway.url, token, pair)).status, 201)

  t.test('a signed DELETE allowed once by a decision is a replay inline, and the other way', async (t) => {
    const first = signedHeaders({ keys: pair, token, method: 'DELETE', target: '/v1/clients/7' })
    t.equal((await send(proxy.url, '/v1/clients/7', { method: 'DELETE', headers: first })).status, 200)
    const again = await send(gateway.url, '/v1/clients/7', { method: 'DELETE', headers: first })
    t.equal(again.status, 401)
    t.equal(json(again).code, 'REPLAYED_REQUEST')
    const second = signedHeaders({ keys: pair, token, method: 'DELETE', target: '/v1/clients/8' })
    t.equal((await send(gateway.url, '/v1/clients/8', { method: 'DELETE', headers: second })).status, 200)
    const replayed = await send(proxy.url, '/v1/clients/8', { method: 'DELETE', headers: second })
    t.equal(replayed.status, 401)
    t.equal(json(replayed).code, 'REPLAYED_REQUEST')
    t.equal(recorder.requests.filter((r) => r.method === 'DELETE').length, 2, 'each DELETE reached the upstream once')
  })

  t.test('awkward targets verify through nginx, or are refused exactly as inline refuses them', async (t) => {
    const targets = [
      '/v1/clients/?q=a+b&x=%2F&y=%C3%A9',
      `/v1/clients/?long=${'x'.repeat(3000)}`,
      '/v1/clients/a%20b',
      '/v1/clients/%2Fetc',
      '/v1/clients/a;b',
      '/v1/matrix/a;b=1',
      '/v1/clients/%63',
      '/v1/clients/caf%C3%A9'
    ]
    for (const target of targets) {
      const inline = await send(gateway.url, target, { headers: signedHeaders({ keys: pair, token, method: 'GET', target }) })
      const decided = await send(proxy.url, target, { headers: signedHeaders({ keys: pair, token, method: 'GET', target }) })
      t.equal(decided.status, inline.status, `${target.slice(0, 60)}: ${decided.text.slice(0, 200)}`)
      if (inline.status !== 200) t.equal(json(decided).code, json(inline).code, `${target.slice(0, 60)}: the same code`)
      else t.ok(recorder.requests.some((r) => r.url === target), `${target.slice(0, 60)}: reached the upstream as sent`)
    }
  })

  t.test('a body nginx does not send: refused, unless the route lets an RFC 9421 digest stand for it', async (t) => {
    const body = '{"name":"Ada"}'
    const as = { apiKey: pair.apiKey, privateKey: pair.privateKey }
    const before = recorder.requests.length
    const seedPost = await send(proxy.url, '/v1/clients/', {
      method: 'POST',
      headers: { ...signedHeaders({ keys: pair, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json' },
      body
    })
    t.equal(seedPost.status, 400)
    t.equal(json(seedPost).code, 'UNSEEN_BODY')
    t.match(json(seedPost).detail, /Envoy.*Traefik/)
    const rfcOnClients = await signRequest({ scheme: 'rfc9421', method: 'POST', target: '/v1/clients/', body, ...as, baseUrl: proxy.url })
    const refused = await send(proxy.url, '/v1/clients/', { method: 'POST', headers: { ...rfcOnClients, authorization: `Bearer ${token}` }, body })
    t.equal(json(refused).code, 'UNSEEN_BODY', 'a route without unseenBody: digest refuses it in any scheme')
    t.equal(recorder.requests.length, before, 'nothing reached the upstream')

    const signed = await signRequest({ scheme: 'rfc9421', method: 'POST', target: '/v1/uploads/', body, ...as, baseUrl: proxy.url })
    const allowed = await send(proxy.url, '/v1/uploads/', { method: 'POST', headers: { ...signed, authorization: `Bearer ${token}` }, body })
    t.equal(allowed.status, 200, allowed.text)
    const got = recorder.requests.find((r) => r.url === '/v1/uploads/')
    t.equal(got?.headers['x-keygate-content-digest'], signed['Content-Digest'], 'the upstream is told the digest to check')
    t.equal(got?.body.toString(), body, 'and gets the body')
    const forgedDigest = await send(proxy.url, '/v1/uploads/', {
      method: 'POST',
      headers: { ...signed, authorization: `Bearer ${token}`, 'x-keygate-content-digest': 'sha-256=:AAAA:' },
      body
    })
    t.equal(forgedDigest.status, 401, 'the same signature again is a replay')
    t.equal(json(forgedDigest).code, 'REPLAYED_REQUEST')
    const seedUpload = await send(proxy.url, '/v1/uploads/', {
      method: 'POST',
      headers: { ...signedHeaders({ keys: pair, token, method: 'POST', target: '/v1/uploads/', body }), 'content-type': 'application/json' },
      body
    })
    t.equal(json(seedUpload).code, 'UNSEEN_BODY', 'the seed scheme signs bytes keygate must see, whatever the route says')
  })

  t.test('the failed-signature budget of the client\'s address (nginx\'s $remote_addr): 429 with Retry-After', async (t) => {
    // the budget counts failed signatures by the client's address (nginx's $remote_addr: 127.0.0.1)
    const wrong = Buffer.alloc(256, 1).toString('base64')
    const bad = { ...signedHeaders({ keys: pair, token, method: 'GET', target: '/v1/clients/?b=1' }), 'x-api-signature': wrong }
    const answers: RawResponse[] = []
    for (let i = 0; i < 4; i++) answers.push(await send(proxy.url, '/v1/clients/?b=2', { headers: bad }))
    t.same(answers.map((a) => a.status), [401, 401, 401, 429], 'three failures, then the budget')
    t.equal(json(answers[3] as RawResponse).code, 'RATE_LIMITED')
    t.match(answers[3]?.headers['retry-after'], /^[0-9]+$/)
    const good = await send(proxy.url, '/v1/clients/?b=3', { headers: signedHeaders({ keys: pair, token, method: 'GET', target: '/v1/clients/?b=3' }) })
    t.equal(good.status, 429, 'a good signature from that address waits too, as inline')
  })
})

t.test('an MCP route: decided, a tools/call is 400 UNSEEN_BODY; through the page\'s MCP location (inline), each tool judged', { skip }, async (t) => {
  const decided = await decidingStack(t)
  const call = (name: string, id: number): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } })
  const post = async (url: string, token: string, body: string): Promise<RawResponse> =>
    await send(url, '/mcp', { method: 'POST', headers: mcpPostHeaders(token), body })
  const unseen = await post(decided.proxy.url, decided.token, call('whoami', 1))
  t.equal(unseen.status, 400, unseen.text)
  t.match(unseen.headers['content-type'], /^application\/problem\+json/, 'the page labels every refusal so')
  t.match(json(unseen), { jsonrpc: '2.0', id: null, error: { code: -32001, data: { code: 'UNSEEN_BODY' } } }, 'keygate\'s JSON-RPC error')
  t.equal(decided.mcp.requests.length, 0, 'nothing reached the MCP server')

  const inline = await decidingStack(t, {}, MCP_LOCATION)
  const allowed = await post(inline.proxy.url, inline.token, call('whoami', 2))
  t.equal(allowed.status, 200, allowed.text)
  t.match(json(allowed), { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text' }] } }, 'the MCP server\'s answer')
  t.equal(inline.mcp.calls('whoami')[0]?.headers['x-gateway-user'], 'alice', 'keygate forwarded it as alice')
  const forbidden = await post(inline.proxy.url, inline.token, call('write-note', 3))
  t.equal(forbidden.status, 403)
  t.match(forbidden.headers['www-authenticate'], /error="insufficient_scope", scope="notes:write"/)
  t.match(json(forbidden), { jsonrpc: '2.0', id: 3, error: { code: -32001, data: { code: 'INSUFFICIENT_SCOPE' } } })
  t.equal(inline.mcp.calls('write-note').length, 0, 'the forbidden tool never reached the MCP server')
})

t.test('a signed agent (Web Bot Auth) through nginx: the decision verifies it as inline does, the upstream hears who it is', { skip }, async (t) => {
  // the agent's key pinned (an agents file): no directory to fetch
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const privateJwk = await exportJWK(privateKey)
  const publicJwk = await exportJWK(publicKey)
  const dir = mkdtempSync(join(tmpdir(), 'keygate-agents-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const agentsFile = join(dir, 'agents.yaml')
  writeFileSync(agentsFile, `directories:\n  - origin: https://agent.example\n    keys: [${JSON.stringify(publicJwk)}]\n`)
  const { recorder, proxy } = await decidingStack(t, { agentDirectoriesFile: agentsFile })
  const keyid = await jwkToKeyID(publicJwk as never, helpers.WEBCRYPTO_SHA256, helpers.BASE64URL_DECODE)
  /** signed by web-bot-auth for the host the client asks (nginx's) */
  const agentHeaders = async (target: string): Promise<Record<string, string>> => {
    const headers = { 'signature-agent': '"https://agent.example"', 'x-gateway-agent': 'https://forged.example' }
    const now = new Date()
    const signed = await signatureHeaders(new Request(`${proxy.url}${target}`, { headers }), await signerFromJWK(privateJwk),
      { created: now, expires: new Date(now.getTime() + 60_000) })
    return { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] }
  }
  const headers = await agentHeaders('/v1/agents/?via=nginx')
  const allowed = await send(proxy.url, '/v1/agents/?via=nginx', { headers })
  t.equal(allowed.status, 200, allowed.text)
  const got = recorder.requests.find((r) => r.url === '/v1/agents/?via=nginx')
  t.equal(got?.headers['x-gateway-agent'], 'https://agent.example', 'the agent, from the decision (the client\'s copy replaced)')
  t.equal(got?.headers['x-gateway-agent-key'], keyid, 'its key\'s thumbprint')
  t.equal(got?.headers['x-gateway-user'], undefined)
  const again = await send(proxy.url, '/v1/agents/?via=nginx', { headers })
  t.equal(again.status, 401)
  t.equal(json(again).code, 'REPLAYED_REQUEST', 'one request per signature, behind nginx too')
  const unsigned = await send(proxy.url, '/v1/agents/?via=nginx&unsigned=1', {})
  t.equal(json(unsigned).code, 'MISSING_AGENT_SIGNATURE')
  t.equal(recorder.requests.filter((r) => r.url.startsWith('/v1/agents/')).length, 1, 'only the verified request reached the upstream')
})
