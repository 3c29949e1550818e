// One interface for users, keys and the shared token-signing key. Redis is the system of record;
// the memory store is the embedded stand-in used when no REDIS_URL is set. Both pass one test
// suite (test/unit/gateway/store/store.test.ts). Every method may throw STORE_UNAVAILABLE.

import { randomBytes } from 'node:crypto'

/** A user's incarnation id or credential (UserRecord): random, 128 bits. */
export const newUserId = (): string => randomBytes(16).toString('base64url')

export interface UserRecord {
  username: string
  /** PHC string, see users/passwords.ts */
  passwordHash: string
  createdAt: string
  updatedAt: string
  /** what an operator allows the user (sorted, each once); a user stored before scopes existed has none */
  scopes: string[]
  /**
   * Random, made when the user is created: a user removed and created again under the same name
   * is another person, whose id differs. Tokens carry it. '' for a user stored before ids existed.
   */
  id: string
  /**
   * Random, new each time the password is set: tokens carry it, so a password change ends the
   * tokens issued before it. '' for a user whose password was set before this existed.
   */
  credential: string
}

export interface KeyRecord {
  /** lowercase hex SHA-256 of the key's DER SubjectPublicKeyInfo */
  apiKey: string
  owner: string
  name: string
  /** SPKI PEM, as normalised at registration; absent on a tombstone (`prunedAt`) */
  publicKey?: string
  /**
   * RFC 7638 thumbprint of the public key (keys/public-key.ts: keyFingerprint), the key's value
   * whatever its encoding. Indexed with the record, so one key pair has one apiKey, ever. Absent
   * on a record stored before fingerprints until backfillKeyIndex adds it.
   */
  fingerprint?: string
  createdAt: string
  /** ISO 8601; from then on the key signs nothing. Absent: the key does not expire */
  expiresAt?: string
  /** ISO 8601; set once, never cleared: a revoked public key stays revoked */
  revokedAt?: string
  /**
   * ISO 8601: the revoked record was cut down to a tombstone (pruneRevokedKeys): apiKey, owner,
   * name, fingerprint and the dates, what "never registered again" and "it was revoked" need.
   */
  prunedAt?: string
  /**
   * The scopes the key may use (sorted, each once), at most those of its owner: set at
   * registration. Absent (a key registered before scopes existed): every scope its owner has.
   */
  scopes?: string[]
  /**
   * ISO 8601, coarse: the last successful use some gateway recorded (each records a key's use at
   * most once a minute). Absent: never used. Kept beside the record, not in it.
   */
  lastUsedAt?: string
}

/**
 * What `watchKeys` listeners hear: a key was revoked, or changed (its scopes, its expiry); a user's
 * scopes changed, or the user was removed; or anything may have (resync: drop everything cached).
 */
export type KeyEvent =
  | { type: 'revoked'; apiKey: string }
  | { type: 'changed'; apiKey: string }
  | { type: 'user-changed'; username: string }
  | { type: 'resync' }

export type KeyEventListener = (event: KeyEvent) => void

export type CreateKeyOutcome = 'created' | 'exists' | 'limit-reached'

export interface RevokeResult {
  /** not-found: no such key, or (with `owner`) not that owner's key */
  outcome: 'revoked' | 'already-revoked' | 'not-found'
  /** the record after the call (null when not found) */
  record: KeyRecord | null
}

/** What `updateKey` changes; `expiresAt: null` removes the expiry. Absent fields stay as they are. */
export interface KeyChanges {
  scopes?: string[]
  /** ISO 8601 UTC as toISOString() writes it, or null: the key no longer expires */
  expiresAt?: string | null
}

export interface UpdateKeyResult {
  /** revoked: the key is revoked and was left as it is (a revoked key stays as revoked) */
  outcome: 'updated' | 'revoked' | 'not-found'
  /** the record after the call (as it is, when revoked; null when not found) */
  record: KeyRecord | null
}

export interface RemoveUserResult {
  removed: boolean
  /** the keys this removal revoked (those already revoked are not listed) */
  revokedKeys: string[]
}

/**
 * The token-signing keys shared by every gateway on a store: the one new tokens are signed with,
 * and earlier ones that still verify the tokens they signed until `retiresAt`.
 */
export interface SigningKeyRing {
  /** PKCS#8 PEM of the current signing key */
  current: string
  /** earlier keys, not yet retired, oldest retirement first */
  previous: Array<{ pem: string; /** ms since the epoch; from then on the key verifies nothing */ retiresAt: number }>
}

