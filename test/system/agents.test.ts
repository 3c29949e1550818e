// Signed agents (Web Bot Auth) through a running keygate on Redis, signed by Cloudflare's
// web-bot-auth package, their directory served over HTTPS by the test (its own CA, which keygate
// is given) at agent.test, a name only the test's resolver knows (127.0.0.1; nothing is asked of
// the machine's DNS). The agents file lets agent.test be fetched on a loopback address (an
// operator's privateAddress; other.test, a second agent, is pinned with its keys); any other name
// fails to resolve. What a recorder upstream sees of each request, what each refusal
// answers, the bounds on what made-up directories cost, one signature spent across two gateways
// on one Redis; and per agent: its rate limit, its usage read-out, its identity token.
import { generateKeyPairSync } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { join } from 'node:path'
import { createRemoteJWKSet, exportJWK, jwtVerify, type JWK } from 'jose'
import t from 'tap'
import { directoryResponseHeaders, HTTP_MESSAGE_SIGNATURES_DIRECTORY, helpers, jwkToKeyID, MediaType, signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import { keygateCli } from '../helpers/cli.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { login, addUser, startStack } from '../helpers/stack.js'
import { testCertificates } from '../helpers/test-ca.js'
import { startHttpsServer } from '../unit/gateway/net/servers.js'
import { testRedisUrl, uniquePrefix } from '../helpers/redis.js'

interface AgentKey { privateJwk: JWK, publicJwk: JWK, keyid: string }
async function agentKey (): Promise<AgentKey> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const publicJwk = await exportJWK(publicKey)
  return { privateJwk: await exportJWK(privateKey), publicJwk, keyid: await jwkToKeyID(publicJwk as never, helpers.WEBCRYPTO_SHA256, helpers.BASE64URL_DECODE) }
}

const { caPem } = testCertificates(['agent.test', 'other.test'])
const key = await agentKey()
const stranger = await agentKey()
let published: AgentKey[] = [key]
let directoryRequests = 0
const directory = await startHttpsServer('127.0.0.1', 0, (req, res) => {
  directoryRequests++
  const url = `https://${req.headers.host ?? ''}${req.url ?? ''}`
  if (req.url !== HTTP_MESSAGE_SIGNATURES_DIRECTORY) { res.statusCode = 404; res.end(); return }
  const response = new Response(JSON.stringify({ keys: published.map((k) => k.publicJwk) }), {
    headers: { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY, 'cache-control': 'max-age=300' }
  })
  const now = new Date()
  void Promise.all(published.map(async (k) => await signerFromJWK(k.privateJwk)))
    .then(async (signers) => await directoryResponseHeaders({ request: new Request(url), response } as never, signers,
      { created: now, expires: new Date(now.getTime() + 300_000) }))
    .then((signed) => {
      res.writeHead(200, {
        'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY,
        'cache-control': 'max-age=300',
        signature: signed.Signature,
        'signature-input': signed['Signature-Input']
      })
      res.end(JSON.stringify({ keys: published.map((k) => k.publicJwk) }))
    })
})
t.teardown(directory.close)
const AGENT = `https://agent.test:${directory.port}`
/** a second agent, with the same key: pinned in the agents file, so never fetched (whatever the made-up directories below cost) */
const OTHER_AGENT = `https://other.test:${directory.port}`
/** what keygate asked to resolve: only agent.test has an address */
const resolved: string[] = []
const resolver = async (hostname: string): Promise<Array<{ address: string, family: 4 | 6 }>> => {
  resolved.push(hostname)
  if (hostname === 'agent.test') return [{ address: '127.0.0.1', family: 4 }]
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
}

const recorder = await startRecorder(t)
const routes = routeFile(t, `routes:
  - { name: agents, prefix: /v1/agents/, upstream: ${recorder.url}, auth: agent, agents: any, methods: [GET, POST] }
  - { name: named, prefix: /v1/named/, upstream: ${recorder.url}, auth: agent, agents: [https://other.test], methods: [GET] }
  - { name: assist, prefix: /v1/assist/, upstream: ${recorder.url}, auth: bearer, agents: any, methods: [GET], identityToken: { audience: https://assist.test } }
  - name: limited
    prefix: /v1/limited/
    upstream: ${recorder.url}
    auth: agent
    agents: any
    methods: [GET]
    rateLimits: [{ by: agent, limit: 2, window: 1m }]
    identityToken: { audience: https://backend.test }
`)
const agentsFile = join(routes.path, '..', 'agents.yaml')
writeFileSync(agentsFile, `directories:\n  - { origin: ${AGENT}, privateAddress: true }\n` +
  `  - { origin: ${OTHER_AGENT}, keys: [${JSON.stringify(key.publicJwk)}] }\n`)
