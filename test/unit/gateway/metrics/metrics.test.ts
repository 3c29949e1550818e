// GET /metrics for Prometheus, on its own listener (127.0.0.1 by default, off unless
// KEYGATE_METRICS_PORT is set): requests by route and status, auth outcomes by reason code, the
// signature and upstream latency histograms, cache hits and misses, store errors. Real sockets,
// a real Redis under a prefix of its own, and a Redis relay to cut for the store errors.
import { createServer, type AddressInfo } from 'node:net'
import t from 'tap'
import { loadConfig } from '../../../../gateway/src/config/env.js'
import { route, type RouteConfig } from '../../../../gateway/src/proxy/route.js'
import { startGateway as startProcessGateway, type RunningGateway } from '../../../../gateway/src/process/start.js'
import { send } from '../../../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../../../helpers/keys.js'
import { parse, value, type Sample } from '../../../helpers/prometheus.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { deletePrefix, freePort, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { startRelay } from '../../../helpers/relay.js'
import { PASSWORD, login, registerKey, sendSigned, startUpstreamStub, testConfig } from '../../../helpers/stack.js'

async function scrape (gateway: RunningGateway): Promise<{ samples: Sample[]; text: string; contentType: string }> {
  if (gateway.metricsUrl === undefined) throw new Error('no metrics listener')
  const res = await send(gateway.metricsUrl, '/metrics')
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`)
  return { samples: parse(res.text), text: res.text, contentType: String(res.headers['content-type']) }
}

/** A whole gateway process as main.ts starts it, on Redis under its own prefix. */
async function startWithMetrics (
  t: { teardown: (fn: () => unknown) => void },
  overrides: Parameters<typeof testConfig>[0] & { routes?: RouteConfig[] } = {}
): Promise<RunningGateway> {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('metrics')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const upstream = await startUpstreamStub(t)
  const { routes, ...configOverrides } = overrides
  const base = testConfig({ redisUrl, redisPrefix: prefix, metrics: { port: 0, host: '127.0.0.1' }, ...configOverrides })
  const config = { ...base, routeDefaults: { ...base.routeDefaults, upstream } }
  const gateway = await startProcessGateway({ config, logger: false, ...(routes !== undefined && { routes }) })
  t.teardown(gateway.close)
  await gateway.app.keygate.users.upsert('alice', PASSWORD)
  await gateway.app.keygate.users.upsert('bob', PASSWORD)
  return gateway
}

t.test('the listener: its own port on 127.0.0.1, none by default, never on the public port', async (t) => {
  t.same(loadConfig({}).metrics, { port: undefined, host: '127.0.0.1' }, 'off unless KEYGATE_METRICS_PORT is set; loopback by default')
  t.same(loadConfig({ KEYGATE_METRICS_PORT: '9464', KEYGATE_METRICS_HOST: '0.0.0.0' }).metrics, { port: 9464, host: '0.0.0.0' })
  t.throws(() => loadConfig({ KEYGATE_METRICS_PORT: 'prom' }), { name: 'ConfigError', message: /^KEYGATE_METRICS_PORT:/ })

  const gateway = await startWithMetrics(t)
  t.match(gateway.metricsUrl, /^http:\/\/127\.0\.0\.1:\d+$/)
  t.not(new URL(gateway.metricsUrl ?? '').port, new URL(gateway.url).port)
  const { contentType, text } = await scrape(gateway)
  t.match(contentType, /^text\/plain; version=0\.0\.4/)
  for (const name of ['keygate_http_requests_total', 'keygate_auth_outcomes_total', 'keygate_signature_verification_seconds',
    'keygate_upstream_latency_seconds', 'keygate_cache_lookups_total', 'keygate_store_errors_total', 'keygate_upstream_pending_requests',
    'keygate_upstream_busy_total', 'process_cpu_user_seconds_total']) {
    t.match(text, `# TYPE ${name} `, `${name} is exposed`)
  }
  const onPublicPort = await send(gateway.url, '/metrics')
  t.equal(onPublicPort.status, 404, 'the public port has no /metrics')
  t.equal(onPublicPort.json().code, 'NOT_FOUND')
  const elsewhere = await send(gateway.metricsUrl ?? '', '/v1/clients/')
  t.equal(elsewhere.status, 404, 'the metrics listener serves nothing else')
  t.equal(elsewhere.json().code, 'NOT_FOUND')

  const plain = await startProcessGateway({ config: testConfig(), logger: false })
  t.teardown(plain.close)
  t.equal(plain.metricsUrl, undefined, 'no KEYGATE_METRICS_PORT: no listener')
})

