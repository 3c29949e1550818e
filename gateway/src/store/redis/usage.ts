// Usage analytics' buckets on Redis (analytics/ names them and says how long each is kept): one
// hash per bucket, shared by every gateway on the store; each is one key, so one slot.
import type { UsageBucketWrite, UsageStore } from '../types.js'
import { results, type RedisStoreContext } from './context.js'

export function redisUsage ({ redis, names, cluster, guarded }: RedisStoreContext): UsageStore {
  return {
    addUsageCounts: async (buckets) => {
      if (buckets.length === 0) return
      await guarded(async () => {
        // a pipeline, not MULTI: nothing needs the batch whole, and Redis serves others between its commands.
        // In a cluster a pipeline must stay in one slot: one per bucket.
        const add = (pipeline: ReturnType<typeof redis.pipeline>, { name, ttlSeconds, counts }: UsageBucketWrite): void => {
          const key = names.usage(name)
          for (const [field, n] of counts) pipeline.hincrby(key, field, n)
          pipeline.expire(key, ttlSeconds)
        }
        if (!cluster) {
          const pipeline = redis.pipeline()
          for (const bucket of buckets) add(pipeline, bucket)
          results(await pipeline.exec())
          return
        }
        await Promise.all(buckets.map(async (bucket) => {
          const pipeline = redis.pipeline()
          add(pipeline, bucket)
          results(await pipeline.exec())
        }))
      })
    },
    readUsageCounts: async (bucketNames) => await guarded(async () => {
      if (bucketNames.length === 0) return []
      const read = async (keys: readonly string[]): Promise<Array<Record<string, string>>> => {
        const pipeline = redis.pipeline()
        for (const key of keys) pipeline.hgetall(key)
        return results(await pipeline.exec()) as Array<Record<string, string>>
      }
      const keys = bucketNames.map(names.usage)
      const hashes = cluster ? (await Promise.all(keys.map(async (key) => await read([key])))).flat() : await read(keys)
      return hashes.map((hash) => new Map(Object.entries(hash).map(([field, n]) => [field, Number(n)])))
    })
  }
}
