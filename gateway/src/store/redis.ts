// Size: TEMPORARY (issue 33): the house-store branch splits this file by concern; drop this line when that split is merged.
import { API_KEY_PATTERN } from '#client/protocol'
import { randomBytes } from 'node:crypto'
import { Cluster } from 'ioredis'
import { GatewayError } from '../errors.js'
import { connectRedis, createRedisClient, scanKeys, type RedisClient, type RedisConnection } from './redis-connection.js'
import {
  newestFirst, newUserId, RATE_SLACK_MS, storedScopes, type KeyEvent, type KeyEventListener, type KeyRecord, type RateCounter, type RateOutcome,
  type RememberedMark, type RevokeResult, type SigningKeyRing, type SigningKeyRotation, type Store, type UpdateKeyResult, type UsageBucketWrite,
  type UserRecord
} from './types.js'

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
    // fingerprint -> apiKey, written with the record in one script: one key pair, one apiKey
    keyFingerprint: (fingerprint: string): string => `${registry}key-fingerprint:${fingerprint}`,
    // revoked keys not yet pruned, scored by the ms of their revocation (pruneRevokedKeys)
    revokedKeys: `${registry}revoked-keys`,
    // set once backfillKeyIndex has indexed every record stored before fingerprints
    keyIndexVersion: `${registry}key-index-version`,
    // read with the key records in one MULTI, so in the registry's slot; written at most once a
    // minute per key and gateway, so it adds little to that shard
    lastUsed: `${registry}keys-last-used`,
    // a channel, not a key: PUBLISH reaches every node of a cluster
    keyEvents: `${prefix}key-events`,
    signingKey: `${registry}jwt:signing-key`,
    previousSigningKeys: `${registry}jwt:previous-signing-keys`,
    once: (key: string): string => `${prefix}once:${key}`,
    hits: (key: string): string => `${prefix}hits:${key}`,
    // putOnce/takeOnce: one key each, no tag (a login's state, a handoff: per login, spread over the shards)
    takeOnce: (key: string): string => `${prefix}take-once:${key}`,
    // per request too, and one key per counter: in a cluster they spread over every shard
    rate: (key: string): string => `${prefix}rate:${key}`,
    // usage analytics: one hash per time bucket, written in batches; each is one key, so one slot
    usage: (bucket: string): string => `${prefix}usage:${bucket}`
  }
}

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

const RETRY_AFTER_SECONDS = '1'

// Key records are JSON strings (read on a cache miss in one GET). Revocation rewrites the record
// and announces it on the key-events channel in the same step, so a revocation that is stored is
// always announced, and one that is announced is always stored (every gateway then drops its
// cached copy). The key joins the revoked-keys index (pruneRevokedKeys).
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

// Removing a user: revoke (and announce) every key in its index, drop the index, the user and its
// name in the users set, in one step; a registration can never slip between. The key records are
// named from the index (key-record prefix .. apiKey): undeclared keys, which a single Redis allows
// and a cluster too, since every registry key shares one hash slot (redisKeyNames).
// The user's removal is announced too (ARGV[5], a user-changed message: keyEventMessage).
// KEYS: user hash, users set, owner index, revoked-keys index. ARGV: revokedAt, key-record prefix,
// channel, username, user-changed message, revokedAt (ms).
const REMOVE_USER_SCRIPT = `
local revoked = {}
for _, apiKey in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  local name = ARGV[2] .. apiKey
  local text = redis.call('GET', name)
  if text then
    local record = cjson.decode(text)
    if not record.revokedAt then
      record.revokedAt = ARGV[1]
      redis.call('SET', name, cjson.encode(record))
      redis.call('ZADD', KEYS[4], ARGV[6], apiKey)
      redis.call('PUBLISH', ARGV[3], apiKey)
      table.insert(revoked, apiKey)
    end
  end
end
redis.call('DEL', KEYS[3])
local removed = redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[4])
if removed == 1 then redis.call('PUBLISH', ARGV[3], ARGV[5]) end
return {removed, revoked}`

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

