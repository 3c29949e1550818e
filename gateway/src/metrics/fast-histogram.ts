// A prom-client Histogram whose observations cost a few nanoseconds. prom-client's own observe
// builds a label string and looks it up for every observation (about 1 us with one label, on the
// hot path of every request); here a caller holds a Series (one per label value, made once) and
// an observation is a bucket scan and two additions. The registry reads the series through get(),
// which returns what prom-client's histograms return, so the exposition is the library's own.
// An observation may carry an exemplar (a sampled request's trace id): the latest per bucket is
// kept, as prom-client's own histograms keep it, and shown only in the OpenMetrics exposition.
import { Histogram, type HistogramConfiguration, type MetricType } from 'prom-client'

/** One label set's buckets: counts per bucket (not cumulative), the last for values above every bound. */
export interface Series {
  readonly labels: Readonly<Record<string, string>>
  readonly counts: Float64Array
  sum: number
  count: number
  /** the latest exemplar of each bucket (same indices as counts), made on the first one */
  exemplars?: Array<Exemplar | undefined>
}

/** prom-client's shape of an exemplar: its labels, the observed value, when (seconds since the epoch) */
export interface Exemplar {
  labelSet: Record<string, string>
  value: number
  timestamp: number
}

type HistogramValues = Awaited<ReturnType<Histogram['get']>>
/** prom-client's typings declare a numeric enum; at run time a metric's type is this string */
const HISTOGRAM_TYPE = 'histogram' as unknown as MetricType

export class FastHistogram extends Histogram {
  readonly #name: string
  readonly #help: string
  readonly #bounds: readonly number[]
  // not a #private field: the base constructor calls reset() before this class's fields exist
  private readonly bySeriesKey: Map<string, Series> = new Map()

  constructor (configuration: HistogramConfiguration<string> & { buckets: number[] }) {
    super(configuration)
    this.#name = configuration.name
    this.#help = configuration.help
    this.#bounds = [...configuration.buckets].sort((a, b) => a - b)
  }

  /** The series of these label values, created on first use: keep it, and observe into it. */
  series (labels: Readonly<Record<string, string>> = {}): Series {
    const key = JSON.stringify(labels)
    let series = this.bySeriesKey.get(key)
    if (series === undefined) {
      series = { labels: { ...labels }, counts: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 }
      this.bySeriesKey.set(key, series)
    }
    return series
  }

  /** one observation: a value of at most a bucket's bound counts in it (prom-client's `le`); returns the bucket's index */
  record (series: Series, value: number): number {
    const bounds = this.#bounds
    let i = 0
    while (i < bounds.length && value > (bounds[i] as number)) i++
    series.counts[i] = (series.counts[i] ?? 0) + 1
    series.sum += value
    series.count++
    return i
  }

  /** one observation, and its bucket's exemplar replaced by this one */
  recordExemplar (series: Series, value: number, labelSet: Record<string, string>): void {
    const i = this.record(series, value)
    const exemplars = series.exemplars ??= new Array<Exemplar | undefined>(series.counts.length)
    exemplars[i] = { labelSet, value, timestamp: Date.now() / 1000 }
  }

  /** empties every series in place: callers keep the series they hold */
  override reset (): void {
    // undefined while the base constructor runs (see bySeriesKey)
    for (const series of (this.bySeriesKey as Map<string, Series> | undefined)?.values() ?? []) {
      series.counts.fill(0)
      series.sum = 0
      series.count = 0
      delete series.exemplars
    }
  }

  override async get (): Promise<HistogramValues> {
    const values: HistogramValues['values'] = []
    const bucketName = `${this.#name}_bucket`
    for (const series of this.bySeriesKey.values()) {
      const exemplars = series.exemplars
      // prom-client's typings have no exemplar; its exposition reads one on a bucket's value (OpenMetrics only)
      const bucket = (le: number | string, value: number, i: number): void => {
        const exemplar = exemplars?.[i]
        values.push({ labels: { ...series.labels, le }, value, metricName: bucketName, ...(exemplar !== undefined && { exemplar: { ...exemplar } }) })
      }
      let cumulative = 0
      this.#bounds.forEach((bound, i) => {
        cumulative += series.counts[i] ?? 0
        bucket(bound, cumulative, i)
      })
      bucket('+Inf', series.count, this.#bounds.length)
      values.push({ labels: { ...series.labels }, value: series.sum, metricName: `${this.#name}_sum` })
      values.push({ labels: { ...series.labels }, value: series.count, metricName: `${this.#name}_count` })
    }
    return { name: this.#name, help: this.#help, type: HISTOGRAM_TYPE, values, aggregator: 'sum', collect: () => {} }
  }

  /** the registry prefers this to get() when a metric has it, as prom-client's Histogram does */
  async getForPromString (): Promise<HistogramValues> {
    return await this.get()
  }
}
