// The OpenMetrics exposition (application/openmetrics-text; version=1.0.0), which a scraper gets
// when its Accept asks for it (http/metrics-server.ts): the same series as the classic text, and
// the latency histogram's exemplars (the trace id of a sampled request), which only it can carry.
// It is rendered from a snapshot (Registry.getMetricsAsJSON) by a throwaway registry: an OpenMetrics
// rendering of prom-client's live registry renames its counters in place (foo_total to foo), which
// would change the classic exposition of every later scrape.
import { Registry, type Metric } from 'prom-client'
import type { Exemplar } from './fast-histogram.js'

/** a registry's metrics as data (aggregate.ts's MetricsSnapshot) */
type MetricsSnapshot = Awaited<ReturnType<Registry['getMetricsAsJSON']>>

export const OPENMETRICS_CONTENT_TYPE = Registry.OPENMETRICS_CONTENT_TYPE

type SnapshotValue = MetricsSnapshot[number]['values'][number] & { metricName?: string; exemplar?: Exemplar | null }

/** the OpenMetrics text of these metrics (a counter's family is named without _total, its sample with it) */
export async function openMetricsText (metrics: MetricsSnapshot): Promise<string> {
  const registry = new Registry<typeof OPENMETRICS_CONTENT_TYPE>()
  registry.setContentType(OPENMETRICS_CONTENT_TYPE)
  for (const metric of metrics) {
    const name = (metric.type as unknown as string) === 'counter' ? metric.name.replace(/_total$/, '') : metric.name
    const rendered = { ...metric, name }
    registry.registerMetric({ name, type: metric.type, get: () => rendered } as unknown as Metric)
  }
  return await registry.metrics()
}

/** the series' key of a sample: its name and labels */
const keyOf = (metric: { name: string }, value: SnapshotValue): string => `${value.metricName ?? metric.name}${JSON.stringify(value.labels)}`

/** `merged` (several snapshots added up) with each bucket's latest exemplar among `snapshots` */
export function withLatestExemplars (merged: MetricsSnapshot, snapshots: MetricsSnapshot[]): MetricsSnapshot {
  const latest = new Map<string, Exemplar>()
  for (const snapshot of snapshots) {
    for (const metric of snapshot) {
      for (const value of metric.values as SnapshotValue[]) {
        const exemplar = value.exemplar
        if (exemplar == null) continue // prom-client's own histograms have null
        const key = keyOf(metric, value)
        if ((latest.get(key)?.timestamp ?? -Infinity) < exemplar.timestamp) latest.set(key, exemplar)
      }
    }
  }
  if (latest.size === 0) return merged
  return merged.map((metric) => ({
    ...metric,
    values: (metric.values as SnapshotValue[]).map((value) => {
      const exemplar = latest.get(keyOf(metric, value))
      return exemplar === undefined ? value : { ...value, exemplar }
    })
  }))
}
