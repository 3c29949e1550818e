// Each user as the hot path reads it (its scopes, its incarnation and credential): an in-process
// LRU in front of the store, as keys/key-cache.ts keeps keys. A request for a cached user makes
// no store round trip and no promise. An entry goes stale only when an operator changes the user
// (scopes, password) or removes it, and the store announces each of these (Redis pub/sub: to every
// gateway), which drops it; when announcements may have been missed (the subscription was
// re-established), every entry goes.
import type { KeyEvent, Store, UserRecord } from '../store/index.js'
import { LruCache, type CacheStats } from '../lib/lru-cache.js'
import { idpRemovedAt } from './idp-users.js'
import { NO_SCOPES, scopeSet, type ScopeSet } from './scopes.js'

/** What the hot path needs of a user: made once per store read and shared by its requests. */
export interface CurrentUser {
  scopes: ScopeSet
  /** UserRecord.id: the user's incarnation ('' for one stored before ids existed) */
  id: string
  /** UserRecord.credential: new with each password */
  credential: string
  /** when the user was created and its password last set, in whole seconds (tokens' `iat` is in seconds) */
  createdAtSeconds: number
  passwordSetAtSeconds: number
  /** an IdP user an operator removed: when (its tokens issued until then are refused: idp-users.ts) */
  idpRemovedAtSeconds: number | undefined
}

export interface UserScopes {
  /** The user's scopes now; none for a user that does not exist. Synchronous when cached. */
  of: (username: string) => ScopeSet | Promise<ScopeSet>
  /** The user now; null when there is no such user. Synchronous when cached. */
  current: (username: string) => CurrentUser | null | Promise<CurrentUser | null>
  readonly cacheSize: number
  /** lookups answered by the in-process cache (hits) or the store (misses) */
  readonly stats: Readonly<CacheStats>
  /** drops what is cached of the user (a change this process made: user-service.ts's onChanged) */
  forget: (username: string) => void
  /** stops listening to the store's events */
  close: () => Promise<void>
}

const seconds = (iso: string): number => {
  const ms = Date.parse(iso)
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : 0
}

function currentUser (user: UserRecord): CurrentUser {
  return {
    scopes: user.scopes.length === 0 ? NO_SCOPES : scopeSet(user.scopes),
    id: user.id,
    credential: user.credential,
    createdAtSeconds: seconds(user.createdAt),
    passwordSetAtSeconds: seconds(user.updatedAt),
    idpRemovedAtSeconds: idpRemovedAt(user.passwordHash)
  }
}

export function createUserScopes (store: Store, options: { cacheSize: number }): UserScopes {
  const cache = new LruCache<string, CurrentUser | null>(options.cacheSize)
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

  const fromStore = async (username: string): Promise<CurrentUser | null> => {
    stats.misses++
    const startedAt = epoch
    const record = await store.getUser(username)
    const user = record === null ? null : currentUser(record)
    if (epoch === startedAt) cache.set(username, user)
    return user
  }
  const current = (username: string): CurrentUser | null | Promise<CurrentUser | null> => {
    const cached = cache.get(username)
    if (cached === undefined) return fromStore(username)
    stats.hits++
    return cached
  }

  return {
    of (username) {
      const user = current(username)
      if (user instanceof Promise) return user.then((found) => found?.scopes ?? NO_SCOPES)
      return user?.scopes ?? NO_SCOPES
    },
    current,
    forget (username) {
      epoch++
      cache.delete(username)
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
