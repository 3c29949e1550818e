// What the key registry is and promises (key-registry.ts makes it): the keys it hands the auth
// stages, the registrations it takes, the changes it makes, and its options.
import type { KeyObject } from 'node:crypto'
import type { KeyType } from '#client/protocol'
import type { CacheStats } from '../lib/lru-cache.js'
import type { Page, PageRequest } from '../lib/paging.js'
import type { KeyRecord, RevokeResult } from '../store/index.js'
import type { ScopeSet } from '../users/scopes.js'
import type { KeyStatus } from './key-expiry.js'

export type { KeyStatus } from './key-expiry.js'

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
