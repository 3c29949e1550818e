// One exposition for a cluster's workers. Each worker sends the primary its registry as data
// (Registry.getMetricsAsJSON), and prom-client's AggregatorRegistry adds them up series by series:
// counters and histogram buckets are summed, so the totals are exact; process metrics go by the
// aggregator prom-client gives each (summed, averaged, the first, or left out). In OpenMetrics, a
// bucket's exemplar is the latest any worker has.
import { AggregatorRegistry, type Registry } from 'prom-client'
import { OPENMETRICS_CONTENT_TYPE, openMetricsText, withLatestExemplars } from './openmetrics.js'

/** one registry's metrics as data: what a worker sends the primary */
export type MetricsSnapshot = Awaited<ReturnType<Registry['getMetricsAsJSON']>>

/** the exposition text of these registries added up (OpenMetrics, or the classic text), and its content type */
export async function aggregateMetrics (snapshots: MetricsSnapshot[], openMetrics = false): Promise<{ contentType: string; body: string }> {
  const registry = AggregatorRegistry.aggregate(snapshots)
  if (!openMetrics) return { contentType: registry.contentType, body: await registry.metrics() }
  return { contentType: OPENMETRICS_CONTENT_TYPE, body: await openMetricsText(withLatestExemplars(await registry.getMetricsAsJSON(), snapshots)) }
}
