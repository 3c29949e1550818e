// Counters on Redis: fixed windows (hit, resetHits: the login guard's failures) and rate limits
// (countRate, peekRate: GCRA cells, types.ts: RateCounter). Each counter is one key with no hash
// tag (key-names.ts), so in a cluster a request's counters lie in different slots.
import { RATE_SLACK_MS, type LimitStore, type RateCounter, type RateOutcome } from '../types.js'
import type { RedisStoreContext } from './context.js'

// INCR, and start the window's expiry with the first hit; returns [count, ms left].
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`

// Rate counters (types.ts: RateCounter, GCRA): each key holds the ms (Redis's clock) from which the
// counter is back to its full limit. The script takes a batch of requests and handles them one
// after the other, exactly as if each had come alone: every counter of a request is checked
// first, and only when the request fits all of them is it counted in all, so a refused request
// counts nowhere and an allowed one once. The time is Redis's own (TIME), so gateways with skewed
// clocks agree. A counter expires when it is full again. Numbers go out as %.17g strings: Redis
// would cut a Lua number to an integer.
// KEYS: the counters (each once). ARGV[1]: '1' count, '0' only read; ARGV[2]: slack (ms);
// ARGV[3]: the number of requests; then per request: its number of counters, and per counter:
// its index in KEYS, the ms one request adds, the window (ms).
// Returns per request: allowed (1/0), then the backlog (ms) of each of its counters.
const RATE_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local count = ARGV[1] == '1'
local slack = tonumber(ARGV[2])
local fullAt = {}
local changed = {}
local out = {}
local at = 4
for _ = 1, tonumber(ARGV[3]) do
  local n = tonumber(ARGV[at])
  at = at + 1
  local keys, shares, backlogs = {}, {}, {}
  local allowed = true
  for i = 1, n do
    local k, share, window = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    at = at + 3
    if fullAt[k] == nil then fullAt[k] = tonumber(redis.call('GET', KEYS[k]) or '0') or 0 end
    local backlog = math.max(0, fullAt[k] - now)
    keys[i], shares[i], backlogs[i] = k, share, backlog
    if backlog + share > window + slack then allowed = false end
  end
  if count and allowed then
    for i = 1, n do
      backlogs[i] = backlogs[i] + shares[i]
      fullAt[keys[i]] = now + backlogs[i]
      changed[keys[i]] = true
    end
  end
  out[#out + 1] = allowed and 1 or 0
  for i = 1, n do out[#out + 1] = string.format('%.17g', backlogs[i]) end
end
for k in pairs(changed) do
  redis.call('SET', KEYS[k], string.format('%.17g', fullAt[k]), 'PX', math.max(1, math.ceil(fullAt[k] - now)))
end
return out`

