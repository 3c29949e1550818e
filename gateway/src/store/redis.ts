import { Redis, type RedisOptions } from 'ioredis'
import { GatewayError } from '../errors.js'
import type { KeyRecord, SigningKeyRing, SigningKeyRotation, Store, UserRecord } from './types.js'

export interface RedisStoreOptions {
  url: string
  /** every key this store touches starts with it, so several deployments (or tests) can share a Redis */
  prefix: string
  /** no command waits longer than this on a slow or dead Redis */
  commandTimeoutMs: number
}

// SET NX of the key record and the owner's index in one step, so a key is never half-registered.
const CREATE_KEY_SCRIPT = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('SADD', KEYS[2], ARGV[2])
  return 1
end
return 0`

const RETRY_AFTER_SECONDS = '1'

// INCR, and start the window's expiry with the first hit; returns [count, ms left].
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`

// The signing-key ring: KEYS[1] the current key (the string getOrCreateSigningKey sets), KEYS[2] a
// sorted set of previous keys scored by the ms at which they retire. One step, so that concurrent
// rotations each demote the key they replace and no key is lost or left current twice.
// ARGV: candidate PEM, now (ms), retire after (ms).
const ROTATE_SIGNING_KEY_SCRIPT = `
local now = tonumber(ARGV[2])
local retiresAt = now + tonumber(ARGV[3])
local replaced = redis.call('GET', KEYS[1])
if replaced == ARGV[1] then replaced = false end
if replaced then redis.call('ZADD', KEYS[2], retiresAt, replaced) end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
return {ARGV[1], redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES'), replaced or '', tostring(retiresAt)}`

/** [pem, score, pem, score, ...] as ZRANGE WITHSCORES answers */
function previousKeys (flat: unknown[]): SigningKeyRing['previous'] {
  const previous: SigningKeyRing['previous'] = []
  for (let i = 0; i + 1 < flat.length; i += 2) previous.push({ pem: String(flat[i]), retiresAt: Number(flat[i + 1]) })
  return previous
}

function unavailable (err: unknown): GatewayError {
  return new GatewayError('STORE_UNAVAILABLE', 'The key and user store did not answer; try again shortly', {
    headers: { 'retry-after': RETRY_AFTER_SECONDS },
    cause: err
  })
}


/**
 * Connects and returns the Redis store. Commands fail fast while Redis is away (no offline
 * queue, a command timeout) and the client reconnects in the background.
 */
export async function createRedisStore (options: RedisStoreOptions): Promise<Store> {
  const { prefix } = options
  const redisOptions: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: Math.max(options.commandTimeoutMs, 2000),
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000)
  }
  const redis = new Redis(options.url, redisOptions)
  // Without a listener ioredis prints every reconnection error; the store reports failures itself.
  redis.on('error', () => {})
  try {
    await redis.connect()
  } catch (err) {
    redis.disconnect()
    throw new Error(`cannot reach Redis at ${redactUrl(options.url)}: ${(err as Error).message}`, { cause: err })
  }

  /** failed operations, for the metrics (keygate_store_errors_total) */
  let errors = 0
  /** Runs one store operation, turning any Redis failure into STORE_UNAVAILABLE (and counting it). */
  const guarded = async <T>(operation: () => Promise<T>): Promise<T> => {
    try {
      return await operation()
    } catch (err) {
      errors++
      throw err instanceof GatewayError ? err : unavailable(err)
    }
  }

  const userKey = (username: string): string => `${prefix}user:${username}`
  const usersSet = `${prefix}users`
  const keyKey = (apiKey: string): string => `${prefix}key:${apiKey}`
  const ownerKeys = (owner: string): string => `${prefix}user-keys:${owner}`
  const signingKeyKey = `${prefix}jwt:signing-key`
  const previousSigningKeysKey = `${prefix}jwt:previous-signing-keys`

  return {
    kind: 'redis',
    get errors () { return errors },
    getUser: async (username) => await guarded(async () => {
      const fields = await redis.hgetall(userKey(username))
      if (fields.passwordHash === undefined) return null
      return { username, passwordHash: fields.passwordHash, createdAt: fields.createdAt ?? '', updatedAt: fields.updatedAt ?? '' }
    }),
    putUser: async (username, passwordHash) => await guarded(async () => {
      const now = new Date().toISOString()
      const result = await redis.multi()
        .hsetnx(userKey(username), 'createdAt', now)
        .hset(userKey(username), 'passwordHash', passwordHash, 'updatedAt', now)
        .sadd(usersSet, username)
        .hget(userKey(username), 'createdAt')
        .exec()
      const failed = result?.find(([err]) => err !== null)
      if (result === null || failed !== undefined) throw unavailable(failed?.[0])
      const createdAt = String(result[3]?.[1] ?? now)
      return { username, passwordHash, createdAt, updatedAt: now } satisfies UserRecord
    }),
    countUsers: async () => await guarded(async () => await redis.scard(usersSet)),
    getKey: async (apiKey) => await guarded(async () => {
      const text = await redis.get(keyKey(apiKey))
      return text === null ? null : JSON.parse(text) as KeyRecord
    }),
    createKey: async (record) => await guarded(async () => {
      const created = await redis.eval(CREATE_KEY_SCRIPT, 2, keyKey(record.apiKey), ownerKeys(record.owner), JSON.stringify(record), record.apiKey)
      return created === 1
    }),
    getOrCreateSigningKey: async (candidate) => await guarded(async () => {
      await redis.set(signingKeyKey, candidate, 'NX')
      const stored = await redis.get(signingKeyKey)
      if (stored === null) throw new Error('the signing key vanished right after it was stored')
      return stored
    }),
    getSigningKeyRing: async () => await guarded(async () => {
      const result = await redis.multi()
        .get(signingKeyKey)
        .zrangebyscore(previousSigningKeysKey, `(${Date.now()}`, '+inf', 'WITHSCORES')
        .exec()
      const failed = result?.find(([err]) => err !== null)
      if (result === null || failed !== undefined) throw unavailable(failed?.[0])
      const current = result[0]?.[1]
      if (typeof current !== 'string') return null
      return { current, previous: previousKeys(result[1]?.[1] as unknown[]) }
    }),
    rotateSigningKey: async (candidate, retireAfterMs) => await guarded(async () => {
      const [current, previous, replaced, retiresAt] = await redis.eval(ROTATE_SIGNING_KEY_SCRIPT, 2, signingKeyKey, previousSigningKeysKey,
        candidate, Date.now(), Math.max(0, Math.ceil(retireAfterMs))) as [string, unknown[], string, string]
      return {
        current,
        previous: previousKeys(previous),
        replaced: replaced === '' ? null : { pem: replaced, retiresAt: Number(retiresAt) }
      } satisfies SigningKeyRotation
    }),
    rememberOnce: async (key, ttlMs) => await guarded(async () =>
      await redis.set(`${prefix}once:${key}`, '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX') === 'OK'),
    hit: async (key, windowMs) => await guarded(async () => {
      const [count, ttl] = await redis.eval(HIT_SCRIPT, 1, `${prefix}hits:${key}`, Math.max(1, Math.ceil(windowMs))) as [number, number]
      return { count, resetMs: ttl }
    }),
    resetHits: async (key) => { await guarded(async () => await redis.del(`${prefix}hits:${key}`)) },
    ping: async () => { await guarded(async () => await redis.ping()) },
    close: async () => {
      try {
        await redis.quit()
      } catch {
        redis.disconnect()
      }
    }
  }
}

/** A Redis URL without its password, for messages and logs. */
export function redactUrl (url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparseable REDIS_URL)'
  }
}
