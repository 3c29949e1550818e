// Rate limits and quotas end to end, on real sockets and a real Redis: two gateways on one Redis
// share a per-key limit exactly; the RateLimit fields (parsed as Structured Fields) replace the
// upstream's on 200s and come with 429s, which carry Retry-After and never reach the upstream; a
// quota survives a gateway restart; with Redis cut, onStoreDown allow and deny do what they say,
// counted in the metrics; by address, behind a trusted proxy.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { rateLimitFields } from '../helpers/ratelimit-fields.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { startRelay } from '../helpers/relay.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, type GatewayHandle, type StackOptions } from '../helpers/stack.js'

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

/** An upstream that counts what reaches it and answers with RateLimit fields of its own, which the gateway must replace. */
async function countingUpstream (t: Test): Promise<{ url: string; hits: string[] }> {
  const hits: string[] = []
  const server = createServer((req, res) => {
    hits.push(`${req.method ?? ''} ${req.url ?? ''}`)
    res.writeHead(200, { 'content-type': 'application/json', ratelimit: '"upstream";r=999;t=1', 'ratelimit-policy': '"upstream";q=1000;w=1' })
    res.end('{"ok":true}')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => { await new Promise((resolve) => server.close(resolve)) })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits }
}

const routesOf = (yaml: string) => (upstream: string) => routesFromYaml(yaml, upstream)

const ROUTES = `routes:
  - name: things
    prefix: /v1/things/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: key, limit: 20, window: 10s }
  - name: lenient
    prefix: /v1/lenient/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: key, limit: 100, window: 1m }
  - name: strict
    prefix: /v1/strict/
    upstream: UPSTREAM
    auth: signed
    methods: [GET]
    rateLimits:
      - { by: key, limit: 100, window: 1m }
    onStoreDown: deny
  - name: reports
    prefix: /reports/
    upstream: UPSTREAM
    auth: bearer
    methods: [GET]
    rateLimits:
      - { by: user, limit: 3, window: 30d, bucket: monthly }
  - name: open
    prefix: /open/
    upstream: UPSTREAM
    auth: public
    methods: [GET]
    rateLimits:
      - { by: address, limit: 2, window: 1m }
`

interface Client { token: string; keys: ReturnType<typeof rsaKeyPair> }

async function client (gateway: GatewayHandle, username: string): Promise<Client> {
  await addUser(gateway, username)
  const token = await login(gateway.url, username)
  const keys = rsaKeyPair()
  const registered = await registerKey(gateway.url, token, keys)
  if (registered.status !== 201) throw new Error(`registration failed: ${registered.status} ${registered.text}`)
  return { token, keys }
}

const getSigned = async (url: string, c: Client, target: string): Promise<RawResponse> =>
  await sendSigned(url, { keys: c.keys, token: c.token, method: 'GET', target })