t.test('a metrics port that cannot be had stops the start, and the main port is closed again', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { blocker.close() })
  const taken = (blocker.address() as AddressInfo).port
  const config = testConfig({ metrics: { port: taken, host: '127.0.0.1' }, port: await freePort() })
  await t.rejects(startProcessGateway({ config, logger: false }), { code: 'EADDRINUSE' })
  const probe = createServer()
  await new Promise<void>((resolve, reject) => { probe.once('error', reject).listen(config.port, '127.0.0.1', resolve) })
  probe.close()
  t.pass('the gateway port was released')
})

t.test('requests by route and status; auth outcomes by reason; latency histograms; cache hits', async (t) => {
  const gateway = await startWithMetrics(t)
  const url = gateway.url
  const token = await login(url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(url, token, keys)).status, 201)
  const bobToken = await login(url, 'bob')

  t.equal((await sendSigned(url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200)
  t.equal((await sendSigned(url, { keys, token, method: 'GET', target: '/v1/clients/?limit=5' })).status, 200)
  const created = await sendSigned(url, {
    keys,
    token,
    method: 'POST',
    target: '/v1/clients/',
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345' })
  })
  t.equal(created.status, 201)
  const badSignature = { ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' }), 'x-api-signature': Buffer.alloc(256, 1).toString('base64') }
  t.equal((await send(url, '/v1/clients/', { headers: badSignature })).status, 401)
  t.equal((await send(url, '/v1/clients/')).status, 401, 'no token')
  t.equal((await sendSigned(url, { keys, token: bobToken, method: 'GET', target: '/v1/transactions/' })).status, 403, 'bob signs with alice\'s key')
  t.equal((await send(url, '/v1/auth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'alice', password: 'not the password' })
  })).status, 401)
  t.equal((await send(url, '/healthz')).status, 200)
  t.equal((await send(url, '/nowhere/at/all?x=1')).status, 404)

  const { samples } = await scrape(gateway)
  const requests = (labels: Record<string, string>): number => value(samples, 'keygate_http_requests_total', labels)
  t.equal(requests({ route: '/v1/clients/', method: 'GET', status: '200' }), 2, 'two GETs, one series: the query string is not a label')
  t.equal(requests({ route: '/v1/clients/', method: 'POST', status: '201' }), 1)
  t.equal(requests({ route: '/v1/clients/', method: 'GET', status: '401' }), 2)
  t.equal(requests({ route: '/v1/transactions/', method: 'GET', status: '403' }), 1)
  t.equal(requests({ route: '/v1/auth/token', method: 'POST', status: '200' }), 2)
  t.equal(requests({ route: '/v1/auth/token', method: 'POST', status: '401' }), 1)
  t.equal(requests({ route: '/v1/api-keys', method: 'POST', status: '201' }), 1)
  t.equal(requests({ route: '/healthz', method: 'GET', status: '200' }), 1)
  t.equal(requests({ route: 'none', method: 'GET', status: '404' }), 1, 'no route: the route label is "none", not the URL')

  const outcome = (route: string, reason: string): number => value(samples, 'keygate_auth_outcomes_total', { route, reason })
  t.equal(outcome('/v1/clients/', 'ok'), 3)
  t.equal(outcome('/v1/clients/', 'INVALID_SIGNATURE'), 1)
  t.equal(outcome('/v1/clients/', 'MISSING_TOKEN'), 1)
  t.equal(outcome('/v1/transactions/', 'KEY_OWNER_MISMATCH'), 1)
  t.equal(outcome('/v1/auth/token', 'ok'), 2)
  t.equal(outcome('/v1/auth/token', 'INVALID_CREDENTIALS'), 1)
  t.equal(outcome('/v1/api-keys', 'ok'), 1)
  t.notOk(
    samples.some((s) => s.name === 'keygate_auth_outcomes_total' && ['/healthz', 'none'].includes(s.labels.route ?? '')),
    'routes that do not authenticate have no auth outcome'
  )

  t.equal(value(samples, 'keygate_signature_verification_seconds_count'), 4, 'one RSA verification per request that reached the signature stage')
  const signatureSum = value(samples, 'keygate_signature_verification_seconds_sum')
  t.ok(signatureSum > 0 && signatureSum < 1, `the verifications took a plausible time (${signatureSum} s for 4)`)
  t.equal(value(samples, 'keygate_signature_verification_seconds_bucket', { le: '+Inf' }), 4)
  t.equal(value(samples, 'keygate_upstream_latency_seconds_count', { route: '/v1/clients/' }), 3, 'the three forwarded requests')
  t.equal(value(samples, 'keygate_upstream_latency_seconds_count', { route: '/v1/transactions/' }), 0, 'a refused request is never timed upstream')

  // alice's key: registered (cached at registration), then found in the cache on every request
  t.equal(value(samples, 'keygate_cache_lookups_total', { cache: 'api_key', result: 'miss' }), 0)
  t.equal(value(samples, 'keygate_cache_lookups_total', { cache: 'api_key', result: 'hit' }), 5)
  // alice's token: verified once (at registration), then from the cache; bob's once
  t.equal(value(samples, 'keygate_cache_lookups_total', { cache: 'token', result: 'miss' }), 2)
  t.equal(value(samples, 'keygate_cache_lookups_total', { cache: 'token', result: 'hit' }), 4)
  t.equal(value(samples, 'keygate_store_errors_total'), 0)
})

t.test('labels stay bounded: hostile URLs and methods never become label values', async (t) => {
  const gateway = await startWithMetrics(t)
  for (let i = 0; i < 40; i++) await send(gateway.url, `/probe-${i}/${'x'.repeat(i)}?q=${i}`)
  await send(gateway.url, '/v1/clients/', { method: 'PROPFIND' })
  await send(gateway.url, '/v1/clients/%2e%2e/admin')
  const { samples, text } = await scrape(gateway)
  t.notMatch(text, /probe-/, 'no URL in any label')
  t.equal(value(samples, 'keygate_http_requests_total', { route: 'none', method: 'GET', status: '404' }), 40, 'every unrouted request in one series')
  t.ok(samples.some((s) => s.name === 'keygate_http_requests_total' && s.labels.method === 'OTHER'), 'a method outside the known ones is OTHER')
  const routes = new Set(samples.filter((s) => s.name === 'keygate_http_requests_total').map((s) => s.labels.route))
  t.same([...routes], ['none'], 'an unknown method on a route, a refused target: no route took them')
})

t.test('a route file\'s routes are labelled by their names', async (t) => {
  const recorder = await startRecorder(t)
  const gateway = await startWithMetrics(t, {
    routes: [
      route({ name: 'status', prefix: '/status', upstream: recorder.url, auth: 'public', methods: ['GET'], exact: true }, { bodyLimit: 1024, timeoutMs: 5000 }),
      route({ name: 'orders', prefix: '/orders/', upstream: recorder.url, auth: 'bearer' }, { bodyLimit: 1024, timeoutMs: 5000 })
    ]
  })
  t.equal((await send(gateway.url, '/status')).status, 200)
  t.equal((await send(gateway.url, '/orders/42')).status, 401)
  const token = await login(gateway.url, 'alice')
  t.equal((await send(gateway.url, '/orders/42', { headers: { authorization: `Bearer ${token}` } })).status, 200)
  const { samples } = await scrape(gateway)
  t.equal(value(samples, 'keygate_http_requests_total', { route: 'status', status: '200' }), 1)
  t.equal(value(samples, 'keygate_http_requests_total', { route: 'orders', status: '401' }), 1)
  t.equal(value(samples, 'keygate_auth_outcomes_total', { route: 'orders', reason: 'MISSING_TOKEN' }), 1)
  t.equal(value(samples, 'keygate_auth_outcomes_total', { route: 'orders', reason: 'ok' }), 1)
  t.equal(value(samples, 'keygate_auth_outcomes_total', { route: 'status' }), 0, 'a public route authenticates nobody')
  t.equal(value(samples, 'keygate_upstream_latency_seconds_count', { route: 'status' }), 1)
  t.equal(value(samples, 'keygate_upstream_latency_seconds_count', { route: 'orders' }), 1)
})

t.test('store errors: Redis commands that fail are counted, and the cache misses that caused them', async (t) => {
  const redisUrl = await testRedisUrl()
  const relay = await startRelay(t, new URL(redisUrl))
  const gateway = await startWithMetrics(t, { redisUrl: relay.url })
  const token = await login(gateway.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gateway.url, token, keys)).status, 201)
  await relay.cut()
  const unknownKey = { ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' }), 'x-api-key': 'e'.repeat(64) }
  t.equal((await send(gateway.url, '/v1/clients/', { headers: unknownKey })).status, 503)
  t.equal((await send(gateway.url, '/readyz')).status, 503)
  const { samples } = await scrape(gateway)
  t.ok(value(samples, 'keygate_store_errors_total') >= 2, `each failed command counts (${value(samples, 'keygate_store_errors_total')})`)
  t.equal(value(samples, 'keygate_auth_outcomes_total', { route: '/v1/clients/', reason: 'STORE_UNAVAILABLE' }), 1)
  t.equal(value(samples, 'keygate_cache_lookups_total', { cache: 'api_key', result: 'miss' }), 1, 'the unknown key missed the cache')
  t.equal(value(samples, 'keygate_http_requests_total', { route: '/readyz', status: '503' }), 1)
  await relay.restore()
})
