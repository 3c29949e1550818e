import type { KeyRecord, SigningKeyRing, Store, UserRecord } from './types.js'

/** The embedded store: one process's memory, lost at exit. Same contract as the Redis store. */
export function createMemoryStore (now: () => number = Date.now): Store {
  // Expiring entries are swept lazily on access and by a timer that never keeps the process alive.
  const remembered = new Map<string, number>()
  const counters = new Map<string, { count: number; expiresAt: number }>()
  const sweep = setInterval(() => {
    const t = now()
    for (const [key, expiresAt] of remembered) if (expiresAt <= t) remembered.delete(key)
    for (const [key, counter] of counters) if (counter.expiresAt <= t) counters.delete(key)
  }, 10_000)
  sweep.unref()
  const users = new Map<string, UserRecord>()
  const keys = new Map<string, KeyRecord>()
  let signingKey: string | undefined
  /** previous signing keys (PEM) and the ms at which each retires */
  const previousSigningKeys = new Map<string, number>()
  const signingKeyRing = (): SigningKeyRing | null => {
    if (signingKey === undefined) return null
    const t = now()
    for (const [pem, retiresAt] of previousSigningKeys) if (retiresAt <= t) previousSigningKeys.delete(pem)
    const previous = [...previousSigningKeys].map(([pem, retiresAt]) => ({ pem, retiresAt })).sort((a, b) => a.retiresAt - b.retiresAt)
    return { current: signingKey, previous }
  }

  return {
    kind: 'memory',
    // nothing here can fail to answer
    errors: 0,
    async getUser (username) {
      const user = users.get(username)
      return user === undefined ? null : { ...user }
    },
    async putUser (username, passwordHash) {
      const now = new Date().toISOString()
      const user = { username, passwordHash, createdAt: users.get(username)?.createdAt ?? now, updatedAt: now }
      users.set(username, user)
      return { ...user }
    },
    async countUsers () {
      return users.size
    },
    async getKey (apiKey) {
      const key = keys.get(apiKey)
      return key === undefined ? null : { ...key }
    },
    async createKey (record) {
      if (keys.has(record.apiKey)) return false
      keys.set(record.apiKey, { ...record })
      return true
    },
    async getOrCreateSigningKey (candidate) {
      signingKey ??= candidate
      return signingKey
    },
    async getSigningKeyRing () {
      return signingKeyRing()
    },
    async rotateSigningKey (candidate, retireAfterMs) {
      const retiresAt = now() + retireAfterMs
      const replaced = signingKey !== undefined && signingKey !== candidate ? { pem: signingKey, retiresAt } : null
      if (replaced !== null) previousSigningKeys.set(replaced.pem, retiresAt)
      previousSigningKeys.delete(candidate)
      signingKey = candidate
      return { ...signingKeyRing() as SigningKeyRing, replaced }
    },
    async rememberOnce (key, ttlMs) {
      const expiresAt = remembered.get(key)
      if (expiresAt !== undefined && expiresAt > now()) return false
      remembered.set(key, now() + ttlMs)
      return true
    },
    async hit (key, windowMs) {
      const t = now()
      let counter = counters.get(key)
      if (counter === undefined || counter.expiresAt <= t) {
        counter = { count: 0, expiresAt: t + windowMs }
        counters.set(key, counter)
      }
      counter.count++
      return { count: counter.count, resetMs: counter.expiresAt - t }
    },
    async resetHits (key) {
      counters.delete(key)
    },
    async ping () {},
    async close () { clearInterval(sweep) }
  }
}
