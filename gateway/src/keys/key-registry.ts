// Registered keys: registration (prove, then store atomically), the hot-path lookup, and the key
// lifecycle (list, revoke, expiry, last use). Redis is the system of record; an in-process LRU
// holds parsed KeyObjects, so a request with a known key parses no PEM and makes no store round
// trip. A cached entry can go stale only by revocation or a change (scopes, expiry): each is
// announced by the store (Redis pub/sub: to every gateway) and drops the entry; when announcements
// may have been missed (the subscription was re-established) the whole cache goes. Expiry needs no announcement: the
// cached entry holds the expiry time and the check compares a number.
// Size: TEMPORARY (issue 33): the house-store branch splits this file by concern; drop this line when that split is merged.
import { createPublicKey, type KeyObject } from 'node:crypto'
import { API_KEY_PATTERN, type KeyType } from '#client/protocol'
import type { GatewayConfig } from '../config/env.js'
import { GatewayError } from '../errors.js'
import { newestFirst, type KeyEvent, type KeyRecord, type RevokeResult, type Store } from '../store/index.js'
import { LruCache, type CacheStats } from '../lib/lru-cache.js'
import { decodeCursor, pageOf, type Page, type PageRequest } from '../lib/paging.js'
import { missingScopes, normaliseScopes, notHeldError, scopeSet, type ScopeSet } from '../users/scopes.js'
import { decodeBase64, keyFingerprint, keyTypeOf, parsePublicKey, verifyWithKey } from './public-key.js'

export interface RegisteredKey {
  apiKey: string
  owner: string
  name: string
  keyObject: KeyObject
  /**
   * RFC 7638 thumbprint of the key (public-key.ts: keyFingerprint), computed once when the key is
   * cached: what a seed request's replay mark names, so two apiKeys of one key pair (registered
   * before fingerprints) share their marks. Absent only on a key built by hand.
   */
  fingerprint?: string
  /**
   * rsa, ed25519 or p256: which algorithm verifies its signatures. Always set by the registry (read
   * from the stored PEM, so keys stored before key types existed need nothing new); absent only
   * on a key built by hand, whose keyObject then says (keyTypeOf).
   */
  keyType?: KeyType
  /** the scopes the key may use (of those its owner still has); undefined: every scope its owner has (a key from before scopes) */
  scopes?: ScopeSet | undefined
}

export type KeyStatus = 'active' | 'revoked' | 'expired'

/** What a lookup finds: a usable key, or a key that exists but may no longer sign. */
export type KeyCheck =
  | { status: 'active'; key: RegisteredKey }
  | { status: 'revoked' | 'expired'; owner: string; /** ISO 8601: when it was revoked, or expired */ at: string }

export interface RegistrationInput {
  owner: string
  name: string
  publicKey: string
  signature: string
  /** ISO 8601 with a time zone; unset: the key does not expire */
  expiresAt?: string
  /**
   * registerForUser: the incarnation of the user the bearer token was issued to (UserRecord.id);
   * a user removed and created again under the name (another id) registers nothing with it.
   */
  userId?: string
  /**
   * The key's scopes. registerForUser: a subset of the user's, default all of them at the time
   * of registration. register: stored as given (unset: every scope its owner will ever have).
   */
  scopes?: string[]
  /**
   * registerForUser: the scopes the caller's credentials give the user now (an IdP user's: its
   * token's and an operator's grants, auth/bearer.ts); unset: the user's as stored
   */
  heldScopes?: readonly string[]
}

/** What `update` may change; `expiresAt: null` removes the expiry. */
export interface KeyUpdate {
  scopes?: string[]
  /** ISO 8601 with a time zone, as at registration; null: the key no longer expires */
  expiresAt?: string | null
}

export interface KeyUpdateResult {
  /** revoked or expired: the key was left as it is (a revoked or expired key stays so) */
  outcome: 'updated' | 'revoked' | 'expired' | 'not-found'
  /** the record after the call, with its status (as it is when not updated; null when not found) */
  record: (KeyRecord & { status: KeyStatus }) | null
}

