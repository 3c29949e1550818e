// API keys on Redis: each record a JSON string (read on a cache miss in one GET), in the registry's
// hash slot with the indexes beside it (key-names.ts): each owner's keys, fingerprint -> apiKey,
// the revoked keys not yet pruned, and the last use of each key. A revocation or change is
// announced on the key-events channel in the same step as it is stored (key-events.ts).
import { newestFirst, storedScopes, type KeyRecord, type KeyStore, type RevokeResult, type UpdateKeyResult } from '../types.js'
import { scanKeys } from '../redis-connection.js'
import { results, type RedisStoreContext } from './context.js'
import { keyEventMessage } from './key-events.js'

// The key record (set if absent) and the owner's index in one step, so a key is never
// half-registered; with a limit, the owner's active keys are counted in the same step, so
// concurrent registrations (at any gateway) cannot together pass it. Active: not revoked and not
// expired at ARGV[4]; both times are ISO 8601 UTC as toISOString() writes them, so they compare as
// strings. The records are named from the index (key-record prefix .. apiKey), in the registry's
// hash slot like the index (see redisKeyNames). The fingerprint's index entry is checked and
// written in the same step: the same key in another encoding (another apiKey) is `exists` too.
// KEYS: key record, owner index, fingerprint index entry.
// ARGV: record JSON, apiKey, most active keys ('' = no limit), now (ISO 8601), key-record prefix,
// fingerprint ('' = none: a record as an older gateway stored it).
// Returns 1 created, 0 exists, -1 limit reached.
const CREATE_KEY_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if ARGV[6] ~= '' and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local most = tonumber(ARGV[3])
if most then
  local active = 0
  for _, apiKey in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local text = redis.call('GET', ARGV[5] .. apiKey)
    if text then
      local record = cjson.decode(text)
      if not record.revokedAt and (type(record.expiresAt) ~= 'string' or record.expiresAt > ARGV[4]) then
        active = active + 1
        if active >= most then return -1 end
      end
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
if ARGV[6] ~= '' then redis.call('SET', KEYS[3], ARGV[2]) end
return 1`

// Revocation rewrites the record and announces it on the key-events channel in the same step, so
// a revocation that is stored is always announced, and one that is announced is always stored
// (every gateway then drops its cached copy). The key joins the revoked-keys index (pruneRevokedKeys).
// KEYS: key record, revoked-keys index. ARGV: revokedAt, owner ('' = any), channel, apiKey, revokedAt (ms).
const REVOKE_KEY_SCRIPT = `
local text = redis.call('GET', KEYS[1])
if not text then return {'not-found', ''} end
local record = cjson.decode(text)
if ARGV[2] ~= '' and record.owner ~= ARGV[2] then return {'not-found', ''} end
if record.revokedAt then return {'already-revoked', text} end
record.revokedAt = ARGV[1]
local updated = cjson.encode(record)
redis.call('SET', KEYS[1], updated)
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {'revoked', updated}`

// A key's scopes and/or expiry changed and announced in one step, as revocation is. A revoked key is
// left as it is. Lua's JSON encoder writes an empty list as {}: readers take that for no scopes
// (storedScopes). ARGV: scopes JSON ('' = unchanged), expiresAt ('' = unchanged, '-' = none),
// channel, changed message.
const UPDATE_KEY_SCRIPT = `
local text = redis.call('GET', KEYS[1])
if not text then return {'not-found', ''} end
local record = cjson.decode(text)
if record.revokedAt then return {'revoked', text} end
if ARGV[1] ~= '' then record.scopes = cjson.decode(ARGV[1]) end
if ARGV[2] == '-' then record.expiresAt = nil elseif ARGV[2] ~= '' then record.expiresAt = ARGV[2] end
local updated = cjson.encode(record)
redis.call('SET', KEYS[1], updated)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {'updated', updated}`

// Revoked keys past their retention cut down to tombstones (types.ts: Store.pruneRevokedKeys), the
// oldest first, at most ARGV[2] per call; each record and its indexes in this one step. A record
// without a fingerprint (an older gateway's) keeps its public key: it is what names the key then.
// KEYS: revoked-keys index, last-used hash. ARGV: revoked before (ms), most, key-record prefix,
// owner-index prefix, prunedAt (ISO 8601). Returns how many were cut.
const PRUNE_REVOKED_KEYS_SCRIPT = `
local pruned = 0
for _, apiKey in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))) do
  local name = ARGV[3] .. apiKey
  local text = redis.call('GET', name)
  if text then
    local r = cjson.decode(text)
    if r.revokedAt and not r.prunedAt then
      local kept = { apiKey = r.apiKey, owner = r.owner, name = r.name, createdAt = r.createdAt, revokedAt = r.revokedAt, prunedAt = ARGV[5] }
      if r.fingerprint then kept.fingerprint = r.fingerprint else kept.publicKey = r.publicKey end
      redis.call('SET', name, cjson.encode(kept))
      redis.call('SREM', ARGV[4] .. r.owner, apiKey)
      redis.call('HDEL', KEYS[2], apiKey)
      pruned = pruned + 1
    end
  end
  redis.call('ZREM', KEYS[1], apiKey)
