// What happens once, on Redis: replay marks (rememberOnce: set if absent, with an expiry, a failed
// write cancelled so it refuses nothing later), one-time values (putOnce, takeOnce) and values set
// once and shared (shareValue). Each is one
// key with no hash tag, so in a cluster they spread over every shard (key-names.ts); a mark's
// cancel lives in the mark's slot (sameSlotKey).
import { randomBytes } from 'node:crypto'
import type { OnceStore, RememberedMark } from '../types.js'
import type { RedisStoreContext } from './context.js'
import { sameSlotKey } from './key-names.js'

// Replay marks (rememberOnce). Each call's mark holds a value of its own. A write whose answer
// never came (Redis paused, slow, reset) may still reach Redis later and would then refuse the
// retry of a request keygate refused, so a failed write is cancelled: the cancel deletes the mark
// if it holds that value and leaves a tombstone named after the value, which the write checks.
// Whichever of the two Redis runs first, the failed call leaves no mark behind, also when they
// travel on different connections (a reconnect between them). KEYS: mark, its tombstone.
// ARGV: value, ttl (ms). Returns 1 written, 0 a mark exists, -1 this call was cancelled.
const REMEMBER_SCRIPT = `
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return 1 end
return 0`

// Takes back one call's mark. KEYS: mark, its tombstone. ARGV: value, the tombstone's ttl (ms;
// '0': none, for a mark whose write answered and is forgotten on purpose).
const FORGET_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
if ARGV[2] ~= '0' then redis.call('SET', KEYS[2], '1', 'PX', ARGV[2]) end
return 1`

/** cancels and forgets waiting for Redis to answer, at most (each ~200 bytes); past it the oldest is dropped */
const MAX_PENDING_FORGETS = 10_000
/** how often unanswered cancels and forgets are sent again */
const FORGET_RETRY_MS = 1000

/** `stop`: the store closes (no more retries of cancels and forgets). */
export function redisOnce ({ redis, names, guarded }: RedisStoreContext): OnceStore & { stop: () => void } {
  // Loaded once per connection: ioredis sends EVALSHA, and the script itself only when Redis
  // answers NOSCRIPT (after a restart or SCRIPT FLUSH).
  redis.defineCommand('keygateRemember', { lua: REMEMBER_SCRIPT, numberOfKeys: 2 })
  redis.defineCommand('keygateForget', { lua: FORGET_SCRIPT, numberOfKeys: 2 })
  const scripts = redis as unknown as {
    keygateRemember: (mark: string, tombstone: string, value: string, ttlMs: string) => Promise<number>
    keygateForget: (mark: string, tombstone: string, value: string, tombstoneTtlMs: string) => Promise<number>
  }

  // Cancels of failed mark writes, and forgets of marks, that Redis has not yet answered: sent
  // again every FORGET_RETRY_MS and when the connection is ready again, until one is answered or
  // the mark would have expired anyway. Sent at once first: on the connection the write took,
  // Redis runs it right after the write, however late that is.
  interface PendingForget { mark: string; tombstone: string; value: string; until: number; withTombstone: boolean; sending: boolean }
  const pendingForgets = new Map<string, PendingForget>()
  let forgetTimer: NodeJS.Timeout | undefined
  const sendForget = (entry: PendingForget): void => {
    const leftMs = Math.ceil(entry.until - Date.now())
    if (leftMs <= 0) {
      pendingForgets.delete(entry.value)
      return
    }
    if (entry.sending) return
    entry.sending = true
    scripts.keygateForget(entry.mark, entry.tombstone, entry.value, entry.withTombstone ? String(leftMs) : '0').then(
      () => { pendingForgets.delete(entry.value) },
      () => {}
    ).finally(() => { entry.sending = false })
  }
  const retryForgets = (): void => {
    for (const entry of pendingForgets.values()) sendForget(entry)
    if (pendingForgets.size === 0 && forgetTimer !== undefined) {
      clearInterval(forgetTimer)
      forgetTimer = undefined
    }
  }
  redis.on('ready', retryForgets)
  const forgetMark = (entry: Omit<PendingForget, 'sending'>): void => {
    const pending = { ...entry, sending: false }
    pendingForgets.set(entry.value, pending)
    if (pendingForgets.size > MAX_PENDING_FORGETS) pendingForgets.delete(pendingForgets.keys().next().value as string)
    sendForget(pending)
    if (forgetTimer === undefined) {
      forgetTimer = setInterval(retryForgets, FORGET_RETRY_MS)
      forgetTimer.unref()
    }
  }
  const rememberOnce = async (key: string, ttlMs: number): Promise<RememberedMark | false> => {
    const mark = names.once(key)
    const value = randomBytes(12).toString('base64url')
    const tombstone = sameSlotKey(mark, `:cancelled:${value}`)
    const ttl = Math.max(1, Math.ceil(ttlMs))
    const until = Date.now() + ttl
    // Not connected: ioredis refuses the command without sending it (no offline queue), so
    // nothing can land later.
    const sent = redis.status === 'ready'
    let outcome: number
    try {
      outcome = await scripts.keygateRemember(mark, tombstone, value, String(ttl))
    } catch (err) {
      if (sent) forgetMark({ mark, tombstone, value, until, withTombstone: true })
      throw err
    }
    if (outcome === 0) return false
    if (outcome !== 1) throw new Error('the replay mark was cancelled before it was written')
    return { forget: async () => { forgetMark({ mark, tombstone, value, until, withTombstone: false }) } }
  }

  return {
    rememberOnce: async (key, ttlMs) => await guarded(async () => await rememberOnce(key, ttlMs)),
    putOnce: async (key, value, ttlMs) => {
      await guarded(async () => await redis.set(names.takeOnce(key), value, 'PX', Math.max(1, Math.ceil(ttlMs))))
    },
    // GETDEL (Redis 6.2): the read and the removal are one command, so a value is taken once
    takeOnce: async (key) => await guarded(async () => await redis.getdel(names.takeOnce(key))),
    // SET NX GET (Redis 7): the value already there, else ours, in one command
    shareValue: async (key, candidate, ttlMs) => await guarded(async () =>
      (await redis.set(names.shared(key), candidate, 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX', 'GET')) ?? candidate),
    stop: () => {
      if (forgetTimer !== undefined) clearInterval(forgetTimer)
    }
  }
}
