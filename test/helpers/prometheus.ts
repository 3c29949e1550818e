// The Prometheus text format as a scraper reads it, strictly: every sample under the # TYPE of
// its family, each family in one block, no series twice, and every histogram's buckets
// cumulative with +Inf equal to its _count. Anything else throws, naming the line. OpenMetrics
// (parseOpenMetrics) likewise, with its own rules: # EOF last, no blank line, a counter's sample
// named <family>_total, and exemplars only on counters' totals and histograms' buckets.

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
  /** OpenMetrics only: the sample's exemplar */
  exemplar?: { labels: Record<string, string>; value: number; timestamp?: number }
}

/** a sample value or an `le`: Go's float syntax, with +Inf and -Inf */
function toNumber (text: string): number {
  return text === '+Inf' ? Infinity : text === '-Inf' ? -Infinity : Number(text)
}

const SUFFIXES: Record<string, string[]> = { histogram: ['_bucket', '_sum', '_count'], summary: ['', '_sum', '_count'] }

function seriesKey (name: string, labels: Record<string, string>, without?: string): string {
  const pairs = Object.entries(labels).filter(([k]) => k !== without).sort(([a], [b]) => a.localeCompare(b))
  return `${name}${JSON.stringify(pairs)}`
}

const LABELS = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g
function labelsOf (text: string): Record<string, string> {
  const labels: Record<string, string> = {}
  for (const pair of text.matchAll(LABELS)) labels[pair[1] as string] = pair[2] as string
  return labels
}

const OPENMETRICS_SUFFIXES: Record<string, string[]> = {
  counter: ['_total', '_created'],
  histogram: ['_bucket', '_sum', '_count', '_created'],
  summary: ['', '_sum', '_count', '_created'],
  gauge: [''],
  unknown: [''],
  info: ['_info']
}

export function parseOpenMetrics (text: string): Sample[] {
  if (!text.endsWith('# EOF\n') && !text.endsWith('# EOF')) throw new Error('no # EOF at the end')
  const lines = text.replace(/\n$/, '').split('\n')
  lines.pop()
  const samples: Sample[] = []
  const seen = new Set<string>()
  const closed = new Set<string>()
  let family: { name: string; type: string } | undefined
  for (const line of lines) {
    if (line === '') throw new Error('a blank line')
    if (line.startsWith('# HELP ') || line.startsWith('# UNIT ')) continue
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|gaugehistogram|stateset|info|summary|unknown)$/.exec(line)
    if (type !== null) {
      if (family !== undefined) closed.add(family.name)
      if (closed.has(type[1] as string)) throw new Error(`family ${type[1]} declared twice`)
      family = { name: type[1] as string, type: type[2] as string }
      continue
    }
    if (line.startsWith('#')) throw new Error(`not a HELP, UNIT or TYPE line: ${line}`)
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*?)\})? (\S+)(?: (\S+))?(?: # \{(.*)\} (\S+)(?: (\S+))?)?$/.exec(line)
    if (match === null) throw new Error(`not a sample line: ${line}`)
    const current = family
    const sample = sampleOf(line, match, current, OPENMETRICS_SUFFIXES[current?.type ?? ''] ?? [], seen)
    const name = sample.name
    if (match[5] !== undefined) {
      // sampleOf threw if the sample has no family
      const type = current?.type
      const carries = type === 'histogram' ? name.endsWith('_bucket') : type === 'counter' && name.endsWith('_total')
      if (!carries) throw new Error(`an exemplar on neither a bucket nor a total: ${line}`)
      const exemplarLabels = labelsOf(match[5])
      const length = Object.entries(exemplarLabels).reduce((n, [k, v]) => n + k.length + v.length, 0)
      if (length > 128) throw new Error(`an exemplar's labels over 128 characters: ${line}`)
      const exemplarValue = Number(match[6])
      const timestamp = match[7] === undefined ? undefined : Number(match[7])
      if (Number.isNaN(exemplarValue) || Number.isNaN(timestamp)) throw new Error(`an exemplar's value or timestamp is not a number: ${line}`)
      sample.exemplar = { labels: exemplarLabels, value: exemplarValue, ...(timestamp !== undefined && { timestamp }) }
    }
    samples.push(sample)
  }
  checkHistograms(samples)
  return samples
}

/**
 * A sample line's name, labels and value (`match`: name, labels, value), in the block of its
 * family (its name plus one of `suffixes`), and not a series seen before (added to `seen`).
 */
function sampleOf (line: string, match: RegExpExecArray, family: { name: string } | undefined, suffixes: readonly string[], seen: Set<string>): Sample {
  const name = match[1] as string
  if (family === undefined || !suffixes.some((suffix) => name === family.name + suffix)) {
    throw new Error(`sample outside the block of its family (${family?.name ?? 'none'}): ${line}`)
  }
  const labels = labelsOf(match[2] ?? '')
  const value = toNumber(match[3] as string)
  if (Number.isNaN(value) && match[3] !== 'NaN') throw new Error(`not a number: ${line}`)
  const key = seriesKey(name, labels)
  if (seen.has(key)) throw new Error(`the same series twice: ${line}`)
  seen.add(key)
  return { name, labels, value }
}

export function parse (text: string): Sample[] {
  const samples: Sample[] = []
  const seen = new Set<string>()
  const closed = new Set<string>()
  let family: { name: string; type: string } | undefined
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ')) continue
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line)
    if (type !== null) {
      if (family !== undefined) closed.add(family.name)
      if (closed.has(type[1] as string)) throw new Error(`family ${type[1]} declared twice`)
      family = { name: type[1] as string, type: type[2] as string }
      continue
    }
    if (line.startsWith('#')) throw new Error(`not a HELP or TYPE line: ${line}`)
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) throw new Error(`not a sample line: ${line}`)
    samples.push(sampleOf(line, match, family, SUFFIXES[family?.type ?? ''] ?? [''], seen))
  }
  checkHistograms(samples)
  return samples
}

/** each histogram series: buckets never decrease, and the +Inf bucket is its _count */
function checkHistograms (samples: Sample[]): void {
  const buckets = new Map<string, Sample[]>()
  for (const sample of samples.filter((s) => s.name.endsWith('_bucket'))) {
    const key = seriesKey(sample.name.slice(0, -'_bucket'.length), sample.labels, 'le')
    buckets.set(key, [...buckets.get(key) ?? [], sample])
  }
  for (const [key, series] of buckets) {
    const sorted = [...series].sort((a, b) => toNumber(a.labels.le ?? '') - toNumber(b.labels.le ?? ''))
    sorted.forEach((bucket, i) => {
      if (i > 0 && bucket.value < (sorted[i - 1] as Sample).value) throw new Error(`${key}: the bucket le=${bucket.labels.le} is below the one before it`)
    })
    const last = sorted.at(-1) as Sample
    const name = last.name.slice(0, -'_bucket'.length)
    const count = samples.find((s) => s.name === `${name}_count` && seriesKey(name, s.labels) === seriesKey(name, last.labels, 'le'))
    if (last.labels.le !== '+Inf' || count?.value !== last.value) throw new Error(`${key}: the +Inf bucket is not the _count`)
  }
}

/** the value of the one sample with this name and these labels (0 when there is none) */
export function value (samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`)
  return found[0]?.value ?? 0
}
