// Users in one process: a Map by name. Removing a user revokes its keys (keys.ts), as the Redis
// store's script does, and announces both (key-events.ts).
import { newUserId, type KeyEvent, type UserRecord, type UserStore } from '../types.js'

export interface MemoryUsersOptions {
  now: () => number
  announce: (event: KeyEvent) => void
  /** revokes the owner's keys that are not yet revoked, at `at`, and forgets its index; the keys revoked (keys.ts) */
  revokeOwnerKeys: (owner: string, at: string) => string[]
}

export function memoryUsers ({ now, announce, revokeOwnerKeys }: MemoryUsersOptions): UserStore {
  const users = new Map<string, UserRecord>()
  // Copies in and out, lists included: a caller changing what it got changes nothing stored.
  const userCopy = (user: UserRecord): UserRecord => ({ ...user, scopes: [...user.scopes] })
  return {
    async getUser (username) {
      const user = users.get(username)
      return user === undefined ? null : userCopy(user)
    },
    async putUser (username, passwordHash, scopes) {
      const at = new Date(now()).toISOString()
      const existing = users.get(username)
      const user = {
        username,
        passwordHash,
        createdAt: existing?.createdAt ?? at,
        updatedAt: at,
        scopes: [...scopes ?? existing?.scopes ?? []],
        id: existing?.id ?? newUserId(),
        credential: newUserId()
      }
      users.set(username, user)
      // a new password (or a new user under an old name) ends the tokens issued before: say so
      announce({ type: 'user-changed', username })
      return userCopy(user)
    },
    async setUserScopes (username, scopes) {
      const user = users.get(username)
      if (user === undefined) return null
      user.scopes = [...scopes]
      announce({ type: 'user-changed', username })
      return userCopy(user)
    },
    async countUsers () {
      return users.size
    },
    async listUsers () {
      return [...users.values()].map(userCopy).sort((a, b) => a.username < b.username ? -1 : 1)
    },
    async removeUser (username) {
      const revokedKeys = revokeOwnerKeys(username, new Date(now()).toISOString())
      const removed = users.delete(username)
      for (const apiKey of revokedKeys) announce({ type: 'revoked', apiKey })
      if (removed) announce({ type: 'user-changed', username })
      return { removed, revokedKeys }
    }
  }
}
