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

/** One check at a time: how long a request waits for its count (the latency it adds), p50 and p99 in us. */
async function latency (store: Store): Promise<{ p50: number; p99: number }> {
  const limiter = createRateLimiter({ store })
  const times: number[] = []
  for (let i = 0; i < 3000; i++) {
    const started = performance.now()
    await limiter.check(route, subjects[i % KEYS] as typeof subjects[number])
    times.push((performance.now() - started) * 1000)
  }
  times.sort((a, b) => a - b)
  return { p50: times[Math.floor(times.length * 0.5)] as number, p99: times[Math.floor(times.length * 0.99)] as number }
}

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `keygate-bench:limiter:${randomUUID()}:`
const line = (label: string, m: { cpuUs: number; perSecond: number }, l: { p50: number; p99: number }): string =>
  `${label.padEnd(32)} ${m.cpuUs.toFixed(1).padStart(6)} us CPU/check  ${Math.round(m.perSecond).toLocaleString('en-US').padStart(8)} checks/s` +
  `  one at a time: p50 ${Math.round(l.p50)} us, p99 ${Math.round(l.p99)} us`

const memory = createMemoryStore()
process.stdout.write(`${line('embedded store', await measure(memory), await latency(memory))}\n`)
await memory.close()
const redis = await createRedisStore({ url, prefix, commandTimeoutMs: 2000 })
process.stdout.write(`${line('Redis, one script call a check', await measure(redis), await latency(redis))}\n`)
await redis.close()
const cleanup = await connectRedis(url, { commandTimeoutMs: 2000 })
await deleteKeys(cleanup, `${prefix}*`)
cleanup.disconnect()
