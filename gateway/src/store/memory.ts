import type { KeyRecord, Store, UserRecord } from './types.js'

/** The embedded store: one process's memory, lost at exit. Same contract as the Redis store. */
export function createMemoryStore (): Store {
  const users = new Map<string, UserRecord>()
  const keys = new Map<string, KeyRecord>()
  let signingKey: string | undefined

  return {
    kind: 'memory',
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
    async ping () {},
    async close () {}
  }
}