t.test('two gateways on one Redis, requests alternating: 20 of 40 pass a per-key limit of 20 per 10 s', async (t) => {
  const upstream = await countingUpstream(t)
  const redisUrl = await testRedisUrl()
  const redisPrefix = uniquePrefix('rate-limits')
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const options: StackOptions & { upstreamUrl: string } = { store: 'redis', redisPrefix, upstreamUrl: upstream.url, routes: routesOf(ROUTES) }
  const [a, b] = await Promise.all([startTestGateway(t, options), startTestGateway(t, options)]) as [GatewayHandle, GatewayHandle]
  const alice = await client(a, 'alice')

  const answers: RawResponse[] = []
  const started = performance.now()
  for (let i = 0; i < 40; i++) answers.push(await getSigned(i % 2 === 0 ? a.url : b.url, alice, `/v1/things/${i}`))
  const elapsedMs = performance.now() - started
  const passed = answers.filter((r) => r.status === 200)
  const refused = answers.filter((r) => r.status === 429)
  t.same(answers.slice(0, 20).map((r) => r.status), Array(20).fill(200), 'the first 20 pass, though half went to each gateway')
  // A GCRA counter drains one request every 10 s / 20 = 0.5 s: on a slow machine, 40 requests
  // that take longer than that let one more through per half second, and no other.
  const drained = Math.floor(elapsedMs / 500)
  t.ok(passed.length >= 20 && passed.length <= 20 + drained,
    `${passed.length} of 40 passed in ${Math.round(elapsedMs)} ms: the limit, plus at most the ${drained} drained meanwhile`)
  t.equal(passed.length + refused.length, 40, 'the rest are refused')
  t.same(upstream.hits, answers.flatMap((r, i) => r.status === 200 ? [`GET /v1/things/${i}`] : []),
    'the upstream saw exactly the requests that passed, once each')

  // The fields on a 200: the gateway's, not the upstream's, well-formed Structured Field Lists.
  const first = rateLimitFields(answers[0]?.headers ?? {})
  t.same([...first.policies], [['key-10s', { q: 20, w: 10 }]], 'RateLimit-Policy: "key-10s";q=20;w=10')
  t.same([...first.limits], [['key-10s', { r: 19, t: 1 }]], 'RateLimit: 19 left; full again within a second (one request drains in 0.5 s)')
  const twentieth = rateLimitFields(answers[19]?.headers ?? {}).limits.get('key-10s')
  t.ok(twentieth !== undefined && twentieth.r <= drained && twentieth.t >= 9 && twentieth.t <= 10,
    `the 20th: none left (or what drained meanwhile), full again in about 10 s: ${JSON.stringify(twentieth)}`)
  for (const answer of passed) t.notOk(String(answer.headers.ratelimit).includes('upstream'), 'the upstream\'s RateLimit never gets through')

  // The 429: problem+json naming the limit, Retry-After, the fields.
  const limited = refused[0] as RawResponse
  t.match(limited.headers['content-type'], /^application\/problem\+json/)
  t.match(limited.json(), { code: 'RATE_LIMITED', status: 429, policy: 'key-10s', by: 'key', limit: 20, window: '10s' })
  const retryAfter = Number(limited.headers['retry-after'])
  t.equal(retryAfter, 1, 'Retry-After in whole seconds: one request drains in 0.5 s, rounded up')
  const fields = rateLimitFields(limited.headers)
  t.same(fields.policies.get('key-10s'), { q: 20, w: 10 })
  t.same(fields.limits.get('key-10s'), { r: 0, t: retryAfter }, 'RateLimit on the 429: none left until Retry-After')

  // The metric: refusals by route and by.
  const scraped = (await a.app.keygate.metrics.scrape()).body + (await b.app.keygate.metrics.scrape()).body
  const counts = [...scraped.matchAll(/^keygate_rate_limited_total\{route="things",by="key"\} (\d+)$/gm)].map((m) => Number(m[1]))
  t.equal(counts.reduce((x, y) => x + y, 0), refused.length, 'keygate_rate_limited_total{route="things",by="key"}: every refusal, over both gateways')

  // Once it drains, the key passes again.
  await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000 + 100))
  t.equal((await getSigned(b.url, alice, '/v1/things/again')).status, 200, 'after Retry-After, the next request passes')
})

t.test('a quota lives in Redis: it survives a gateway restart', async (t) => {
  const upstream = await countingUpstream(t)
  const redisUrl = await testRedisUrl()
  const redisPrefix = uniquePrefix('rate-quota')
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const options: StackOptions & { upstreamUrl: string } = { store: 'redis', redisPrefix, upstreamUrl: upstream.url, routes: routesOf(ROUTES) }
  const first = await startTestGateway(t, options)
  await addUser(first, 'carol')
  const token = await login(first.url, 'carol')
  const bearer = { authorization: `Bearer ${token}` }
  for (let i = 0; i < 2; i++) t.equal((await send(first.url, '/reports/monthly', { headers: bearer })).status, 200)
  await first.app.close()

  const second = await startTestGateway(t, options)
  const third = await send(second.url, '/reports/monthly', { headers: bearer })
  t.equal(third.status, 200, 'the restarted gateway counts on: the 3rd of 3 passes')
  t.same(rateLimitFields(third.headers).limits.get('monthly-user-30d')?.r, 0)
  const over = await send(second.url, '/reports/monthly', { headers: bearer })
  t.equal(over.status, 429, 'the 4th of 3 is refused')
  const retryAfter = Number(over.headers['retry-after'])
  t.ok(retryAfter > 863_000 && retryAfter <= 864_000, `Retry-After: ten days, when one of the 3 per 30 days drains (${retryAfter} s)`)
  t.equal(upstream.hits.length, 3, 'the upstream saw the 3 that passed')
})

