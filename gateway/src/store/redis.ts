import { Cluster } from 'ioredis'
import { GatewayError } from '../errors.js'
import { connectRedis, type RedisConnection } from './redis-connection.js'
import type { KeyRecord, SigningKeyRing, SigningKeyRotation, Store, UserRecord } from './types.js'

export type RedisStoreOptions = ({ url: string } | { connection: RedisConnection }) & {
  /** every key this store touches starts with it, so several deployments (or tests) can share a Redis */
  prefix: string
  /** no command waits longer than this on a slow or dead Redis */
  commandTimeoutMs: number
}

/**
 * The name of every key the store writes. On one node (or Sentinel's one master) they are the
 * prefix and a name, as they always were.
 *
 * In Redis Cluster a script or MULTI may only touch keys of one hash slot, so the keys are in two
 * groups. The registry (users and the set of them, API keys and each owner's index of them, the
 * signing-key ring) carries one hash tag, the prefix: `keygate:{keygate}user:alice`. Its scripts
 * stay atomic: registering a key is SET NX of the key plus SADD to its owner's index in one step.
 * Per-user tags cannot keep that: the key record must be found by its apiKey alone (a request
 * names no owner until the key is read) and be unique across owners, so it lives in the apiKey's
 * slot while the owner's index would live in the owner's; no script spans two slots. The
 * registry's one slot is one shard, but its load follows logins, registrations and key-cache
 * misses, not requests: a gateway keeps parsed keys and verified tokens in memory.
 * Per-request state (replay marks of signed writes, login counters) is one key per operation and
 * carries no tag, so it spreads over every shard: that is the load that grows with traffic.
 */
export function redisKeyNames (prefix: string, cluster: boolean) {
  const registry = cluster ? `${prefix}{${prefix.replace(/:$/, '')}}` : prefix
  return {
    user: (username: string): string => `${registry}user:${username}`,
    users: `${registry}users`,
    key: (apiKey: string): string => `${registry}key:${apiKey}`,
    ownerKeys: (owner: string): string => `${registry}user-keys:${owner}`,
    signingKey: `${registry}jwt:signing-key`,
    previousSigningKeys: `${registry}jwt:previous-signing-keys`,
    once: (key: string): string => `${prefix}once:${key}`,
    hits: (key: string): string => `${prefix}hits:${key}`
  }
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

/** Runs one store operation, turning any Redis failure into STORE_UNAVAILABLE. */
async function guarded<T> (operation: () => Promise<T>): Promise<T> {
  try {
    return await operation()
  } catch (err) {
    throw err instanceof GatewayError ? err : unavailable(err)
  }
}

/**
 * Connects and returns the Redis store. Commands fail fast while Redis is away (no offline
 * queue, a command timeout) and the client reconnects in the background.
 */
export async function createRedisStore (options: RedisStoreOptions): Promise<Store> {
  const connection = 'url' in options ? options.url : options.connection
  const redis = await connectRedis(connection, { commandTimeoutMs: options.commandTimeoutMs })
  const names = redisKeyNames(options.prefix, redis instanceof Cluster)
  const userKey = names.user
  const usersSet = names.users
  const keyKey = names.key
  const ownerKeys = names.ownerKeys
  const signingKeyKey = names.signingKey
  const previousSigningKeysKey = names.previousSigningKeys

  return {
    kind: 'redis',
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
      await redis.set(names.once(key), '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX') === 'OK'),
    hit: async (key, windowMs) => await guarded(async () => {
      const [count, ttl] = await redis.eval(HIT_SCRIPT, 1, names.hits(key), Math.max(1, Math.ceil(windowMs))) as [number, number]
      return { count, resetMs: ttl }
    }),
    resetHits: async (key) => { await guarded(async () => await redis.del(names.hits(key))) },
    ping: async () => { await guarded(async () => await redis.ping()) },
    close: async () => {
      try {
        await redis.quit()
      } catch {}
      // Also after a clean QUIT: it alone leaves Sentinel's failover-detector connections open.
      redis.disconnect()
    }
  }
}