const prefix = uniquePrefix()
const stackOptions = {
  store: 'redis' as const,
  redisPrefix: prefix,
  upstreamUrl: recorder.url,
  config: { routesFile: routes.path, agentDirectoriesFile: agentsFile },
  agentDirectories: { resolver, ca: caPem }
}
const gw = await startStack(t, stackOptions)
const host = new URL(gw.url).host

/** A request signed by web-bot-auth as an agent sends it (Signature-Agent covered), sent to keygate. */
async function agentRequest (path: string, options: { signer?: AgentKey, agent?: string, headers?: Record<string, string>, to?: string } = {}) {
  const headers: Record<string, string> = { 'signature-agent': JSON.stringify(options.agent ?? AGENT), ...options.headers }
  const target = `http://${host}${path}`
  const now = new Date()
  const signed = await signatureHeaders(new Request(target, { headers }), await signerFromJWK((options.signer ?? key).privateJwk),
    { created: now, expires: new Date(now.getTime() + 60_000) })
  return { headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] }, target }
}
/** Sends it to `to` (the first gateway by default), its Host the one it was signed for: behind one name, as a balancer's gateways are. */
async function send (request: { headers: Record<string, string>, target: string }, to = gw.url):
Promise<{ status: number, body: Record<string, unknown>, headers: Record<string, string | string[] | undefined> }> {
  const url = new URL(to)
  return await new Promise((resolve, reject) => {
    const outgoing = httpRequest({
      host: url.hostname, port: url.port, path: new URL(request.target).pathname, headers: { ...request.headers, host }
    }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => {
        resolve({
          status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown>, headers: response.headers
        })
      })
    })
    outgoing.on('error', reject)
    outgoing.end()
  })
}

t.test('a signed agent reaches its route; the upstream hears who it is; the same signature again is refused', async (t) => {
  const before = recorder.requests.length
  const request = await agentRequest('/v1/agents/orders', { headers: { 'x-gateway-agent': 'https://forged.test', 'x-gateway-user': 'admin' } })
  const first = await send(request)
  t.equal(first.status, 200, JSON.stringify(first.body))
  const seen = recorder.requests.at(-1)
  t.equal(seen?.headers['x-gateway-agent'], AGENT, 'the agent: its directory\'s origin')
  t.equal(seen?.headers['x-gateway-agent-key'], key.keyid, 'its key: the JWK thumbprint web-bot-auth computed')
  t.equal(seen?.headers['x-gateway-user'], undefined, 'no user: an agent route has none (the client\'s header dropped)')
  const again = await send(request)
  t.equal(again.status, 401)
  t.equal(again.body.code, 'REPLAYED_REQUEST')
  t.equal(recorder.requests.length, before + 1, 'forwarded once')
})

t.test('the directory rotates its key: a signature by the new one verifies without a restart', async (t) => {
  const next = await agentKey()
  // the new key published beside the old; its keyid unknown to what keygate holds: one fetch
  published = [key, next]
  const answer = await send(await agentRequest('/v1/agents/rotated', { signer: next }))
  t.equal(answer.status, 200, JSON.stringify(answer.body))
  t.equal(recorder.requests.at(-1)?.headers['x-gateway-agent-key'], next.keyid)
})

t.test('refused, each with its code, nothing forwarded', async (t) => {
  const before = recorder.requests.length
  const expect = async (what: string, request: { headers: Record<string, string>, target: string }, code: string, status = 401): Promise<void> => {
    const answer = await send(request)
    t.equal(answer.status, status, `${what}: ${status}`)
    t.equal(answer.body.code, code, `${what}: ${code} (${String(answer.body.detail)})`)
  }
  await expect('unsigned', { headers: {}, target: `http://${host}/v1/agents/x` }, 'MISSING_AGENT_SIGNATURE')
  await expect('a keyid not in the directory', await agentRequest('/v1/agents/x', { signer: stranger }), 'UNKNOWN_AGENT_KEY')
  const good = await agentRequest('/v1/agents/x')
  await expect('Signature-Agent changed', { ...good, headers: { ...good.headers, 'signature-agent': `"${AGENT}/"` } }, 'INVALID_AGENT_SIGNATURE')
  const narrowedInput = good.headers['signature-input']?.replace('("@authority" "signature-agent")', '("signature-agent")') ?? ''
  const narrowed = { ...good, headers: { ...good.headers, 'signature-input': narrowedInput } }
  await expect('covering no @authority', narrowed, 'INVALID_AGENT_SIGNATURE')
  await expect('an agent the route does not name', await agentRequest('/v1/named/x'), 'AGENT_NOT_ALLOWED', 403)
  await expect('a directory whose name resolves nowhere', await agentRequest('/v1/agents/x', { agent: 'https://nowhere.test' }), 'AGENT_DIRECTORY_UNAVAILABLE')
  t.equal(recorder.requests.length, before, 'nothing forwarded')
})

