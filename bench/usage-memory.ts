// What usage analytics costs Redis (analytics/): 10,000 active keys, each with one user, one route
// and one outcome, flushed through the real store into one minute bucket and one hour bucket; the
// bytes each bucket takes (MEMORY USAGE) and what INFO memory grew by. From them, the bound for
// every bucket kept (minutes for 6 h, hours for 14 days). And the CPU of counting alone (the
// in-process Map), per request. Run it with
//   node --conditions=keygate-source --import tsx bench/usage-memory.ts [REDIS_URL]
// It writes under a prefix of its own and deletes it.
import { randomBytes, randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createUsageCounter } from '../gateway/src/analytics/counter.js'
import { RESOLUTIONS } from '../gateway/src/analytics/buckets.js'
import { createMemoryStore } from '../gateway/src/store/memory.js'
import { createRedisStore } from '../gateway/src/store/redis.js'

const KEYS = Number(process.env.USAGE_KEYS ?? 10_000)
const url = process.argv[2] ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `keygate-bench:usage:${randomUUID()}:`
const redis = new Redis(url)
const used = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1])

const store = await createRedisStore({ url, prefix, commandTimeoutMs: 30_000 })
const counter = createUsageCounter({ store, flushMs: 3_600_000, maxSeries: 1_000_000 })
const keys = Array.from({ length: KEYS }, () => randomBytes(32).toString('hex'))
const before = await used()
for (let i = 0; i < KEYS; i++) counter.count(keys[i] as string, `user-${i}`, 'clients', 200, '-')
const started = performance.now()
await counter.flush()
const flushMs = performance.now() - started
const after = await used()
const names = await redis.keys(`${prefix}usage:*`)
const bytes: Record<string, number> = {}
for (const name of names) bytes[name.slice(prefix.length)] = Number(await redis.call('MEMORY', 'USAGE', name, 'SAMPLES', '0'))
const minute = Object.entries(bytes).find(([name]) => name.startsWith('usage:m:'))?.[1] ?? 0
const hour = Object.entries(bytes).find(([name]) => name.startsWith('usage:h:'))?.[1] ?? 0
const minutesKept = RESOLUTIONS.minute.retentionMs / RESOLUTIONS.minute.ms
const hoursKept = RESOLUTIONS.hour.retentionMs / RESOLUTIONS.hour.ms
const mib = (n: number): string => (n / 1024 / 1024).toFixed(1)
console.log(`${KEYS} keys, one field each: minute bucket ${mib(minute)} MiB, hour bucket ${mib(hour)} MiB ` +
  `(${(minute / KEYS).toFixed(0)} bytes a field); INFO used_memory grew ${mib(after - before)} MiB; flush took ${flushMs.toFixed(0)} ms`)
console.log(`every key active every minute for ${minutesKept} minutes and every hour for ${hoursKept} hours: ` +
  `${mib(minute * minutesKept)} MiB of minute buckets + ${mib(hour * hoursKept)} MiB of hour buckets = ${mib(minute * minutesKept + hour * hoursKept)} MiB`)
console.log(`every key active in each hour (not each minute): ${mib(minute * 60 + hour * hoursKept)} MiB at most ` +
  '(an hour\'s share of minute buckets, the hours kept)')
await store.close()
for (const name of names) await redis.del(name)
redis.disconnect()

// the counting alone: what the onResponse hook adds to a request, over 1,000 keys and 2 outcomes
const local = createUsageCounter({ store: createMemoryStore(), flushMs: 3_600_000, maxSeries: 50_000 })
const sample = keys.slice(0, 1000)
const rounds: number[] = []
for (let round = 0; round < 7; round++) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < 1_000_000; i++) {
    const refused = i % 10 === 0
    local.count(sample[i % 1000] as string, 'alice', 'clients', refused ? 401 : 200, refused ? 'INVALID_SIGNATURE' : '-')
  }
  rounds.push(Number(process.hrtime.bigint() - t0) / 1_000_000)
  await local.flush()
}
rounds.sort((a, b) => a - b)
const ns = (n: number | undefined): string => (n as number).toFixed(0)
console.log(`counting: ${ns(rounds[3])} ns per request (median of 7 rounds of 1,000,000; ${ns(rounds[0])} to ${ns(rounds[6])})`)
await local.close()