// Takes one request back out of a counter (a Redis Cluster's counters of one request counted one
// by one, when a later one refused). KEYS[1]: the counter; ARGV[1]: the ms one request adds.
const RATE_REFUND_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local fullAt = (tonumber(redis.call('GET', KEYS[1]) or '0') or 0) - tonumber(ARGV[1])
if fullAt <= now then redis.call('DEL', KEYS[1]) return 0 end
redis.call('SET', KEYS[1], string.format('%.17g', fullAt), 'PX', math.max(1, math.ceil(fullAt - now)))
return 1`

/** requests counted in one script call, at most */
const RATE_BATCH_MAX = 128

/** The ms one request adds to a counter. */
const share = ({ limit, windowMs }: RateCounter): number => windowMs / limit

export function redisLimits ({ redis, names, cluster, guarded }: RedisStoreContext): LimitStore {
  // Loaded once per connection: ioredis sends EVALSHA, and the script itself only when Redis
  // answers NOSCRIPT (after a restart or SCRIPT FLUSH).
  redis.defineCommand('keygateRate', { lua: RATE_SCRIPT })
  redis.defineCommand('keygateRateRefund', { lua: RATE_REFUND_SCRIPT, numberOfKeys: 1 })
  const scripts = redis as unknown as {
    keygateRate: (numberOfKeys: number, ...args: string[]) => Promise<Array<number | string>>
    keygateRateRefund: (key: string, shareMs: string) => Promise<number>
  }

  /** Runs the script over these requests (each a list of counters); their outcomes, in order. */
  const runRates = async (requests: ReadonlyArray<readonly RateCounter[]>, count: boolean): Promise<RateOutcome[]> => {
    const keys: string[] = []
    const index = new Map<string, string>()
    const args: string[] = [count ? '1' : '0', String(RATE_SLACK_MS), String(requests.length)]
    for (const counters of requests) {
      args.push(String(counters.length))
      for (const counter of counters) {
        const name = names.rate(counter.key)
        let k = index.get(name)
        if (k === undefined) {
          k = String(keys.push(name))
          index.set(name, k)
        }
        args.push(k, String(share(counter)), String(counter.windowMs))
      }
    }
    const flat = await scripts.keygateRate(keys.length, ...keys, ...args)
    let at = 0
    return requests.map((counters) => {
      const allowed = flat[at++] === 1
      const backlogMs = counters.map(() => Number(flat[at++]))
      return { allowed, backlogMs }
    })
  }
  const runRate = async (counters: readonly RateCounter[], count: boolean): Promise<RateOutcome> =>
    (await runRates([counters], count))[0] as RateOutcome

  // Requests counted within one turn of the event loop go to Redis together, in one script call
  // (at most RATE_BATCH_MAX): under load a gateway handles several requests per turn, and each
  // round trip costs the gateway about as much CPU as the script costs Redis. The script handles
  // them one after the other, so the outcome is exactly what separate calls would give; a request
  // waits at most for the rest of its turn.
  let batch: Array<{ counters: readonly RateCounter[]; resolve: (o: RateOutcome) => void; reject: (err: unknown) => void }> | undefined
  const flush = (pending: NonNullable<typeof batch>): void => {
    runRates(pending.map((p) => p.counters), true).then(
      (outcomes) => { pending.forEach((p, i) => { p.resolve(outcomes[i] as RateOutcome) }) },
      (err: unknown) => { for (const p of pending) p.reject(err) })
  }
  const countRateBatched = async (counters: readonly RateCounter[]): Promise<RateOutcome> => await new Promise((resolve, reject) => {
    let pending = batch
    if (pending === undefined) {
      const started: NonNullable<typeof batch> = pending = batch = []
      setImmediate(() => {
        if (batch !== started) return
        batch = undefined
        flush(started)
      })
    }
    pending.push({ counters, resolve, reject })
    if (pending.length >= RATE_BATCH_MAX) {
      batch = undefined
      flush(pending)
    }
  })
  /**
   * In a Redis Cluster a script may only touch keys of one hash slot, and a request's counters
   * (its key's, its user's, its address's) lie in different ones. There each counter is checked
   * and counted on its own, at once; when one refuses, the others give their count back. Never
   * more requests pass than the limits allow; for the moment between the count and the refund a
   * concurrent request may see the counters one request fuller than they end up.
   */
  const countRateOneByOne = async (counters: readonly RateCounter[]): Promise<RateOutcome> => {
    const settled = await Promise.allSettled(counters.map(async (counter) => await runRate([counter], true)))
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')
    if (failed !== undefined) {
      // One counter did not answer: the request is not counted (or refused, `onStoreDown: deny`),
      // so the counters that did count it give it back; a refused request spends no quota.
      await Promise.allSettled(counters.map(async (counter, i) => {
        const s = settled[i]
        if (s?.status === 'fulfilled' && s.value.allowed) await scripts.keygateRateRefund(names.rate(counter.key), String(share(counter)))
      }))
      throw failed.reason
    }
    const outcomes = settled.map((s) => (s as PromiseFulfilledResult<RateOutcome>).value)
    if (outcomes.every((o) => o.allowed)) return { allowed: true, backlogMs: outcomes.map((o) => o.backlogMs[0] as number) }
    await Promise.all(counters.map(async (counter, i) => {
      if (outcomes[i]?.allowed === true) await scripts.keygateRateRefund(names.rate(counter.key), String(share(counter)))
    }))
    return {
      allowed: false,
      backlogMs: outcomes.map((o, i) => Math.max(0, (o.backlogMs[0] as number) - (o.allowed ? share(counters[i] as RateCounter) : 0)))
    }
  }

  return {
    hit: async (key, windowMs) => await guarded(async () => {
      const [count, ttl] = await redis.eval(HIT_SCRIPT, 1, names.hits(key), Math.max(1, Math.ceil(windowMs))) as [number, number]
      return { count, resetMs: ttl }
    }),
    resetHits: async (key) => { await guarded(async () => await redis.del(names.hits(key))) },
    countRate: async (counters) => await guarded(async () =>
      counters.length === 0
        ? { allowed: true, backlogMs: [] }
        : cluster ? (counters.length > 1 ? await countRateOneByOne(counters) : await runRate(counters, true)) : await countRateBatched(counters)),
    peekRate: async (counters) => await guarded(async () => {
      if (counters.length === 0) return { allowed: true, backlogMs: [] }
      if (!cluster) return await runRate(counters, false)
      const outcomes = await Promise.all(counters.map(async (counter) => await runRate([counter], false)))
      return { allowed: outcomes.every((o) => o.allowed), backlogMs: outcomes.map((o) => o.backlogMs[0] as number) }
    })
  }
}