t.test('a user\'s agent: the bearer route that names agents wants the token and the agent\'s signature', async (t) => {
  await addUser(gw, 'carol')
  const token = await login(gw.url, 'carol')
  const tokenAlone = await fetch(`${gw.url}/v1/assist/today`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(tokenAlone.status, 401)
  t.equal((await tokenAlone.json() as { code: string }).code, 'MISSING_AGENT_SIGNATURE')
  const both = await send(await agentRequest('/v1/assist/today', { headers: { authorization: `Bearer ${token}` } }))
  t.equal(both.status, 200, JSON.stringify(both.body))
  t.match(recorder.requests.at(-1)?.headers, { 'x-gateway-user': 'carol', 'x-gateway-agent': AGENT, 'x-gateway-agent-key': key.keyid })
})

t.test('1,000 requests naming 1,000 made-up directories: a bounded number of fetches, no DNS beyond the test\'s resolver', async (t) => {
  const resolvedBefore = resolved.length
  const codes = new Map<string, number>()
  const requests = await Promise.all(Array.from({ length: 1000 }, async (_, i) => await agentRequest('/v1/agents/x', { agent: `https://made-up-${i}.test` })))
  for (let i = 0; i < requests.length; i += 50) {
    const answers = await Promise.all(requests.slice(i, i + 50).map(async (request) => await send(request)))
    for (const answer of answers) codes.set(String(answer.body.code), (codes.get(String(answer.body.code)) ?? 0) + 1)
  }
  t.same([...codes.keys()], ['AGENT_DIRECTORY_UNAVAILABLE'], 'each refused, saying why')
  const fetched = resolved.length - resolvedBefore
  t.ok(fetched > 0, 'made-up directories are fetched (within the budget), not refused before')
  t.ok(fetched <= 60, `at most 60 new directories a minute are fetched: ${fetched} names resolved for 1,000 requests`)
  t.equal((await send(await agentRequest('/v1/agents/after'))).status, 200, 'and the known agent still gets in')
})

t.test('one signature, two gateways on one Redis: the second refuses it', async (t) => {
  const second = await startStack(t, stackOptions)
  const request = await agentRequest('/v1/agents/twice')
  t.equal((await send(request, gw.url)).status, 200)
  const replayed = await send(request, second.url)
  t.equal(replayed.status, 401)
  t.equal(replayed.body.code, 'REPLAYED_REQUEST', 'its nonce is remembered across gateways')
  t.ok(directoryRequests >= 1)
})

t.test('limits by agent: the third request of an agent in the minute is refused with the RateLimit fields; another agent still passes', async (t) => {
  const answers = []
  for (let i = 0; i < 3; i++) answers.push(await send(await agentRequest(`/v1/limited/${i}`)))
  t.same(answers.map((a) => a.status), [200, 200, 429], JSON.stringify(answers.at(-1)?.body))
  t.equal(answers[0]?.headers['ratelimit-policy'], '"agent-1m";q=2;w=60')
  t.equal(answers[0]?.headers.ratelimit, '"agent-1m";r=1;t=30')
  const refused = answers[2]
  t.match(refused?.body, { code: 'RATE_LIMITED', by: 'agent', policy: 'agent-1m', limit: 2 })
  t.equal(refused?.headers['retry-after'], '30')
  t.equal(refused?.headers.ratelimit, '"agent-1m";r=0;t=30')
  const other = await send(await agentRequest('/v1/limited/other', { agent: OTHER_AGENT }))
  t.equal(other.status, 200, `${OTHER_AGENT} counts apart: ${JSON.stringify(other.body)}`)
  t.equal(other.headers.ratelimit, '"agent-1m";r=1;t=30')
  t.equal(recorder.requests.at(-1)?.headers['x-gateway-agent'], OTHER_AGENT)
})

t.test('the identity token: verified with keygate\'s JWKS, it names the agent (on an agent route, as its subject)', async (t) => {
  const jwks = createRemoteJWKSet(new URL(`${gw.url}/.well-known/jwks.json`))
  t.equal((await send(await agentRequest('/v1/limited/token', { agent: OTHER_AGENT }))).status, 200)
  const token = recorder.requests.at(-1)?.headers['x-keygate-identity'] as string
  const { payload, protectedHeader } = await jwtVerify(token, jwks, { audience: 'https://backend.test', typ: 'keygate-identity+jwt' })
  t.equal(payload.sub, OTHER_AGENT, 'no user: the agent is the subject')
  t.same(payload.agent, { origin: OTHER_AGENT, jkt: key.keyid }, 'the agent claim: its origin and its key\'s thumbprint')
  t.equal(payload.scope, undefined)
  t.ok(protectedHeader.kid)

  await addUser(gw, 'dave')
  const bearer = await login(gw.url, 'dave')
  t.equal((await send(await agentRequest('/v1/assist/token', { headers: { authorization: `Bearer ${bearer}` } }))).status, 200)
  const users = await jwtVerify(recorder.requests.at(-1)?.headers['x-keygate-identity'] as string, jwks, { audience: 'https://assist.test' })
  t.equal(users.payload.sub, 'dave', 'a user\'s agent: the user is the subject')
  t.same(users.payload.agent, { origin: AGENT, jkt: key.keyid }, 'and the agent acting for them its claim')
})

t.test('usage over time by agent: keygate usage top --by agent and series --agent, from the Redis', async (t) => {
  await gw.app.keygate.usage?.flush()
  const env = { REDIS_URL: await testRedisUrl(), KEYGATE_REDIS_PREFIX: prefix }
  const top = await keygateCli(['usage', 'top', '--by', 'agent', '--json'], '', env)
  t.equal(top.code, 0, top.stderr)
  interface Item { name: string | null, requests: number, refusals: number, codes: Record<string, number> }
  const { items } = JSON.parse(top.stdout) as { by: string, items: Item[] }
  const agent = items.find((item) => item.name === AGENT)
  t.ok((agent?.requests ?? 0) >= 4, `${AGENT}: its requests counted (${agent?.requests ?? 0})`)
  t.ok((agent?.codes.RATE_LIMITED ?? 0) >= 1, 'with the 429 among its refusals')
  t.match(items.find((item) => item.name === OTHER_AGENT), { requests: 2, refusals: 0 }, `${OTHER_AGENT}: its two requests`)
  const series = await keygateCli(['usage', 'series', '--agent', OTHER_AGENT, '--since', '1h', '--json'], '', env)
  t.equal(series.code, 0, series.stderr)
  const points = JSON.parse(series.stdout) as { by: string, name: string, points: Array<{ requests: number }> }
  t.match(points, { by: 'agent', name: OTHER_AGENT })
  t.equal(points.points.reduce((sum, point) => sum + point.requests, 0), 2)
})

t.test('the metrics: agent requests by pinned origin or other, and directory fetches, never an unpinned origin as a label', async (t) => {
  const { body } = await gw.app.keygate.metrics.scrape()
  t.match(body, new RegExp(`keygate_agent_requests_total\\{agent="${OTHER_AGENT}",outcome="ok"\\} [1-9]`), 'the pinned agent by its origin')
  t.match(body, /keygate_agent_requests_total\{agent="other",outcome="REPLAYED_REQUEST"\} [1-9]/, 'another agent as other')
  t.match(body, /keygate_agent_requests_total\{agent="none",outcome="MISSING_AGENT_SIGNATURE"\} [1-9]/, 'no agent verified: none')
  t.notMatch(body, /keygate_agent_requests_total\{[^}]*outcome="RATE_LIMITED"/, 'a rate limit is not an authentication outcome: those 429s counted ok')
  t.notMatch(body, /agent="https:\/\/(agent|made-up)/, 'no unpinned origin')
  t.match(body, /keygate_agent_directory_fetches_total\{outcome="ok"\} [1-9]/)
  t.match(body, /keygate_agent_directory_fetches_total\{outcome="error"\} [1-9]/)
})