/** The ring after a rotation, and the key the rotation replaced (null when there was none). */
export interface SigningKeyRotation extends SigningKeyRing {
  replaced: { pem: string; retiresAt: number } | null
}

export interface Store {
  readonly kind: 'redis' | 'memory'
  /** store operations that failed for want of an answer (Redis down, slow, reset), since start */
  readonly errors: number
  getUser: (username: string) => Promise<UserRecord | null>
  /**
   * Creates the user (with a new `id`), or replaces its password hash keeping its creation time
   * and id. Either way the user gets a new `credential`, and the change is announced as
   * `user-changed` (every gateway drops what it cached of the user: tokens issued before end). Its
   * scopes stay as they are unless `scopes` is given (a new user without them has none).
   */
  putUser: (username: string, passwordHash: string, scopes?: string[]) => Promise<UserRecord>
  /**
   * Atomically replaces the user's scopes and announces `user-changed` to every `watchKeys`
   * listener (on Redis: every gateway). The record after the change; null when no such user.
   */
  setUserScopes: (username: string, scopes: string[]) => Promise<UserRecord | null>
  countUsers: () => Promise<number>
  /** every user, by name */
  listUsers: () => Promise<UserRecord[]>
  /**
   * Atomically: revokes every key of the user (announcing each to `watchKeys` listeners, on every
   * gateway, and the user as `user-changed`), forgets the user's key index, and removes the user.
   * The revoked records stay (until pruneRevokedKeys cuts them to tombstones).
   */
  removeUser: (username: string) => Promise<RemoveUserResult>
  /** the record, revoked or expired ones included (the caller judges); null when never registered */
  getKey: (apiKey: string) => Promise<KeyRecord | null>
  /**
   * Atomic: stores the key unless a key with this apiKey, or with this `fingerprint` (the same key
   * in another encoding), exists already (by anyone, revoked and pruned ones included: `exists`)
   * or, with `maxActiveKeys`, its owner already has that many active keys
   * (neither revoked nor expired now: `limit-reached`). The check and the write are one step, so
   * of concurrent registrations by one owner at most the limit succeed, on every gateway.
   */
  createKey: (record: KeyRecord, maxActiveKeys?: number) => Promise<CreateKeyOutcome>
  /**
   * The owner's keys (every key when `owner` is undefined), newest first, revoked ones included,
   * tombstones (`prunedAt`) left out.
   */
  listKeys: (owner?: string) => Promise<KeyRecord[]>
  /**
   * Atomically marks the key revoked at `at` (ISO 8601) and announces it to every `watchKeys`
   * listener (on Redis: every gateway). With `owner`, another owner's key is `not-found`. The key
   * joins the index of revoked keys that pruneRevokedKeys reads.
   */
  revokeKey: (apiKey: string, at: string, owner?: string) => Promise<RevokeResult>
  /**
   * Atomically changes the key's scopes and/or expiry and announces `changed` to every `watchKeys`
   * listener (on Redis: every gateway). A revoked key is left as it is (`revoked`). The caller
   * checks the values (the store stores what it is given).
   */
  updateKey: (apiKey: string, changes: KeyChanges) => Promise<UpdateKeyResult>
  /**
   * Cuts at most `max` keys revoked before `revokedBefore` (ms since the epoch) down to tombstones:
   * the public key, scopes, expiry and last use go, the record leaves its owner's index (and so
   * every listing), the fingerprint index stays; each in one atomic step. A record without a
   * fingerprint (stored by an older gateway) keeps its public key. Returns how many were cut.
   */
  pruneRevokedKeys: (revokedBefore: number, max: number) => Promise<number>
  /**
   * Once per store, ever: gives every key record stored before fingerprints its `fingerprint`
   * (computed by `fingerprintOf` from its public key) and the index entry, and puts revoked ones
   * in the index pruneRevokedKeys reads; then marks the store done, so later calls only read the
   * mark. Idempotent and safe to run from several gateways at once (each write is
   * set-if-absent). Returns how many records it indexed.
   */
  backfillKeyIndex: (fingerprintOf: (publicKey: string) => string | undefined) => Promise<number>
  /** records a use of the key at `atMs` (a later use wins; an earlier one changes nothing) */
  touchKey: (apiKey: string, atMs: number) => Promise<void>
  /**
   * Calls `listener` for every key revocation and change, and every change of a user's scopes or
   * removal of a user, made through any store on the same backing store,
   * and with `resync` whenever events may have been missed (on Redis: each time the subscription
   * is (re)established, the first time included). Resolves to a function that stops listening.
   */
  watchKeys: (listener: KeyEventListener) => Promise<() => Promise<void>>
  /**
   * Returns the token-signing key shared by every gateway on this store: the one stored, or
   * `candidate` when none was stored yet (set-if-absent, so concurrent starters agree).
   */
  getOrCreateSigningKey: (candidate: string) => Promise<string>
  /** The shared signing-key ring without its retired keys; null while no key was ever stored. */
  getSigningKeyRing: () => Promise<SigningKeyRing | null>
  /**
   * Atomically makes `candidate` the current signing key; the key it replaces stays in the ring
   * as a previous key until `retireAfterMs` from now, and keys already retired leave the ring.
   * Returns the ring after the rotation and the key it replaced.
   */
  rotateSigningKey: (candidate: string, retireAfterMs: number) => Promise<SigningKeyRotation>
  /**
   * Set-if-absent with an expiry: true the first time `key` is remembered within `ttlMs`, false
   * on every later call until it expires. Atomic across every gateway on the store (replay checks).
   * A call that fails (STORE_UNAVAILABLE: Redis paused, slow, reset) leaves nothing that refuses
   * a later call, even when its write reaches Redis after the failure. On true, a handle that
   * forgets the mark again (only this call's mark: a later one by another request stays).
   */
  rememberOnce: (key: string, ttlMs: number) => Promise<RememberedMark | false>
  /**
   * Keeps `value` under `key` for `ttlMs`, for one takeOnce: a login's state between the
   * browser's start and its callback, a handoff between the callback and the page. Replaces what
   * the key held. Values are small (a few hundred bytes); the key is random, made by the caller.
   */
  putOnce: (key: string, value: string, ttlMs: number) => Promise<void>
  /**
   * The value putOnce left under `key`, removed in the same atomic step (on Redis: GETDEL): of
   * concurrent takes, on any gateway of the store, one gets it and the others null. null when
   * never put, already taken, or expired.
   */
  takeOnce: (key: string) => Promise<string | null>
  /**
   * The value every gateway on the store holds under `key` for `ttlMs`: `candidate` when none was
   * there yet (set-if-absent, the value already there returned in the same atomic step; on Redis:
   * SET NX GET), so that concurrent callers on any gateway agree (DPoP's server nonces).
   */
  shareValue: (key: string, candidate: string, ttlMs: number) => Promise<string>
  /**
   * Counts a hit in a fixed window that starts with the first hit: returns the count so far and
   * the ms until the window ends (rate limits).
   */
  hit: (key: string, windowMs: number) => Promise<{ count: number; resetMs: number }>
  /** forgets a counter (a success resets the failures) */
  resetHits: (key: string) => Promise<void>
  /**
   * Checks a request against every counter and, only when none is full, counts it in all of them:
   * one atomic step on the store's own clock (on Redis: one script and Redis's TIME, so gateways
   * with skewed clocks agree). A counter expires once it is back to its full limit.
   */
  countRate: (counters: readonly RateCounter[]) => Promise<RateOutcome>
  /** The counters' backlogs (ms) without counting anything: `allowed` says whether one more request would pass. */
  peekRate: (counters: readonly RateCounter[]) => Promise<RateOutcome>
  /**
   * Usage analytics (analytics/): adds each write's counts to its bucket, a hash of counters
   * shared by every gateway on the store, and (re)sets the bucket's expiry. Not atomic across
   * buckets: a failure may leave some of a batch counted.
   */
  addUsageCounts: (buckets: readonly UsageBucketWrite[]) => Promise<void>
  /** the counters of each named bucket, in order (an empty Map for a bucket that is gone or never was) */
  readUsageCounts: (names: readonly string[]) => Promise<Array<Map<string, number>>>
  /**
   * MCP sessions (mcp/sessions.ts): binds session `id` to `owner` for `ttlMs`, unless it is bound
   * already (set-if-absent, atomic across every gateway on the store). Returns the owner the
   * session has after the call: `owner`, or the one an earlier binding gave it.
   */
  bindMcpSession: (id: string, owner: string, ttlMs: number) => Promise<string>
  /** The owner of session `id`, its lifetime renewed to `ttlMs` from now in the same step; null when unbound or expired. */
  mcpSessionOwner: (id: string, ttlMs: number) => Promise<string | null>
  /** Forgets session `id` (its owner ended it) */
  forgetMcpSession: (id: string) => Promise<void>
  /** resolves when the store answers; throws STORE_UNAVAILABLE otherwise */
  ping: () => Promise<void>
  close: () => Promise<void>
}

