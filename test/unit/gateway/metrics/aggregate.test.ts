// A cluster's metrics added up: two workers' registries, sent as data the way the IPC channel
// carries them (JSON), aggregate to exactly what one registry that saw every observation shows.
import t from 'tap'
import { Histogram } from 'prom-client'
import { aggregateMetrics, type MetricsSnapshot } from '../../../../gateway/src/metrics/aggregate.js'
import { createClusterMetrics, createGatewayMetrics, type GatewayMetrics } from '../../../../gateway/src/metrics/metrics.js'
import { parse, parseOpenMetrics, type Sample } from '../../../helpers/prometheus.js'

interface Counted { keys: { stats: { hits: number; misses: number } }; tokens: { stats: { hits: number; misses: number } }; store: { errors: number } }

function gatewayMetrics (): { metrics: GatewayMetrics; sources: Counted } {
  const sources: Counted = { keys: { stats: { hits: 0, misses: 0 } }, tokens: { stats: { hits: 0, misses: 0 } }, store: { errors: 0 } }
  return { metrics: createGatewayMetrics(sources), sources }
}

const clients = { name: '/v1/clients/' }
const orders = { name: 'orders' }

/** what happened at one worker; `all` sees it too. Latencies are powers of two, so sums are exact in any order. */
function traffic (at: ReturnType<typeof gatewayMetrics>, all: ReturnType<typeof gatewayMetrics>, share: number): void {
  for (const { metrics, sources } of [at, all]) {
    for (let i = 0; i < 10 * share; i++) {
      metrics.countRequest('/v1/clients/', 'GET', 200)
      metrics.countAuthOutcome('/v1/clients/', 'ok')
      metrics.observeSignatureVerification(2 ** -(12 + (i % 4)))
      metrics.observeUpstreamLatency(clients, 2 ** -(i % 9))
    }
    metrics.countRequest('/v1/clients/', 'GET', 401)
    metrics.countAuthOutcome('/v1/clients/', 'INVALID_SIGNATURE')
    sources.keys.stats.hits += 3 * share
    sources.tokens.stats.misses += share
    sources.store.errors += share
  }
}

const sorted = (samples: Sample[]): Sample[] => [...samples].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))
const snapshot = async (metrics: GatewayMetrics): Promise<MetricsSnapshot> =>
  JSON.parse(JSON.stringify(await metrics.registry.getMetricsAsJSON())) as MetricsSnapshot

t.test('two workers\' registries add up to one that saw everything', async (t) => {
  const [a, b, all] = [gatewayMetrics(), gatewayMetrics(), gatewayMetrics()]
  traffic(a, all, 1)
  traffic(b, all, 2)
  // a series only one worker has: an orders request that only b forwarded
  for (const { metrics } of [b, all]) {
    metrics.countRequest('orders', 'POST', 201)
    metrics.observeUpstreamLatency(orders, 0.5)
  }

  const { contentType, body } = await aggregateMetrics([await snapshot(a.metrics), await snapshot(b.metrics)])
  t.match(contentType, /^text\/plain; version=0\.0\.4/)
  const expected = parse((await all.metrics.scrape()).body)
  const aggregated = parse(body)
  t.same(sorted(aggregated), sorted(expected), 'every series, bucket, sum and count the same')
  const ordersBuckets = aggregated.filter((s) => s.name === 'keygate_upstream_latency_seconds_bucket' && s.labels.route === 'orders')
  t.ok(ordersBuckets.length > 0 && ordersBuckets.at(-1)?.value === 1, 'the one-worker series is there')
  t.ok(aggregated.some((s) => s.name === 'keygate_http_requests_total' && s.labels.status === '200' && s.value === 30), '10 and 20 requests: 30')
})

t.test('OpenMetrics: the same totals, and each bucket\'s latest exemplar of any worker', async (t) => {
  const [a, b] = [gatewayMetrics(), gatewayMetrics()]
  traffic(a, gatewayMetrics(), 1)
  traffic(b, gatewayMetrics(), 2)
  // prom-client's own histograms (the GC's) too: their buckets' exemplar is null
  for (const { metrics } of [a, b]) metrics.includeProcessMetrics()
  new Histogram({ name: 'keygate_test_seconds', help: 'a prom-client histogram', registers: [a.metrics.registry] }).observe(0.5)
  b.metrics.observeUpstreamLatency(clients, 0.003, 'b'.repeat(32))
  b.metrics.observeUpstreamLatency(clients, 0.02, 'c'.repeat(32))
  // a's exemplar in the same bucket as b's first, a millisecond later (exemplars are timestamped to the millisecond)
  const now = Date.now()
  while (Date.now() === now);
  a.metrics.observeUpstreamLatency(clients, 0.004, 'a'.repeat(32))
  const snapshots = [await snapshot(a.metrics), await snapshot(b.metrics)]
  const { contentType, body } = await aggregateMetrics(snapshots, true)
  t.match(contentType, /^application\/openmetrics-text; version=1\.0\.0/)
  const samples = parseOpenMetrics(body)
  const classic = parse((await aggregateMetrics(snapshots)).body)
  // OpenMetrics names a counter's family without _total, and keeps _total on its samples
  t.same(sorted(samples.map(({ exemplar: _, ...sample }) => sample)), sorted(classic), 'the same series and values as the classic text')
  const exemplars = samples.filter((s) => s.exemplar !== undefined).map((s) => [s.labels.le, s.exemplar?.labels, s.exemplar?.value])
  t.same(exemplars, [['0.005', { trace_id: 'a'.repeat(32) }, 0.004], ['0.025', { trace_id: 'c'.repeat(32) }, 0.02]])
  t.match(body, /^# TYPE keygate_http_requests counter$/m)
  t.notMatch((await aggregateMetrics(snapshots)).body, / # \{/, 'no exemplar in the classic text')
})

t.test('no worker to ask: an empty exposition', async (t) => {
  t.same(parse((await aggregateMetrics([])).body), [])
})

t.test('the primary\'s count of worker restarts, served with the workers\' series, as it is at each scrape', async (t) => {
  const worker = gatewayMetrics()
  worker.metrics.countRequest('/v1/clients/', 'GET', 200)
  const cluster = { restarts: 0 }
  const primary = createClusterMetrics(cluster)
  const scrape = async (): Promise<Sample[]> => parse((await aggregateMetrics([await snapshot(worker.metrics), await primary.getMetricsAsJSON()])).body)
  t.same((await scrape()).filter((s) => s.name === 'keygate_worker_restarts_total'), [{ name: 'keygate_worker_restarts_total', labels: {}, value: 0 }])
  cluster.restarts = 2
  const samples = await scrape()
  t.same(samples.filter((s) => s.name === 'keygate_worker_restarts_total').map((s) => s.value), [2])
  t.ok(samples.some((s) => s.name === 'keygate_http_requests_total' && s.value === 1), 'beside the workers\' series')
})
