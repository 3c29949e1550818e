// What counting a request against a route's rate limit costs the gateway's process, measured
// alone: the limiter (limits/limiter.ts) with one per-key limit, on Redis (REDIS_URL or
// 127.0.0.1:6379) and on the embedded store. CONCURRENCY checks are kept in flight, as a loaded
// gateway has them. (ioredis auto-pipelining was tried here and saved nothing: 22-30 us a check
// against 21-26 without.) Run it with
//   node --conditions=keygate-source --import tsx bench/limiter-overhead.ts
// It prints this process's CPU time per check (median of rounds) and the checks per second.
import { randomUUID } from 'node:crypto'
import { createRateLimiter } from '../gateway/src/limits/limiter.js'
import { rateLimit } from '../gateway/src/limits/rate-limit.js'
import { createMemoryStore } from '../gateway/src/store/memory.js'
import { createRedisStore } from '../gateway/src/store/redis.js'
import { connectRedis, deleteKeys } from '../gateway/src/store/redis-connection.js'
import type { Store } from '../gateway/src/store/index.js'

const CHECKS = 20_000
const ROUNDS = 5
const CONCURRENCY = 32
const KEYS = 64

const route = { name: 'bench', rateLimits: [rateLimit({ by: 'key', limit: 1_000_000_000, window: '1m' }, 'r:bench')], onStoreDown: 'allow' as const }
const subjects = Array.from({ length: KEYS }, (_, i) => ({ key: i.toString(16).padStart(64, '0'), user: 'bench', address: '127.0.0.1' }))

async function measure (store: Store): Promise<{ cpuUs: number; perSecond: number }> {
  const limiter = createRateLimiter({ store })
  const results: Array<{ cpuUs: number; perSecond: number }> = []
  for (let round = 0; round < ROUNDS; round++) {
    let next = 0
    const cpu = process.cpuUsage()
    const started = performance.now()
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < CHECKS) await limiter.check(route, subjects[next++ % KEYS] as typeof subjects[number])
    }))
    const seconds = (performance.now() - started) / 1000
    const used = process.cpuUsage(cpu)
    results.push({ cpuUs: (used.user + used.system) / CHECKS, perSecond: CHECKS / seconds })
  }
  results.sort((a, b) => a.cpuUs - b.cpuUs)
  return results[Math.floor(ROUNDS / 2)] as { cpuUs: number; perSecond: number }
}

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `keygate-bench:limiter:${randomUUID()}:`
const line = (label: string, m: { cpuUs: number; perSecond: number }): string =>
  `${label.padEnd(36)} ${m.cpuUs.toFixed(1).padStart(6)} us CPU/check  ${Math.round(m.perSecond).toLocaleString('en-US').padStart(8)} checks/s`

const memory = createMemoryStore()
process.stdout.write(`${line('embedded store', await measure(memory))}\n`)
await memory.close()
const redis = await createRedisStore({ url, prefix, commandTimeoutMs: 2000 })
process.stdout.write(`${line('Redis, one script call a check', await measure(redis))}\n`)
await redis.close()
const cleanup = await connectRedis(url, { commandTimeoutMs: 2000 })
await deleteKeys(cleanup, `${prefix}*`)
cleanup.disconnect()