// The store's concerns: each store keeps each in a file of its own, under the same name
// (redis/users.ts and memory/users.ts, ...), and makes the Store of them (redis.ts, memory.ts).
/** users: their records and scopes; removing one revokes its keys */
export type UserStore = Pick<Store, 'getUser' | 'putUser' | 'setUserScopes' | 'countUsers' | 'listUsers' | 'removeUser'>
/** API keys: their records, the indexes beside them (owner, fingerprint, revoked), their last use */
export type KeyStore = Pick<Store, 'getKey' | 'createKey' | 'listKeys' | 'revokeKey' | 'updateKey' | 'pruneRevokedKeys' | 'backfillKeyIndex' | 'touchKey'>
/** what users and keys announce (KeyEvent) reaching every gateway's listeners */
export type KeyEventStore = Pick<Store, 'watchKeys'>
/** the token-signing key ring */
export type SigningKeyStore = Pick<Store, 'getOrCreateSigningKey' | 'getSigningKeyRing' | 'rotateSigningKey'>
/** what happens once: replay marks (rememberOnce), one-time values (putOnce, takeOnce) and values set once and shared (shareValue) */
export type OnceStore = Pick<Store, 'rememberOnce' | 'putOnce' | 'takeOnce' | 'shareValue'>
/** counters: fixed windows (hit: the login guard's) and rate limits (countRate, peekRate) */
export type LimitStore = Pick<Store, 'hit' | 'resetHits' | 'countRate' | 'peekRate'>
/** MCP sessions and who opened each (mcp/sessions.ts) */
export type McpSessionStore = Pick<Store, 'bindMcpSession' | 'mcpSessionOwner' | 'forgetMcpSession'>
/** usage analytics' buckets */
export type UsageStore = Pick<Store, 'addUsageCounts' | 'readUsageCounts'>

