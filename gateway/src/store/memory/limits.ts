// Counters in one process: fixed windows (hit, resetHits) and rate limits (countRate, peekRate),
// the same steps as the Redis store's scripts (redis/limits.ts). `sweep`: the store's timer drops
// the expired ones.
import { RATE_SLACK_MS, type LimitStore, type RateCounter, type RateOutcome } from '../types.js'

export function memoryLimits (now: () => number): LimitStore & { sweep: (t: number) => void } {
  const counters = new Map<string, { count: number; expiresAt: number }>()
  /** rate counter key -> the ms from which it is back to its full limit (types.ts: RateCounter) */
  const rates = new Map<string, number>()
  /** The same steps as the Redis script, with no await between the check and the count. */
  const rate = (rateCounters: readonly RateCounter[], count: boolean): RateOutcome => {
    const t = now()
    let allowed = true
    const backlogMs = rateCounters.map(({ key, limit, windowMs }) => {
      const backlog = Math.max(0, (rates.get(key) ?? 0) - t)
      if (backlog + windowMs / limit > windowMs + RATE_SLACK_MS) allowed = false
      return backlog
    })
    if (count && allowed) {
      rateCounters.forEach(({ key, limit, windowMs }, i) => {
        const backlog = (backlogMs[i] as number) + windowMs / limit
        backlogMs[i] = backlog
        rates.set(key, t + backlog)
      })
    }
    return { allowed, backlogMs }
  }
  return {
    sweep: (t) => {
      for (const [key, counter] of counters) if (counter.expiresAt <= t) counters.delete(key)
      for (const [key, fullAt] of rates) if (fullAt <= t) rates.delete(key)
    },
    async hit (key, windowMs) {
      const t = now()
      let counter = counters.get(key)
      if (counter === undefined || counter.expiresAt <= t) {
        counter = { count: 0, expiresAt: t + windowMs }
        counters.set(key, counter)
      }
      counter.count++
      return { count: counter.count, resetMs: counter.expiresAt - t }
    },
    async resetHits (key) {
      counters.delete(key)
    },
    async countRate (rateCounters) {
      return rate(rateCounters, true)
    },
    async peekRate (rateCounters) {
      return rate(rateCounters, false)
    }
  }
}