// A user's scopes replaced and announced in one step; nothing for a user that does not exist.
// KEYS: user hash. ARGV: scopes JSON, channel, user-changed message. Returns the user's fields.
const SET_USER_SCOPES_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], 'passwordHash') == 0 then return false end
redis.call('HSET', KEYS[1], 'scopes', ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return redis.call('HGETALL', KEYS[1])`

/**
 * What travels on the key-events channel: a revoked key's apiKey alone (as keygate always sent),
 * `changed:<apiKey>`, `user:<username>`. A gateway of an older version ignores the new two.
 */
export const keyEventMessage = {
  changed: (apiKey: string): string => `changed:${apiKey}`,
  userChanged: (username: string): string => `user:${username}`
}

/** The event a key-events message announces; undefined for anything else. */
export function parseKeyEventMessage (message: string): KeyEvent | undefined {
  if (API_KEY_PATTERN.test(message)) return { type: 'revoked', apiKey: message }
  if (message.startsWith('changed:')) {
    const apiKey = message.slice('changed:'.length)
    return API_KEY_PATTERN.test(apiKey) ? { type: 'changed', apiKey } : undefined
  }
  if (message.startsWith('user:') && message.length > 'user:'.length) return { type: 'user-changed', username: message.slice('user:'.length) }
  return undefined
}

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

/** What Redis Cluster hashes to pick a key's slot: the first non-empty `{tag}`, else the whole key. */
export function hashedPart (key: string): string {
  const open = key.indexOf('{')
  const close = open < 0 ? -1 : key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

/**
 * A key in the hash slot of `name` (a cluster runs a script only on keys of one slot): under
 * `name`'s own hash tag when it has one, else under a tag that is all of `name`. A name with a
 * `}` and no tag cannot be wrapped so (the tag would end at that `}`): an Error, not a key that
 * Redis Cluster would refuse in the script (CROSSSLOT) on every call.
 */
export function sameSlotKey (name: string, suffix: string): string {
  const key = hashedPart(name) !== name ? `${name}${suffix}` : `{${name}}${suffix}`
  if (hashedPart(key) !== hashedPart(name)) throw new Error(`no key can share the hash slot of ${name}: it holds a } but no {tag}`)
  return key
}

/** [pem, score, pem, score, ...] as ZRANGE WITHSCORES answers */
function previousKeys (flat: unknown[]): SigningKeyRing['previous'] {
  const previous: SigningKeyRing['previous'] = []
  for (let i = 0; i + 1 < flat.length; i += 2) previous.push({ pem: String(flat[i]), retiresAt: Number(flat[i + 1]) })
  return previous
}

/** A user's hash fields as a record; null when there is no such user. */
function userFrom (username: string, fields: Record<string, string>): UserRecord | null {
  if (fields.passwordHash === undefined) return null
  let scopes: unknown
  try {
    scopes = fields.scopes === undefined ? [] : JSON.parse(fields.scopes)
  } catch {}
  return {
    username,
    passwordHash: fields.passwordHash,
    createdAt: fields.createdAt ?? '',
    updatedAt: fields.updatedAt ?? '',
    scopes: storedScopes(scopes),
    id: fields.id ?? '',
    credential: fields.credential ?? ''
  }
}

/** [field, value, field, value, ...] as HGETALL answers from a script */
function fieldsOf (flat: unknown[]): Record<string, string> {
  const fields: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = String(flat[i + 1])
  return fields
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
  const connection = 'url' in options ? options.url : options.connection
  const { prefix } = options
  const redis = await connectRedis(connection, { commandTimeoutMs: options.commandTimeoutMs })
  const names = redisKeyNames(prefix, redis instanceof Cluster)
  if (redis instanceof Cluster) {
    // the replay marks' cancels live in the mark's slot: a prefix that rules it out fails here, not every signed write
    try {
      sameSlotKey(names.once('replay:'), ':cancelled:')
    } catch {
      redis.disconnect()
      throw new Error(`KEYGATE_REDIS_PREFIX ${JSON.stringify(prefix)} holds a } outside a {tag}: in a Redis Cluster keygate needs a prefix without one`)
    }
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

  const userKey = names.user
  const usersSet = names.users
  const keyKey = names.key
  const ownerKeys = names.ownerKeys
  const lastUsedKey = names.lastUsed
  const keyEventsChannel = names.keyEvents
  const signingKeyKey = names.signingKey
  /** MULTI results, or STORE_UNAVAILABLE when any command failed */
  const results = (result: Array<[Error | null, unknown]> | null): unknown[] => {
    const failed = result?.find(([err]) => err !== null)
    if (result === null || failed !== undefined) throw unavailable(failed?.[0])
    return result.map(([, value]) => value)
  }

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

  // Key events: one subscriber connection (a subscribed connection can run nothing else), made
  // when the first listener arrives. Every time its subscription is (re)established, listeners
  // hear `resync`: revocations announced while it was away are lost, so cached keys must go.
  const listeners = new Set<KeyEventListener>()
  let subscriber: RedisClient | undefined
  const emit = (event: KeyEvent): void => { for (const listener of listeners) listener(event) }
  const startSubscriber = (): RedisClient => {
    const sub = createRedisClient(connection, { commandTimeoutMs: options.commandTimeoutMs }, {
      autoResubscribe: false,
      // visible in CLIENT LIST: which gateway prefix this subscription serves
      connectionName: `keygate-sub:${prefix}`.replace(/[^\w:.@-]/g, '_').slice(0, 200)
    })
    sub.on('error', () => {})
    sub.connect().catch(() => {})
    sub.on('ready', () => {
      sub.subscribe(keyEventsChannel).then(() => { emit({ type: 'resync' }) }, () => {
        // Not subscribed on a live connection: drop it, and the next 'ready' tries again.
        sub.disconnect(true)
      })
    })
    sub.on('message', (channel: string, message: string) => {
      const event = channel === keyEventsChannel ? parseKeyEventMessage(message) : undefined
      if (event !== undefined) emit(event)
    })
    return sub
  }
  const stopSubscriber = async (): Promise<void> => {
    const sub = subscriber
    subscriber = undefined
    if (sub === undefined) return
    try {
      await sub.quit()
    } catch {}
    // Also after a clean QUIT: it alone leaves Sentinel's failover-detector connections open.
    sub.disconnect()
  }
  const previousSigningKeysKey = names.previousSigningKeys

  // Loaded once per connection: ioredis sends EVALSHA, and the script itself only when Redis
  // answers NOSCRIPT (after a restart or SCRIPT FLUSH).
  redis.defineCommand('keygateRate', { lua: RATE_SCRIPT })
  redis.defineCommand('keygateRateRefund', { lua: RATE_REFUND_SCRIPT, numberOfKeys: 1 })
  redis.defineCommand('keygateRemember', { lua: REMEMBER_SCRIPT, numberOfKeys: 2 })
  redis.defineCommand('keygateForget', { lua: FORGET_SCRIPT, numberOfKeys: 2 })
  const scripts = redis as unknown as {
    keygateRate: (numberOfKeys: number, ...args: string[]) => Promise<Array<number | string>>
    keygateRateRefund: (key: string, shareMs: string) => Promise<number>
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
  const cluster = redis instanceof Cluster

  return {
    kind: 'redis',
    get errors () { return errors },
    getUser: async (username) => await guarded(async () => userFrom(username, await redis.hgetall(userKey(username)))),
    putUser: async (username, passwordHash, scopes) => await guarded(async () => {
      const now = new Date().toISOString()
      // A new user gets an id (an existing one keeps it; one stored before ids gets one now), and
      // every password a new credential: tokens issued before carry the old ones.
      const multi = redis.multi()
        .hsetnx(userKey(username), 'createdAt', now)
        .hsetnx(userKey(username), 'id', newUserId())
        .hset(userKey(username), 'passwordHash', passwordHash, 'updatedAt', now, 'credential', newUserId())
        .sadd(usersSet, username)
      // in the same MULTI: the change is stored and announced together, or none of it is
      if (scopes !== undefined) multi.hset(userKey(username), 'scopes', JSON.stringify(scopes))
      multi.publish(keyEventsChannel, keyEventMessage.userChanged(username))
      const values = results(await multi.hgetall(userKey(username)).exec())
      const user = userFrom(username, values[values.length - 1] as Record<string, string>)
      if (user === null) throw new Error('the user vanished right after it was stored')
      return user
    }),
    setUserScopes: async (username, scopes) => await guarded(async () => {
      const fields = await redis.eval(SET_USER_SCOPES_SCRIPT, 1, userKey(username), JSON.stringify(scopes), keyEventsChannel,
        keyEventMessage.userChanged(username)) as unknown[] | null
      return fields === null ? null : userFrom(username, fieldsOf(fields))
    }),
    countUsers: async () => await guarded(async () => await redis.scard(usersSet)),
    listUsers: async () => await guarded(async () => {
      const names = (await redis.smembers(usersSet)).sort()
      if (names.length === 0) return []
      const multi = redis.multi()
      for (const name of names) multi.hgetall(userKey(name))
      const values = results(await multi.exec()) as Array<Record<string, string>>
      return names.flatMap((username, i) => {
        const user = userFrom(username, values[i] ?? {})
        return user === null ? [] : [user]
      })
    }),
    removeUser: async (username) => await guarded(async () => {
      const at = new Date()
      const [removed, revokedKeys] = await redis.eval(REMOVE_USER_SCRIPT, 4, userKey(username), usersSet, ownerKeys(username), names.revokedKeys,
        at.toISOString(), keyKey(''), keyEventsChannel, username, keyEventMessage.userChanged(username), at.getTime()) as [number, string[]]
      return { removed: removed === 1, revokedKeys }
    }),
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
    },
    watchKeys: async (listener) => {
      listeners.add(listener)
      subscriber ??= startSubscriber()
      return async () => {
        listeners.delete(listener)
        if (listeners.size === 0) await stopSubscriber()
      }
    },
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
    }),
    rememberOnce: async (key, ttlMs) => await guarded(async () => await rememberOnce(key, ttlMs)),
    putOnce: async (key, value, ttlMs) => {
      await guarded(async () => await redis.set(names.takeOnce(key), value, 'PX', Math.max(1, Math.ceil(ttlMs))))
    },
    // GETDEL (Redis 6.2): the read and the removal are one command, so a value is taken once
    takeOnce: async (key) => await guarded(async () => await redis.getdel(names.takeOnce(key))),
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
    }),
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
    }),
    ping: async () => { await guarded(async () => await redis.ping()) },
    close: async () => {
      if (forgetTimer !== undefined) clearInterval(forgetTimer)
      listeners.clear()
      await stopSubscriber()
      try {
        await redis.quit()
      } catch {}
      // Also after a clean QUIT: it alone leaves Sentinel's failover-detector connections open.
      redis.disconnect()
    }
  }
}