export interface KeyRegistry {
  /** the usable key, from the cache or the store; null when unknown, revoked or expired */
  lookup: (apiKey: string) => Promise<RegisteredKey | null>
  /**
   * The key and whether it may sign at `nowMs`; null when never registered. Synchronous when the
   * answer is in this process (a cached or known-unknown key): no promise per request.
   */
  check: (apiKey: string, nowMs?: number) => KeyCheck | null | Promise<KeyCheck | null>
  register: (input: RegistrationInput) => Promise<KeyRecord>
  /**
   * register(), for an owner who must be a user (with `userId`: that incarnation of it): undefined
   * when the user does not exist or is another incarnation, checked before and after.
   */
  registerForUser: (input: RegistrationInput) => Promise<KeyRecord | undefined>
  /** the key's record (revoked and expired ones included) with its status at `nowMs`; null when never registered */
  get: (apiKey: string, nowMs?: number) => Promise<(KeyRecord & { status: KeyStatus }) | null>
  /**
   * One page of the owner's keys (every key when undefined), newest first, with their status at
   * `nowMs`; revoked keys past their retention are left out (and then pruned: tombstones are never listed).
   * VALIDATION_FAILED for a bad limit or cursor.
   */
  list: (owner?: string, page?: PageRequest, nowMs?: number) => Promise<Page<KeyRecord & { status: KeyStatus }>>
  /** every key of the owner (none pruned), with their status: for counting, not for answers */
  listAll: (owner: string, nowMs?: number) => Promise<Array<KeyRecord & { status: KeyStatus }>>
  /** revokes the key for every gateway on the store; with `owner`, another owner's key is not-found */
  revoke: (apiKey: string, owner?: string) => Promise<RevokeResult>
  /**
   * Changes the key's scopes (a subset of its owner's, else VALIDATION_FAILED naming the others)
   * and/or its expiry (checked as at registration; null clears it), for every gateway on the store
   * within a second. Values are checked first (VALIDATION_FAILED); a revoked or expired key is
   * left as it is and reported so.
   */
  update: (apiKey: string, changes: KeyUpdate, nowMs?: number) => Promise<KeyUpdateResult>
  /**
   * Notes a successful use of the key. At most one store write per key per `lastUsedIntervalMs`
   * in this process, never awaited: a failure is logged at debug and forgotten.
   */
  recordUse: (key: RegisteredKey, nowMs?: number) => void
  readonly cacheSize: number
  /** lookups of well-formed apiKeys answered by the in-process cache (hits) or the store (misses) */
  readonly stats: Readonly<CacheStats>
  /** stops listening to the store's key events */
  close: () => Promise<void>
}

export interface KeyRegistryOptions {
  cacheSize: number
  /** active keys (neither revoked nor expired) an owner may hold; unset: no limit */
  maxKeysPerOwner?: number
  /**
   * Registrations per user, counted in the store (shared by every gateway): GCRA limits of
   * `perHour` an hour and `perDay` a day; beyond, 429 RATE_LIMITED with Retry-After. Unset: none.
   */
  registrationLimits?: { perHour: number; perDay: number }
  /**
   * How long (ms) a revoked key stays whole; then it is cut down to a tombstone (Store.pruneRevokedKeys)
   * at a registration (once a minute per process at most) or a listing that meets it, at any gateway; listings
   * leave it out from then on either way. Unset: never.
   */
  revokedKeyRetentionMs?: number
  /** how often (per key, per process) a use is written to the store; default 60 s */
  lastUsedIntervalMs?: number
  /** told when recording a use failed (the request it came from has long been answered) */
  onRecordUseError?: (err: unknown, apiKey: string) => void
  /**
   * listen to the store's key events (default true). A registry that serves no signed request
   * (the operator CLI, a cluster's primary serving the admin API) caches nothing and need not.
   */
  watch?: boolean
}

