// The hot path: a request's key found in this process. An in-process LRU holds parsed KeyObjects,
// so a request with a known key parses no PEM and makes no store round trip. A cached entry can go
// stale only by revocation or a change (scopes, expiry): each is announced by the store (Redis
// pub/sub: to every gateway) and drops the entry; when announcements may have been missed (the
// subscription was re-established) the whole cache goes. Expiry needs no announcement: the cached
// entry holds the expiry time and the check compares a number.
import { createPublicKey } from 'node:crypto'
import { API_KEY_PATTERN } from '#client/protocol'
import { LruCache, type CacheStats } from '../lib/lru-cache.js'
import type { KeyEvent, KeyRecord, Store } from '../store/index.js'
import { scopeSet } from '../users/scopes.js'
import { expiryMs } from './key-expiry.js'
import { keyFingerprint, keyTypeOf } from './public-key.js'
import type { KeyCheck, KeyRegistry, KeyRegistryOptions, RegisteredKey } from './registry-types.js'

/** Cached per apiKey: a usable key, or the fact that it is revoked (which is forever). */
type CacheEntry =
  | { status: 'active'; key: RegisteredKey; /** ms; Infinity when the key does not expire */ expiresAtMs: number }
  | { status: 'revoked'; owner: string; at: string }

/** how long, and how many, apiKeys the store did not know are remembered as unknown */
const UNKNOWN_TTL_MS = 1000
const UNKNOWN_CACHE_SIZE = 10_000

export interface KeyCache {
  check: KeyRegistry['check']
  /** a key event, from the store or from this process's own revocation or change */
  onEvent: (event: KeyEvent) => void
  /** a key this process has just registered: cached as active, and no longer unknown */
  remember: (key: RegisteredKey, expiresAtMs: number) => void
  readonly size: number
  /** lookups of well-formed apiKeys answered here (hits) or by the store (misses) */
  readonly stats: CacheStats
  /** stops listening to the store's key events */
  close: () => Promise<void>
}

function entryFrom (record: KeyRecord): CacheEntry {
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
function answer (entry: CacheEntry, nowMs: number): KeyCheck {
  if (entry.status === 'revoked' || entry.expiresAtMs > nowMs) return entry
  return { status: 'expired', owner: entry.key.owner, at: new Date(entry.expiresAtMs).toISOString() }
}

export function createKeyCache (store: Pick<Store, 'getKey' | 'watchKeys'>, options: Pick<KeyRegistryOptions, 'cacheSize' | 'watch'>): KeyCache {
  const cache = new LruCache<string, CacheEntry>(options.cacheSize)
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

  return {
    check: (apiKey, nowMs = Date.now()) => {
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
    },
    onEvent,
    remember: (key, expiresAtMs) => {
      unknown.delete(key.apiKey)
      cache.set(key.apiKey, { status: 'active', key, expiresAtMs })
    },
    get size () {
      return cache.size
    },
    stats,
    close: async () => {
      const unwatch = await watching
      await unwatch?.()
    }
  }
}
