// What the metrics add to one business request, measured alone: the onResponse hook's route
// label and counts (plugins/metrics.ts), the signature-verification timing and histogram, the
// upstream timing and histogram, and the cache counters. Run it with
//   node --import tsx bench/metrics-overhead.ts
// It prints nanoseconds per request (median of rounds); no server, no network.
import type { FastifyRequest } from 'fastify'
import { route } from '../gateway/src/proxy/route.js'
import { createGatewayMetrics } from '../gateway/src/metrics/metrics.js'
import { routeLabel } from '../gateway/src/http/plugins/metrics.js'

const REQUESTS = 1_000_000
const ROUNDS = 7
const STATUSES = [200, 200, 200, 201, 401, 404]
const REASONS = ['ok', 'ok', 'ok', 'ok', 'INVALID_SIGNATURE', 'MISSING_TOKEN']

const routes = [
  route({ prefix: '/v1/clients/', upstream: 'http://127.0.0.1:1', auth: 'signed' }, { bodyLimit: 1024, timeoutMs: 1000 }),
  route({ prefix: '/v1/transactions/', upstream: 'http://127.0.0.1:1', auth: 'signed' }, { bodyLimit: 1024, timeoutMs: 1000 })
]
const stats = { hits: 0, misses: 0 }
const metrics = createGatewayMetrics({ keys: { stats }, tokens: { stats }, store: { errors: 0 } })
/** what the hook reads of a request: its forward state, its Fastify route, method, auth outcome */
const requests = routes.flatMap((r) => ['GET', 'POST'].map((method) => ({
  forward: { route: r },
  routeOptions: { url: '/*', config: {} },
  method,
  authenticated: true,
  denialReason: null
}) as unknown as FastifyRequest))

/** everything the metrics do for one signed, forwarded request */
function oneRequest (i: number): void {
  const request = requests[i % requests.length] as FastifyRequest
  const state = request.forward as NonNullable<FastifyRequest['forward']>
  // signature stage: time the RSA verification
  const verifyStarted = performance.now()
  metrics.observeSignatureVerification((performance.now() - verifyStarted) / 1000)
  // key and token caches
  stats.hits++
  stats.hits++
  // proxy: request sent, response headers back
  const sentAt = performance.now()
  metrics.observeUpstreamLatency(state.route, (performance.now() - sentAt) / 1000)
  // onResponse
  const label = routeLabel(request)
  metrics.countRequest(label, request.method, STATUSES[i % STATUSES.length] as number)
  metrics.countAuthOutcome(label, REASONS[i % REASONS.length] as string)
}

function round (): number {
  const started = process.hrtime.bigint()
  for (let i = 0; i < REQUESTS; i++) oneRequest(i)
  return Number(process.hrtime.bigint() - started) / REQUESTS
}

round() // warm-up: let V8 optimise
const rounds = Array.from({ length: ROUNDS }, round).sort((a, b) => a - b)
const median = rounds[Math.floor(ROUNDS / 2)] ?? Number.NaN
const { body } = await metrics.scrape()
process.stdout.write(`metrics cost per request: ${median.toFixed(0)} ns median of ${ROUNDS} rounds of ${REQUESTS.toLocaleString('en')} ` +
  `(min ${rounds[0]?.toFixed(0)} ns, max ${rounds[ROUNDS - 1]?.toFixed(0)} ns); a scrape of it is ${body.length} bytes\n`)