end
return pruned`

// One record of the backfill (Store.backfillKeyIndex): its fingerprint into the record (read again
// here, so a revocation since the scan is kept) and the index, each set only when absent; a revoked
// record that is not a tombstone into the revoked-keys index.
// KEYS: key record, fingerprint index entry, revoked-keys index. ARGV: fingerprint, apiKey, revokedAt (ms).
const INDEX_KEY_SCRIPT = `
local text = redis.call('GET', KEYS[1])
if not text then return 0 end
local r = cjson.decode(text)
if not r.fingerprint then
  r.fingerprint = ARGV[1]
  redis.call('SET', KEYS[1], cjson.encode(r))
end
redis.call('SET', KEYS[2], ARGV[2], 'NX')
if r.revokedAt and not r.prunedAt then redis.call('ZADD', KEYS[3], 'NX', ARGV[3], ARGV[2]) end
return 1`

// A later use wins; a use of a key that is not registered is not recorded.
// KEYS: last-used hash, key record. ARGV: apiKey, ms.
const TOUCH_KEY_SCRIPT = `
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local current = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if current < tonumber(ARGV[2]) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1`

/** SCAN MATCH treats these as a pattern; a prefix is matched literally. */
function globEscape (text: string): string {
  return text.replace(/[*?[\\\]]/g, (c) => `\\${c}`)
}

function parseKeyRecord (text: string, lastUsedMs: string | null | undefined): KeyRecord {
  const record = JSON.parse(text) as KeyRecord
  delete record.lastUsedAt
  // absent stays absent: a key from before scopes, which has every scope of its owner
  if ('scopes' in record) record.scopes = storedScopes(record.scopes)
  const used = Number(lastUsedMs)
  return lastUsedMs === null || lastUsedMs === undefined || !Number.isFinite(used) ? record : { ...record, lastUsedAt: new Date(used).toISOString() }
}

export function redisKeys ({ redis, names, guarded }: RedisStoreContext): KeyStore {
  const { key: keyKey, ownerKeys, lastUsed: lastUsedKey, keyEvents: keyEventsChannel } = names

  /** The records of these apiKeys with their last use, in one round trip; unknown ones left out. */
  const readKeys = async (apiKeys: string[]): Promise<KeyRecord[]> => {
    if (apiKeys.length === 0) return []
    const values = results(await redis.multi()
      .mget(...apiKeys.map(keyKey))
      .hmget(lastUsedKey, ...apiKeys)
      .exec())
    const texts = values[0] as Array<string | null>
    const used = values[1] as Array<string | null>
    return texts.flatMap((text, i) => text === null ? [] : [parseKeyRecord(text, used[i])])
  }

  return {
    getKey: async (apiKey) => await guarded(async () => {
      const [text, used] = results(await redis.multi().get(keyKey(apiKey)).hget(lastUsedKey, apiKey).exec()) as [string | null, string | null]
      return text === null ? null : parseKeyRecord(text, used)
    }),
    createKey: async (record, maxActiveKeys) => await guarded(async () => {
      const { lastUsedAt: _, ...stored } = record
      const outcome = await redis.eval(CREATE_KEY_SCRIPT, 3, keyKey(record.apiKey), ownerKeys(record.owner), names.keyFingerprint(record.fingerprint ?? ''),
        JSON.stringify(stored), record.apiKey, maxActiveKeys === undefined ? '' : String(maxActiveKeys), new Date().toISOString(), keyKey(''),
        record.fingerprint ?? '')
      return outcome === 1 ? 'created' : outcome === -1 ? 'limit-reached' : 'exists'
    }),
    listKeys: async (owner) => await guarded(async () => {
      let apiKeys: string[]
      if (owner !== undefined) {
        apiKeys = await redis.smembers(ownerKeys(owner))
      } else {
        // every master: in a cluster each holds part of the keyspace
        const found = new Set<string>()
        const start = keyKey('').length
        for await (const batch of scanKeys(redis, `${globEscape(keyKey(''))}*`)) for (const name of batch) found.add(name.slice(start))
        apiKeys = [...found]
      }
      const records: KeyRecord[] = []
      // MGET in slices: a few thousand keys per round trip
      for (let i = 0; i < apiKeys.length; i += 1000) records.push(...await readKeys(apiKeys.slice(i, i + 1000)))
      return records.filter((record) => record.prunedAt === undefined).sort(newestFirst)
    }),
    revokeKey: async (apiKey, at, owner) => await guarded(async () => {
      const [outcome, text] = await redis.eval(
        REVOKE_KEY_SCRIPT, 2, keyKey(apiKey), names.revokedKeys, at, owner ?? '', keyEventsChannel, apiKey, Date.parse(at)
      ) as [RevokeResult['outcome'], string]
      if (outcome === 'not-found') return { outcome, record: null }
      const used = await redis.hget(lastUsedKey, apiKey)
      return { outcome, record: parseKeyRecord(text, used) }
    }),
    updateKey: async (apiKey, { scopes, expiresAt }) => await guarded(async () => {
      const [outcome, text] = await redis.eval(UPDATE_KEY_SCRIPT, 1, keyKey(apiKey), scopes === undefined ? '' : JSON.stringify(scopes),
        expiresAt === undefined ? '' : expiresAt ?? '-', keyEventsChannel, keyEventMessage.changed(apiKey)) as [UpdateKeyResult['outcome'], string]
      if (outcome === 'not-found') return { outcome, record: null }
      const used = await redis.hget(lastUsedKey, apiKey)
      return { outcome, record: parseKeyRecord(text, used) }
    }),
    pruneRevokedKeys: async (revokedBefore, max) => await guarded(async () =>
      await redis.eval(PRUNE_REVOKED_KEYS_SCRIPT, 2, names.revokedKeys, lastUsedKey, Math.floor(revokedBefore), max, keyKey(''), ownerKeys(''),
        new Date().toISOString()) as number),
    backfillKeyIndex: async (fingerprintOf) => await guarded(async () => {
      if (await redis.get(names.keyIndexVersion) !== null) return 0
      let indexed = 0
      const start = keyKey('').length
      for await (const batch of scanKeys(redis, `${globEscape(keyKey(''))}*`)) {
        const records = await readKeys(batch.map((name) => name.slice(start)))
        const pipeline = redis.pipeline()
        for (const record of records) {
          const fingerprint = record.fingerprint ?? (record.publicKey === undefined ? undefined : fingerprintOf(record.publicKey))
          if (fingerprint === undefined) continue
          const revokedMs = record.revokedAt === undefined ? Date.now() : Date.parse(record.revokedAt)
          pipeline.eval(INDEX_KEY_SCRIPT, 3, keyKey(record.apiKey), names.keyFingerprint(fingerprint), names.revokedKeys, fingerprint, record.apiKey,
            Number.isFinite(revokedMs) ? revokedMs : Date.now())
          indexed++
        }
        if (pipeline.length > 0) results(await pipeline.exec())
      }
      await redis.set(names.keyIndexVersion, '1')
      return indexed
    }),
    touchKey: async (apiKey, atMs) => {
      await guarded(async () => await redis.eval(TOUCH_KEY_SCRIPT, 2, lastUsedKey, keyKey(apiKey), apiKey, Math.floor(atMs)))
    }
  }
}
