// Each user's current scopes, as the hot path reads them: an in-process LRU in front of the store,
// as keys/key-registry.ts keeps keys. A request for a cached user makes no store round trip and
// no promise. An entry goes stale only when an operator changes the user's scopes or removes the
// user, and both are announced by the store (Redis pub/sub: to every gateway) and drop it; when
// announcements may have been missed (the subscription was re-established), every entry goes.
import type { KeyEvent, Store } from '../store/index.js'
import { LruCache, type CacheStats } from '../lib/lru-cache.js'
import { NO_SCOPES, scopeSet, type ScopeSet } from './scopes.js'

export interface UserScopes {
  /**
   * The user's scopes now; none for a user that does not exist (a removed user's token lives on
   * until it expires). Synchronous when cached.
   */
  of: (username: string) => ScopeSet | Promise<ScopeSet>
  readonly cacheSize: number
  /** lookups answered by the in-process cache (hits) or the store (misses) */
  readonly stats: Readonly<CacheStats>
  /** stops listening to the store's events */
  close: () => Promise<void>
}

export function createUserScopes (store: Store, options: { cacheSize: number }): UserScopes {
  const cache = new LruCache<string, ScopeSet>(options.cacheSize)
  const stats: CacheStats = { hits: 0, misses: 0 }
  // Bumped by every event that drops entries: a store read that started before one may hold what
  // it changed, so its result is returned but not cached.
  let epoch = 0
  const onEvent = (event: KeyEvent): void => {
    if (event.type === 'user-changed') {
      epoch++
      cache.delete(event.username)
    } else if (event.type === 'resync') {
      epoch++
      cache.clear()
    }
  }
  const watching = store.watchKeys(onEvent).catch(() => undefined)

  const fromStore = async (username: string): Promise<ScopeSet> => {
    stats.misses++
    const startedAt = epoch
    const user = await store.getUser(username)
    const scopes = user === null || user.scopes.length === 0 ? NO_SCOPES : scopeSet(user.scopes)
    if (epoch === startedAt) cache.set(username, scopes)
    return scopes
  }

  return {
    of (username) {
      const cached = cache.get(username)
      if (cached === undefined) return fromStore(username)
      stats.hits++
      return cached
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
}
