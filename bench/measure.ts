// One measurement: one autocannon run of warm-up + duration seconds on `connections` keep-alive
// connections; after the warm-up, every response's status and latency, the responses completed in
// each second, and the CPU time the measured processes spent meanwhile.
import autocannon from 'autocannon'
import type { EventEmitter } from 'node:events'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'

export const PERCENTILES = [0, 10, 25, 50, 75, 90, 95, 99, 99.9, 100] as const
export type LatencyPercentiles = Record<string, number>

export interface Measurement {
  /** completed responses in the measured window */
  requests: number
  seconds: number
  rps: number
  /** latency in ms at PERCENTILES, keyed p0 (min) ... p100 (max) */
  latency: LatencyPercentiles
  /** responses by HTTP status */
  statuses: Record<string, number>
  /** refusals (4xx/5xx) by status and problem+json `code`, e.g. "401 INVALID_SIGNATURE" */
  codes: Record<string, number>
  /** connection errors and timeouts, not HTTP statuses */
  socketErrors: number
  timeouts: number
  /** completed responses in each second of the measurement */
  perSecond: number[]
  /** µs of CPU per completed request: the process the load goes to, and the upstream behind it */
  cpuPerRequestUs: number | null
  upstreamCpuPerRequestUs: number | null
  /** µs of Redis CPU per completed request (INFO cpu), for a gateway on Redis */
  redisCpuPerRequestUs: number | null
  /** µs of nginx's CPU per completed request, where nginx is in front of the process under load (--scenario decision, h) */
  nginxCpuPerRequestUs: number | null
  /** the load generator's own CPU, percent of one core (near 100: the generator may be the limit) */
  generatorCpuPercent: number
  /**
   * CPU the rest of the machine used meanwhile (other programs, idle bench processes), in
   * percent of one core, from /proc/stat; null where there is none. High: the figures are noisy.
   */
  otherCpuPercent: number | null
}

export interface MeasureOptions {
  url: string
  connections: number
  /** a fixed total rate, requests/s; undefined: as fast as the connections go */
  rate?: number | undefined
  duration: number
  warmup: number
  /** the request list (autocannon keeps state on the objects: build a fresh one for each call) */
  requests: () => autocannon.Request[]
  /** CPU time so far of the process under load and of the upstream (µs), when known */
  cpu: { proxy?: () => Promise<number>; upstream?: () => Promise<number>; redis?: () => Promise<number>; nginx?: () => Promise<number> }
  onSecond?: (second: number, count: number) => void
  /** called when the warm-up ends and the measurement begins */
  onMeasuring?: () => void
}

interface RunOutput {
  latencies: Float64Array
  count: number
  statuses: Record<string, number>
  codes: Record<string, number>
  socketErrors: number
  timeouts: number
  seconds: number
  perSecond: number[]
}

/**
 * One autocannon run of warm-up + duration seconds on the same connections; only what happens
 * after the warm-up counts. (A fresh run for the measurement would put its own start, the load
 * generator building its clients and every connection being accepted, into the measured latency.)
 * `onMeasuring` is called when the warm-up ends, to sample CPU times.
 */
async function drive (url: string, connections: number, rate: number | undefined, warmup: number, duration: number, requests: autocannon.Request[],
  onMeasuring: () => void, onSecond?: (second: number, count: number) => void): Promise<RunOutput> {
  let latencies = new Float64Array(1 << 16)
  let count = 0
  let socketErrors = 0
  let timeouts = 0
  const statuses: Record<string, number> = {}
  const codes: Record<string, number> = {}
  const perSecond: number[] = []
  // Each answer's body is read only to name a refusal by its problem+json code.
  const withCodes = requests.map((request) => ({
    ...request,
    onResponse: (status: number, body: string) => {
      if (!measuring || status < 400) return
      let code = ''
      try { code = String((JSON.parse(body) as { code?: unknown }).code ?? '') } catch {}
      const key = code === '' ? String(status) : `${status} ${code}`
      codes[key] = (codes[key] ?? 0) + 1
    }
  }))
  let measuring = false
  let from = 0
  let boundary: NodeJS.Timeout | undefined
  let ticker: NodeJS.Timeout | undefined
  const begin = (): void => {
    measuring = true
    from = performance.now()
    onMeasuring()
    ticker = setInterval(() => {
      const second = Math.floor((performance.now() - from) / 1000) - 1
      if (second >= 0 && second < duration) onSecond?.(second, perSecond[second] ?? 0)
    }, 1000)
  }
  if (warmup === 0) begin()
  await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({
      url, connections, duration: warmup + duration, requests: withCodes, timeout: 30, ...(rate !== undefined && { overallRate: rate })
    }, (err, res) => {
      clearTimeout(boundary)
      clearInterval(ticker)
      if (err !== null && err !== undefined) reject(err instanceof Error ? err : new Error(String(err)))
      else resolve(res)
    })
    if (warmup > 0) boundary = setTimeout(begin, warmup * 1000)
    const events = instance as unknown as EventEmitter
    events.on('response', (_client: unknown, status: number, _bytes: number, responseTime: number) => {
      if (!measuring) return
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2)
        grown.set(latencies)
        latencies = grown
      }
      latencies[count++] = responseTime
      statuses[status] = (statuses[status] ?? 0) + 1
      const second = Math.min(duration - 1, Math.floor((performance.now() - from) / 1000))
      while (perSecond.length <= second) perSecond.push(0)
      perSecond[second] = (perSecond[second] ?? 0) + 1
    })
    events.on('reqError', (err: Error) => {
      if (!measuring) return
      if (err.message === 'request timed out') timeouts++
      else socketErrors++
    })
  })
  const seconds = (performance.now() - from) / 1000
  while (perSecond.length < duration) perSecond.push(0)
  return { latencies: latencies.subarray(0, count), count, statuses, codes, socketErrors, timeouts, seconds, perSecond }
}