export const DEFAULT_LAST_USED_INTERVAL_MS = 60_000
/** the furthest ahead `expiresAt` may be: keys are meant to be rotated */
export const MAX_KEY_LIFETIME_MS = 5 * 366 * 24 * 3600 * 1000
/** ISO 8601 date and time with seconds optional, fraction optional and a mandatory zone */
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/

/** ms since the epoch, or NaN unless every field is in range (Date.parse rolls 02-31 into March) */
function parseIsoDateTime (value: string): number {
  const m = ISO_DATE_TIME.exec(value)
  if (m === null) return Number.NaN
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m.slice(1).map((f) => Number(f ?? 0)) as number[]
  const daysInMonth = new Date(Date.UTC(year ?? 0, month ?? 0, 0)).getUTCDate()
  const inRange = (month ?? 0) >= 1 && (month ?? 0) <= 12 && (day ?? 0) >= 1 && (day ?? 0) <= daysInMonth &&
    (hour ?? 0) <= 23 && (minute ?? 0) <= 59 && (second ?? 0) <= 59 && (offsetHours ?? 0) <= 23 && (offsetMinutes ?? 0) <= 59
  return inRange ? Date.parse(value) : Number.NaN
}
/**
 * A name that could begin a signing string (a timestamp's digits, a method, a path) is refused:
 * the registration signature over it would otherwise also sign that business request.
 */
const SIGNING_STRING_PREFIX = /^[0-9]{9,}[A-Za-z]+\//

/** The proof of possession registration asks of each key type, over the bytes of `name`. */
const PROOF: Readonly<Record<KeyType, string>> = {
  rsa: 'RSA-SHA256 signature',
  ed25519: 'Ed25519 signature (64 bytes: openssl pkeyutl -sign -rawin)',
  p256: 'ECDSA P-256 SHA-256 signature in DER (openssl dgst -sha256 -sign)'
}

/** Cached per apiKey: a usable key, or the fact that it is revoked (which is forever). */
type CacheEntry =
  | { status: 'active'; key: RegisteredKey; /** ms; Infinity when the key does not expire */ expiresAtMs: number }
  | { status: 'revoked'; owner: string; at: string }

function expiryMs (expiresAt: string | undefined): number {
  return expiresAt === undefined ? Number.POSITIVE_INFINITY : Date.parse(expiresAt)
}

export function keyStatus (record: Pick<KeyRecord, 'revokedAt' | 'expiresAt'>, nowMs: number): KeyStatus {
  if (record.revokedAt !== undefined) return 'revoked'
  if (record.expiresAt !== undefined && Date.parse(record.expiresAt) <= nowMs) return 'expired'
  return 'active'
}

/** The `expiresAt` of a registration as stored (ISO 8601 UTC), or a VALIDATION_FAILED. */
export function parseExpiresAt (value: string, nowMs: number): string {
  const ms = parseIsoDateTime(value)
  const invalid = (message: string): GatewayError => new GatewayError('VALIDATION_FAILED', `expiresAt ${message}`, {
    extra: { errors: [{ field: 'expiresAt', message }] }
  })
  if (!Number.isFinite(ms)) throw invalid('must be an ISO 8601 date and time with a time zone, e.g. 2030-01-31T12:00:00Z')
  if (ms <= nowMs) throw invalid('must be in the future')
  if (ms > nowMs + MAX_KEY_LIFETIME_MS) throw invalid('must be at most 5 years ahead')
  return new Date(ms).toISOString()
}

const HOUR_MS = 3600_000
const DAY_MS = 24 * HOUR_MS
/** revoked keys cut to tombstones per registration or listing, at most: bounded work per request */
const PRUNE_BATCH = 100
const PRUNE_INTERVAL_MS = 60_000