/** One bucket's share of a usage flush (analytics/counter.ts). */
export interface UsageBucketWrite {
  /** the bucket's name (analytics/buckets.ts), under the store's prefix */
  name: string
  /** seconds from now until the store forgets the bucket */
  ttlSeconds: number
  /** field (the request's dimensions) -> requests to add */
  counts: ReadonlyMap<string, number>
}

/** A mark rememberOnce made; `forget` takes it back (a refused request stays retryable). Never rejects. */
export interface RememberedMark {
  forget: () => Promise<void>
}

/**
 * One rate counter (limits/): a GCRA cell of `limit` requests per `windowMs`. It holds one number,
 * the "theoretical arrival time": the moment from which the counter is back to its full limit.
 * Its backlog is how far that lies ahead (0: full); a request adds `windowMs / limit` to it, and
 * is let through while the backlog stays within the window.
 */
export interface RateCounter {
  /** under the store's prefix; one counter per key */
  key: string
  limit: number
  windowMs: number
}

/**
 * A request fits a counter while its backlog plus one request is within the window, give or take
 * this: a window divided by a limit is seldom a whole number, and N such shares added up must
 * not miss the window by a rounding error and refuse the N-th request.
 */
export const RATE_SLACK_MS = 0.001

export interface RateOutcome {
  /** true: the request was counted in every counter; false: in none (some counter was full) */
  allowed: boolean
  /**
   * per counter, in order: ms until it is back to its full limit, after this request when it was
   * allowed, before it when it was not (a refused request counts nowhere)
   */
  backlogMs: number[]
}

/** The order every key listing uses: newest first (by createdAt), ties by apiKey. */
export function newestFirst (a: KeyRecord, b: KeyRecord): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? 1 : -1
  return a.apiKey < b.apiKey ? -1 : a.apiKey > b.apiKey ? 1 : 0
}

/**
 * Scopes as a store holds them: a list of strings, else none. (Redis's Lua JSON encoder writes an
 * empty list as `{}`, and a record stored before scopes existed has no list at all.)
 */
export function storedScopes (value: unknown): string[] {
  return Array.isArray(value) ? value.filter((scope): scope is string => typeof scope === 'string') : []
}