export function percentiles (values: Float64Array): LatencyPercentiles {
  const sorted = Float64Array.from(values).sort()
  const out: LatencyPercentiles = {}
  for (const p of PERCENTILES) {
    const index = sorted.length === 0 ? -1 : Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
    out[`p${p}`] = index < 0 ? 0 : round(sorted[index] as number, 3)
  }
  return out
}

const round = (value: number, digits: number): number => Math.round(value * 10 ** digits) / 10 ** digits

/** CPU time the whole machine has spent busy, µs (Linux /proc/stat), or undefined. */
function machineBusyMicros (): number | undefined {
  try {
    const line = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0] ?? ''
    const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number)
    const busy = [user, nice, system, irq, softirq, steal].reduce<number>((sum, v) => sum + (v ?? 0), 0)
    // USER_HZ is 100 on every Linux Node runs on
    return line.startsWith('cpu ') ? busy * 10_000 : undefined
  } catch {
    return undefined
  }
}

export async function measure (options: MeasureOptions): Promise<Measurement> {
  const sample = async (): Promise<Array<number | undefined>> =>
    await Promise.all([options.cpu.proxy?.(), options.cpu.upstream?.(), options.cpu.redis?.(), options.cpu.nginx?.()])
  let before: Promise<Array<number | undefined>> = Promise.resolve([])
  let generatorBefore = process.cpuUsage()
  let machineBefore: number | undefined
  const run = await drive(options.url, options.connections, options.rate, options.warmup, options.duration, options.requests(), () => {
    before = sample()
    generatorBefore = process.cpuUsage()
    machineBefore = machineBusyMicros()
    options.onMeasuring?.()
  }, options.onSecond)
  const generator = process.cpuUsage(generatorBefore)
  const machineAfter = machineBusyMicros()
  const [proxyAfter, upstreamAfter, redisAfter, nginxAfter] = await sample()
  const [proxyBefore, upstreamBefore, redisBefore, nginxBefore] = await before

  const delta = (b: number | undefined, a: number | undefined): number => a === undefined || b === undefined ? 0 : a - b
  const ours = generator.user + generator.system + delta(proxyBefore, proxyAfter) + delta(upstreamBefore, upstreamAfter) + delta(redisBefore, redisAfter) +
    delta(nginxBefore, nginxAfter)
  const other = machineBefore === undefined || machineAfter === undefined ? null : Math.max(0, machineAfter - machineBefore - ours)
  const perRequest = (b: number | undefined, a: number | undefined): number | null =>
    b === undefined || a === undefined || run.count === 0 ? null : round((a - b) / run.count, 1)
  return {
    requests: run.count,
    seconds: round(run.seconds, 3),
    rps: round(run.count / run.seconds, 1),
    latency: percentiles(run.latencies),
    statuses: run.statuses,
    codes: run.codes,
    socketErrors: run.socketErrors,
    timeouts: run.timeouts,
    perSecond: run.perSecond,
    cpuPerRequestUs: perRequest(proxyBefore, proxyAfter),
    upstreamCpuPerRequestUs: perRequest(upstreamBefore, upstreamAfter),
    redisCpuPerRequestUs: perRequest(redisBefore, redisAfter),
    nginxCpuPerRequestUs: perRequest(nginxBefore, nginxAfter),
    generatorCpuPercent: round(((generator.user + generator.system) / 1e6 / run.seconds) * 100, 1),
    otherCpuPercent: other === null ? null : round((other / 1e6 / run.seconds) * 100, 1)
  }
}