t.test('Redis cut: onStoreDown allow forwards uncounted without RateLimit fields, deny answers 503; both counted', async (t) => {
  const upstream = await countingUpstream(t)
  const target = new URL(await testRedisUrl())
  const relay = await startRelay(t, target)
  const gateway = await startTestGateway(t, {
    store: 'redis',
    upstreamUrl: upstream.url,
    routes: routesOf(ROUTES),
    config: { redisUrl: relay.url, redisCommandTimeoutMs: 300 }
  })
  const bob = await client(gateway, 'bob')
  // while Redis answers: counted (and the key and token are cached, so authentication needs no Redis later)
  t.equal((await getSigned(gateway.url, bob, '/v1/lenient/1')).status, 200)
  t.equal((await getSigned(gateway.url, bob, '/v1/strict/1')).status, 200)

  await relay.cut()
  const allowed = await getSigned(gateway.url, bob, '/v1/lenient/2')
  t.equal(allowed.status, 200, 'allow: forwarded')
  t.equal(allowed.headers.ratelimit, undefined, 'without a RateLimit field (the upstream\'s is dropped too)')
  t.equal(allowed.headers['ratelimit-policy'], undefined)
  const denied = await getSigned(gateway.url, bob, '/v1/strict/2')
  t.equal(denied.status, 503, 'deny: refused')
  t.match(denied.json(), { code: 'STORE_UNAVAILABLE' })
  t.equal(denied.headers['retry-after'], '1')
  t.same(upstream.hits, ['GET /v1/lenient/1', 'GET /v1/strict/1', 'GET /v1/lenient/2'], 'the denied request never reached the upstream')

  const scraped = (await gateway.app.keygate.metrics.scrape()).body
  t.match(scraped, /^keygate_rate_limit_store_failures_total\{route="lenient",mode="allow"\} 1$/m)
  t.match(scraped, /^keygate_rate_limit_store_failures_total\{route="strict",mode="deny"\} 1$/m)

  await relay.restore()
  for (let attempt = 0; ; attempt++) {
    const back = await getSigned(gateway.url, bob, '/v1/strict/3')
    if (back.status === 200) {
      t.same(rateLimitFields(back.headers).limits.get('key-1m')?.r, 98, 'Redis back: counted again (2 of 100 used)')
      break
    }
    if (attempt > 50) throw new Error('Redis did not come back')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
})

t.test('by address: the client behind a trusted proxy, each its own count', async (t) => {
  const upstream = await countingUpstream(t)
  const gateway = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: upstream.url,
    routes: routesOf(ROUTES),
    config: { clientAddress: { trustedProxies: ['127.0.0.1'], header: 'x-forwarded-for' } }
  })
  const from = (address: string) => ({ headers: { 'x-forwarded-for': address } })
  t.equal((await send(gateway.url, '/open/a', from('198.51.100.1'))).status, 200)
  t.equal((await send(gateway.url, '/open/b', from('198.51.100.1'))).status, 200)
  const refused = await send(gateway.url, '/open/c', from('198.51.100.1'))
  t.equal(refused.status, 429, 'the third from one client address is refused')
  t.match(refused.json(), { by: 'address', limit: 2, window: '1m' })
  t.equal((await send(gateway.url, '/open/d', from('198.51.100.2'))).status, 200, 'another client behind the same proxy has its own count')
  t.equal((await send(gateway.url, '/open/e', from('2001:db8:7:7::1'))).status, 200)
  t.equal((await send(gateway.url, '/open/f', from('2001:db8:7:7::2'))).status, 200)
  t.equal((await send(gateway.url, '/open/g', from('2001:db8:7:7:ffff::3'))).status, 429, 'IPv6: one /64 is one client')
  t.equal(upstream.hits.length, 5, 'refused requests never reached the upstream')
})
