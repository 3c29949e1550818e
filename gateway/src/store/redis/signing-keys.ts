// The token-signing key ring on Redis, shared by every gateway: the current key (a string) and a
// sorted set of previous ones, both in the registry's hash slot (key-names.ts).
import type { SigningKeyRing, SigningKeyRotation, SigningKeyStore } from '../types.js'
import { results, type RedisStoreContext } from './context.js'

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

export function redisSigningKeys ({ redis, names, guarded }: RedisStoreContext): SigningKeyStore {
  const { signingKey: signingKeyKey, previousSigningKeys: previousSigningKeysKey } = names
  return {
    getOrCreateSigningKey: async (candidate) => await guarded(async () => {
      await redis.set(signingKeyKey, candidate, 'NX')
      const stored = await redis.get(signingKeyKey)
      if (stored === null) throw new Error('the signing key vanished right after it was stored')
      return stored
    }),
    getSigningKeyRing: async () => await guarded(async () => {
      const [current, previous] = results(await redis.multi()
        .get(signingKeyKey)
        .zrangebyscore(previousSigningKeysKey, `(${Date.now()}`, '+inf', 'WITHSCORES')
        .exec())
      if (typeof current !== 'string') return null
      return { current, previous: previousKeys(previous as unknown[]) }
    }),
    rotateSigningKey: async (candidate, retireAfterMs) => await guarded(async () => {
      const [current, previous, replaced, retiresAt] = await redis.eval(ROTATE_SIGNING_KEY_SCRIPT, 2, signingKeyKey, previousSigningKeysKey,
        candidate, Date.now(), Math.max(0, Math.ceil(retireAfterMs))) as [string, unknown[], string, string]
      return {
        current,
        previous: previousKeys(previous),
        replaced: replaced === '' ? null : { pem: replaced, retiresAt: Number(retiresAt) }
      } satisfies SigningKeyRotation
    })
  }
}