/** The registry's policy options from the gateway's config (KEYGATE_KEY_REGISTRATIONS_PER_*, KEYGATE_REVOKED_KEY_RETENTION_DAYS). */
type KeyPolicyConfig = Pick<GatewayConfig, 'maxKeysPerUser' | 'keyRegistrationsPerHour' | 'keyRegistrationsPerDay' | 'revokedKeyRetentionDays'>
export function keyPolicy (config: KeyPolicyConfig): Pick<KeyRegistryOptions, 'maxKeysPerOwner' | 'registrationLimits' | 'revokedKeyRetentionMs'> {
  return {
    maxKeysPerOwner: config.maxKeysPerUser,
    registrationLimits: { perHour: config.keyRegistrationsPerHour, perDay: config.keyRegistrationsPerDay },
    revokedKeyRetentionMs: config.revokedKeyRetentionDays * DAY_MS
  }
}

/** The keys after a key-list cursor ([createdAt, apiKey] of the last key given), in newestFirst order. */
function afterKeyCursor (cursor: string | undefined): ((record: KeyRecord) => boolean) | undefined {
  if (cursor === undefined) return undefined
  const [createdAt, apiKey] = decodeCursor(cursor, 2, (part, i) => i === 0 ? !Number.isNaN(Date.parse(part)) : API_KEY_PATTERN.test(part)) as [string, string]
  const last = { apiKey, createdAt } as KeyRecord
  return (record) => newestFirst(record, last) > 0
}

/** how long, and how many, apiKeys the store did not know are remembered as unknown */
const UNKNOWN_TTL_MS = 1000
const UNKNOWN_CACHE_SIZE = 10_000

