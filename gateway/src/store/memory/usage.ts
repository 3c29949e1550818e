// Usage analytics' buckets in one process (analytics/ names them and says how long each is kept).
// `sweep`: the store's timer drops the expired ones.
import type { UsageStore } from '../types.js'

export function memoryUsage (now: () => number): UsageStore & { sweep: (t: number) => void } {
  /** field -> count, and when the bucket expires */
  const usage = new Map<string, { expiresAt: number; counts: Map<string, number> }>()
  return {
    sweep: (t) => {
      for (const [name, bucket] of usage) if (bucket.expiresAt <= t) usage.delete(name)
    },
    async addUsageCounts (buckets) {
      const t = now()
      for (const { name, ttlSeconds, counts } of buckets) {
        let bucket = usage.get(name)
        if (bucket === undefined || bucket.expiresAt <= t) usage.set(name, bucket = { expiresAt: 0, counts: new Map() })
        bucket.expiresAt = t + ttlSeconds * 1000
        for (const [field, n] of counts) bucket.counts.set(field, (bucket.counts.get(field) ?? 0) + n)
      }
    },
    async readUsageCounts (names) {
      const t = now()
      return names.map((name) => {
        const bucket = usage.get(name)
        return bucket === undefined || bucket.expiresAt <= t ? new Map() : new Map(bucket.counts)
      })
    }
  }
}
