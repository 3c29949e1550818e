// One exposition for a cluster's workers. Each worker sends the primary its registry as data
// (Registry.getMetricsAsJSON), and prom-client's AggregatorRegistry adds them up series by series:
// counters and histogram buckets are summed, so the totals are exact; process metrics go by the
// aggregator prom-client gives each (summed, averaged, the first, or left out).
import { AggregatorRegistry, type Registry } from 'prom-client'

/** one registry's metrics as data: what a worker sends the primary */
export type MetricsSnapshot = Awaited<ReturnType<Registry['getMetricsAsJSON']>>

/** the exposition text of these registries added up, and its content type */
export async function aggregateMetrics (snapshots: MetricsSnapshot[]): Promise<{ contentType: string; body: string }> {
  const registry = AggregatorRegistry.aggregate(snapshots)
  return { contentType: registry.contentType, body: await registry.metrics() }
}