export function createKeyRegistry (store: Store, options: KeyRegistryOptions): KeyRegistry {
  const cache = new LruCache<string, CacheEntry>(options.cacheSize)
  const lastUsedIntervalMs = options.lastUsedIntervalMs ?? DEFAULT_LAST_USED_INTERVAL_MS
  /** apiKey -> when this process last wrote a use; kept apart from the cache so a resync keeps it */
  const usesRecorded = new LruCache<string, number>(Math.max(options.cacheSize, 1024))
  // Bumped by every key event: a store read that started before an event may hold what the event
  // changed, so its result is returned but not cached.
  let epoch = 0
  const stats: CacheStats = { hits: 0, misses: 0 }
  /**
   * apiKeys the store did not know, until when (ms): a client hammering with a deleted or mistyped
   * key costs one store read a second, not one a request. Registration here forgets the entry;
   * a key registered at another gateway in the second after this one was asked for it is refused
   * here for the rest of that second. Its own LRU: unknown keys never push known ones out.
   */
  const unknown = new LruCache<string, number>(UNKNOWN_CACHE_SIZE)
  /**
   * Creation times, strictly increasing in this process: listings are newest first by createdAt
   * (to the millisecond), so two keys registered here within one millisecond still list in the
   * order they were made. At most a few ms ahead of the clock, and only under a burst.
   */
  let lastCreatedMs = 0
  const nextCreatedAt = (): string => {
    lastCreatedMs = Math.max(Date.now(), lastCreatedMs + 1)
    return new Date(lastCreatedMs).toISOString()
  }
  const onEvent = (event: KeyEvent): void => {
    // a user's scopes are not cached here (users/user-scopes.ts)
    if (event.type === 'user-changed') return
    epoch++
    if (event.type === 'revoked' || event.type === 'changed') cache.delete(event.apiKey)
    else {
      cache.clear()
      unknown.clear()
    }
  }
  const watching = options.watch === false ? Promise.resolve(undefined) : store.watchKeys(onEvent).catch(() => undefined)

  const entryFrom = (record: KeyRecord): CacheEntry => {
    if (record.revokedAt !== undefined) return { status: 'revoked', owner: record.owner, at: record.revokedAt }
    if (record.publicKey === undefined) throw new Error(`the key ${record.apiKey} is neither revoked nor has a public key`)
    // The stored PEM was checked at registration: parse it, nothing more.
    const keyObject = createPublicKey(record.publicKey)
    const key = {
      apiKey: record.apiKey,
      owner: record.owner,
      name: record.name,
      keyObject,
      fingerprint: record.fingerprint ?? keyFingerprint(keyObject),
      keyType: keyTypeOf(keyObject),
      scopes: record.scopes === undefined ? undefined : scopeSet(record.scopes)
    }
    return { status: 'active', key, expiresAtMs: expiryMs(record.expiresAt) }
  }

  /** What the cached entry says at `nowMs`: the entry itself when it is usable (no allocation). */
  const answer = (entry: CacheEntry, nowMs: number): KeyCheck => {
    if (entry.status === 'revoked' || entry.expiresAtMs > nowMs) return entry
    return { status: 'expired', owner: entry.key.owner, at: new Date(entry.expiresAtMs).toISOString() }
  }

  const fromStore = async (apiKey: string, nowMs: number): Promise<KeyCheck | null> => {
    stats.misses++
    const startedAt = epoch
    const record = await store.getKey(apiKey)
    if (record === null) {
      if (epoch === startedAt) unknown.set(apiKey, nowMs + UNKNOWN_TTL_MS)
      return null
    }
    const entry = entryFrom(record)
    if (epoch === startedAt) cache.set(apiKey, entry)
    return answer(entry, nowMs)
  }

  const check = (apiKey: string, nowMs = Date.now()): KeyCheck | null | Promise<KeyCheck | null> => {
    // Not the shape of an apiKey: no store round trip for junk.
    if (!API_KEY_PATTERN.test(apiKey)) return null
    const entry = cache.get(apiKey)
    if (entry !== undefined) {
      stats.hits++
      return answer(entry, nowMs)
    }
    if ((unknown.get(apiKey) ?? 0) > nowMs) {
      stats.hits++
      return null
    }
    return fromStore(apiKey, nowMs)
  }

  /**
   * Records stored before fingerprints get theirs before this process registers anything (once
   * per store, ever: Store.backfillKeyIndex); a failed attempt is tried again by the next call.
   */
  let indexed: Promise<unknown> | undefined
  const keyIndexReady = async (): Promise<void> => {
    indexed ??= store.backfillKeyIndex((pem) => {
      try {
        return keyFingerprint(createPublicKey(pem))
      } catch {
        return undefined
      }
    }).catch((err: unknown) => {
      indexed = undefined
      throw err
    })
    await indexed
  }
  /**
   * Revoked keys past their retention become tombstones: lazily, a batch per listing that met such
   * a key, and per registration at most once a PRUNE_INTERVAL_MS in this process (a registration
   * costs one store round trip more at most that often; a listing with nothing due, none).
   */
  let prunedAtMs = Number.NEGATIVE_INFINITY
  const prune = async (onRegistration: boolean): Promise<void> => {
    if (options.revokedKeyRetentionMs === undefined) return
    const nowMs = Date.now()
    if (onRegistration && nowMs - prunedAtMs < PRUNE_INTERVAL_MS) return
    prunedAtMs = nowMs
    await keyIndexReady()
    await store.pruneRevokedKeys(nowMs - options.revokedKeyRetentionMs, PRUNE_BATCH)
  }
  const countRegistration = async (owner: string): Promise<void> => {
    const limits = options.registrationLimits
    if (limits === undefined) return
    const counters = [
      { key: `registrations:hour:${owner}`, limit: limits.perHour, windowMs: HOUR_MS },
      { key: `registrations:day:${owner}`, limit: limits.perDay, windowMs: DAY_MS }
    ]
    const outcome = await store.countRate(counters)
    if (outcome.allowed) return
    // a refused registration counted nowhere: it fits again once each counter has drained by the excess
    const waitMs = Math.max(...counters.map((c, i) => (outcome.backlogMs[i] ?? 0) + c.windowMs / c.limit - c.windowMs))
    const retryAfter = Math.max(1, Math.ceil(waitMs / 1000))
    throw new GatewayError('RATE_LIMITED', `Too many key registrations by one user (at most ${limits.perHour} an hour and ${limits.perDay} a day); ` +
      `try again in ${retryAfter} s`, { headers: { 'retry-after': String(retryAfter) }, extra: { retryAfterSeconds: retryAfter } })
  }
  const withStatus = (records: KeyRecord[], nowMs: number): Array<KeyRecord & { status: KeyStatus }> =>
    records.map((record) => ({ ...record, status: keyStatus(record, nowMs) }))

  const registry: KeyRegistry = {
    check,

    async lookup (apiKey) {
      const found = await check(apiKey)
      return found?.status === 'active' ? found.key : null
    },

    async register ({ owner, name, publicKey, signature, expiresAt, scopes: scopesAsked }) {
      if (SIGNING_STRING_PREFIX.test(name)) {
        throw new GatewayError('VALIDATION_FAILED', 'name must not look like the start of a signing string (digits, a method, a path)', {
          extra: { errors: [{ field: 'name', message: 'must not start with digits followed by a method and "/"' }] }
        })
      }
      const expires = expiresAt === undefined ? undefined : parseExpiresAt(expiresAt, Date.now())
      const scopes = scopesAsked === undefined ? undefined : normaliseScopes(scopesAsked)
      const parsed = parsePublicKey(publicKey)
      const signatureBytes = decodeBase64(signature)
      if (signatureBytes === undefined || !verifyWithKey(parsed.keyObject, parsed.keyType, Buffer.from(name, 'utf8'), signatureBytes)) {
        throw new GatewayError('INVALID_SIGNATURE', `signature is not a base64 ${PROOF[parsed.keyType]} of the exact bytes of name ` +
          'made with the private half of publicKey', { status: 400 })
      }
      await keyIndexReady()
      await countRegistration(owner)
      await prune(true).catch(() => {})
      const record: KeyRecord = {
        apiKey: parsed.apiKey,
        owner,
        name,
        publicKey: parsed.pem,
        fingerprint: parsed.fingerprint,
        createdAt: nextCreatedAt(),
        ...(expires !== undefined && { expiresAt: expires }),
        ...(scopes !== undefined && { scopes })
      }
      const outcome = await store.createKey(record, options.maxKeysPerOwner)
      if (outcome === 'exists') {
        // Revoked and expired keys stay registered: the same words for all, whoever asks.
        throw new GatewayError('DUPLICATE_KEY', 'This public key is already registered, in this or another encoding (a revoked or expired key stays so); ' +
          'generate a new key pair', { extra: { apiKey: parsed.apiKey } })
      }
      if (outcome === 'limit-reached') {
        const most = options.maxKeysPerOwner ?? 0
        throw new GatewayError('KEY_LIMIT_REACHED', `You have ${most} active API keys, the most a user may have; revoke one you no longer use ` +
          '(GET /v1/api-keys lists them, DELETE /v1/api-keys/{apiKey} revokes one), then register again', { extra: { maxKeys: most } })
      }
      unknown.delete(parsed.apiKey)
      const key = {
        apiKey: parsed.apiKey,
        owner,
        name,
        keyObject: parsed.keyObject,
        fingerprint: parsed.fingerprint,
        keyType: parsed.keyType,
        scopes: scopes === undefined ? undefined : scopeSet(scopes)
      }
      cache.set(parsed.apiKey, { status: 'active', key, expiresAtMs: expiryMs(expires) })
      return record
    },

    async registerForUser ({ userId, heldScopes, ...input }) {
      const isOwner = (user: { id: string } | null): boolean => user !== null && (userId === undefined || user.id === userId)
      const user = await store.getUser(input.owner)
      if (user === null || !isOwner(user)) return undefined
      // Without scopes: a snapshot of the user's now, so granting the user more later does not
      // widen keys already made for narrower jobs.
      const held = heldScopes === undefined ? user.scopes : [...heldScopes]
      let scopes = held
      if (input.scopes !== undefined) {
        scopes = normaliseScopes(input.scopes)
        const extra = missingScopes(scopes, new Set(held))
        if (extra.length > 0) throw notHeldError(extra, held, 'your user')
      }
      const record = await registry.register({ ...input, scopes })
      // A removal that ran in between revoked the keys it could see, not this one.
      if (!isOwner(await store.getUser(input.owner))) {
        await registry.revoke(record.apiKey)
        return undefined
      }
      return record
    },

    async get (apiKey, nowMs = Date.now()) {
      if (!API_KEY_PATTERN.test(apiKey)) return null
      const record = await store.getKey(apiKey)
      return record === null ? null : { ...record, status: keyStatus(record, nowMs) }
    },

    async list (owner, page = {}, nowMs = Date.now()) {
      // checked before any store work
      const after = afterKeyCursor(page.cursor)
      let records = await store.listKeys(owner)
      // Past its retention a revoked key is listed no more, cut to a tombstone yet or not (a prune
      // batch is the oldest keys of every owner, not necessarily these); only then is it worth a prune.
      const retentionMs = options.revokedKeyRetentionMs
      if (retentionMs !== undefined) {
        const due = (record: KeyRecord): boolean => record.revokedAt !== undefined && Date.parse(record.revokedAt) <= nowMs - retentionMs
        if (records.some(due)) {
          await prune(false).catch(() => {})
          records = records.filter((record) => !due(record))
        }
      }
      const listed = pageOf(records, page, (record) => [record.createdAt, record.apiKey], after)
      return { items: withStatus(listed.items, nowMs), nextCursor: listed.nextCursor }
    },

    async listAll (owner, nowMs = Date.now()) {
      return withStatus(await store.listKeys(owner), nowMs)
    },

    async revoke (apiKey, owner) {
      if (!API_KEY_PATTERN.test(apiKey)) return { outcome: 'not-found', record: null }
      const result = await store.revokeKey(apiKey, new Date().toISOString(), owner)
      // This process at once, whatever the announcement's way back.
      if (result.outcome !== 'not-found') onEvent({ type: 'revoked', apiKey })
      return result
    },

    async update (apiKey, changes, nowMs = Date.now()) {
      if (changes.scopes === undefined && changes.expiresAt === undefined) {
        throw new GatewayError('VALIDATION_FAILED', 'Give scopes, expiresAt or both: the changes to make', {
          extra: { errors: [{ field: 'scopes', message: 'give scopes, expiresAt or both' }] }
        })
      }
      const scopes = changes.scopes === undefined ? undefined : normaliseScopes(changes.scopes)
      const expiresAt = changes.expiresAt === undefined || changes.expiresAt === null ? changes.expiresAt : parseExpiresAt(changes.expiresAt, nowMs)
      if (!API_KEY_PATTERN.test(apiKey)) return { outcome: 'not-found', record: null }
      const current = await store.getKey(apiKey)
      if (current === null) return { outcome: 'not-found', record: null }
      const status = keyStatus(current, nowMs)
      // An expired key stays expired, as a revoked one stays revoked: register a new one.
      if (status !== 'active') return { outcome: status, record: { ...current, status } }
      if (scopes !== undefined) {
        const held = (await store.getUser(current.owner))?.scopes ?? []
        const extra = missingScopes(scopes, new Set(held))
        if (extra.length > 0) throw notHeldError(extra, held, `its user ${current.owner}`)
      }
      const result = await store.updateKey(apiKey, { ...(scopes !== undefined && { scopes }), ...(expiresAt !== undefined && { expiresAt }) })
      // This process at once, whatever the announcement's way back.
      if (result.outcome !== 'not-found') onEvent({ type: 'changed', apiKey })
      return { outcome: result.outcome, record: result.record === null ? null : { ...result.record, status: keyStatus(result.record, nowMs) } }
    },

    recordUse (key, nowMs = Date.now()) {
      const last = usesRecorded.get(key.apiKey)
      if (last !== undefined && nowMs - last < lastUsedIntervalMs) return
      usesRecorded.set(key.apiKey, nowMs)
      store.touchKey(key.apiKey, nowMs).catch((err: unknown) => { options.onRecordUseError?.(err, key.apiKey) })
    },

    get cacheSize () {
      return cache.size
    },

    stats,

    async close () {
      const unwatch = await watching
      await unwatch?.()
    }
  }
  return registry
}
