// Usage analytics, the counting side: every answered business request is one more in a Map held
// in process, keyed by its dimensions (buckets.ts); nothing is written per request. Every flush
// (KEYGATE_USAGE_FLUSH_MS, and on close) adds what was counted to the store's minute and hour
// buckets in one batch, so every gateway on a Redis adds to the same counts.
import type { Store, UsageBucketWrite } from '../store/index.js'
import { bucketName, bucketStart, bucketTtlSeconds, encodeField, NONE, OTHER, RESOLUTIONS, statusClass } from './buckets.js'

export interface UsageCounterOptions {
  store: Pick<Store, 'addUsageCounts'>
  flushMs: number
  /** distinct (key, user, route, outcome, agent) per flush interval; past it, requests count as `other` */
  maxSeries: number
  now?: () => number
  /** a flush the store refused: its counts are lost */
  onFlushError?: (err: unknown, requests: number) => void
  /** requests of this flush interval counted as `other` for the bound */
  onOverflow?: (requests: number) => void
}

export interface UsageStats {
  /** requests counted as `other` because the bound was reached, since start */
  readonly overflowed: number
  /** flushes the store refused, since start */
  readonly flushFailures: number
}

export interface UsageCounter {
  readonly stats: UsageStats
  /** one answered request; `code` is keygate's error code when it refused it, else NONE; `agent` its signed agent's origin, else NONE (buckets.ts) */
  count: (key: string, user: string, route: string, status: number, code: string, agent?: string, mcp?: McpCallLabels) => void
  /** writes what was counted so far; resolves when the store has it (or refused it) */
  flush: () => Promise<void>
  /** a last flush, and no more */
  close: () => Promise<void>
}

/** an MCP route's request: its JSON-RPC method and tool, as labels (mcp-calls/labels.ts) */
export interface McpCallLabels { method: string; tool?: string | undefined }

interface MinuteCounts { start: number; counts: Map<string, number> }

export function createUsageCounter (options: UsageCounterOptions): UsageCounter {
  const { store, maxSeries } = options
  const now = options.now ?? Date.now
  const minuteMs = RESOLUTIONS.minute.ms
  let currentStart = 0
  let current = new Map<string, number>()
  /** minutes that ended since the last flush */
  let ended: MinuteCounts[] = []
  /** distinct fields counted since the last flush (a minute's end starts a new Map, not a new bound) */
  let seriesNow = 0
  let overflowNow = 0
  const stats = { overflowed: 0, flushFailures: 0 }
  let flushing: Promise<void> = Promise.resolve()

  const count = (key: string, user: string, route: string, status: number, code: string, agent?: string, mcp?: McpCallLabels): void => {
    const at = now()
    const start = at - (at % minuteMs)
    if (start !== currentStart) {
      if (current.size > 0) ended.push({ start: currentStart, counts: current })
      current = new Map()
      currentStart = start
    }
    const cls = statusClass(status)
    let field = encodeField(key, user, route, cls, code, agent, mcp?.method, mcp?.tool)
    let value = current.get(field)
    if (value === undefined) {
      if (seriesNow >= maxSeries) {
        field = encodeField(OTHER, OTHER, OTHER, cls, code, agent === undefined || agent === NONE ? NONE : OTHER,
          mcp === undefined ? NONE : OTHER, mcp?.tool === undefined ? NONE : OTHER)
        value = current.get(field)
        overflowNow++
        stats.overflowed++
      } else {
        seriesNow++
      }
    }
    current.set(field, (value ?? 0) + 1)
  }

  const writeOut = async (): Promise<void> => {
    const minutes = ended
    if (current.size > 0) minutes.push({ start: currentStart, counts: current })
    ended = []
    current = new Map()
    seriesNow = 0
    if (overflowNow > 0) {
      options.onOverflow?.(overflowNow)
      overflowNow = 0
    }
    if (minutes.length === 0) return
    const at = now()
    const writes: UsageBucketWrite[] = []
    const hours = new Map<number, Map<string, number>>()
    let requests = 0
    for (const { start, counts } of minutes) {
      writes.push({ name: bucketName('minute', start), ttlSeconds: bucketTtlSeconds('minute', start, at), counts })
      const hourStart = bucketStart('hour', start)
      let hour = hours.get(hourStart)
      if (hour === undefined) hours.set(hourStart, hour = new Map())
      for (const [field, n] of counts) {
        hour.set(field, (hour.get(field) ?? 0) + n)
        requests += n
      }
    }
    for (const [start, counts] of hours) writes.push({ name: bucketName('hour', start), ttlSeconds: bucketTtlSeconds('hour', start, at), counts })
    try {
      await store.addUsageCounts(writes)
    } catch (err) {
      stats.flushFailures++
      options.onFlushError?.(err, requests)
    }
  }

  // one flush at a time, in order: a close waits for the one under way
  const flush = async (): Promise<void> => {
    flushing = flushing.then(writeOut)
    await flushing
  }
  const timer = setInterval(() => { void flush() }, options.flushMs)
  timer.unref()

  return {
    stats,
    count,
    flush,
    close: async () => {
      clearInterval(timer)
      await flush()
    }
  }
}
