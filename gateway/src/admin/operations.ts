// What an operator can do to users and keys, on the services every gateway uses (users/, keys/):
// the one place these operations are defined. The admin API serves them over HTTP; the operator
// CLI runs them directly on the store (bootstrapping) or through the admin API (cli/admin-client.ts
// implements the same interface), so both print the same things.
import { keyView, type KeyView } from '../keys/key-view.js'
import { keyStatus, type KeyRegistry, type KeyStatus, type KeyUpdate } from '../keys/key-registry.js'
import type { KeyRecord, UserRecord } from '../store/index.js'
import type { UserService } from '../users/user-service.js'
import { GatewayError } from '../errors.js'
import { decodeCursor, pageOf, type Page, type PageRequest } from '../lib/paging.js'

/** A user as operators see it: never the password hash. */
export interface UserSummary {
  username: string
  createdAt: string
  /** when the password was last set */
  updatedAt: string
  /** keys neither revoked nor expired */
  activeKeys: number
  /** every key of the user's, revoked and expired ones included */
  keys: number
  /** what the user may do; each key of theirs has some of these (users/scopes.ts) */
  scopes: string[]
}

/** A key as operators see it: whose it is, and what its owner sees. */
export type OperatorKey = { owner: string } & KeyView

/** One key in full: with its public key (PEM; absent on a tombstone: a revoked key past its retention). */
export type OperatorKeyDetail = OperatorKey & { publicKey?: string }

/**
 * What an operator sets on a user (PUT /v1/users/{name}, `keygate users add|passwd|scopes`). A new
 * user needs a password; an existing one keeps what is not given (its password, its scopes).
 */
export interface UserInput {
  password?: string
  scopes?: string[]
}

export interface UserPut {
  user: UserSummary
  /** false: the user existed, and its password was changed */
  created: boolean
}

export interface UserRemoval {
  username: string
  /** the keys this removal revoked (keys revoked before are not listed) */
  revokedKeys: string[]
}

/** What an operator changes on a key (PATCH /v1/keys/{apiKey}, `keygate keys update`). */
export type KeyChanges = KeyUpdate

export type KeyChange =
  | { outcome: 'updated'; key: OperatorKey }
  /** a revoked or expired key is left as it is: it can never sign again, so there is nothing to change */
  | { outcome: 'revoked' | 'expired'; key: OperatorKey }

export interface KeyRevocation {
  key: OperatorKey
  /** the key was revoked before this call (`key.revokedAt` says when) */
  alreadyRevoked: boolean
}

export interface Operations {
  /** one page of the users, by name (VALIDATION_FAILED for a bad limit or cursor) */
  listUsers: (page?: PageRequest) => Promise<Page<UserSummary>>
  /** null when there is no such user */
  getUser: (username: string) => Promise<UserSummary | null>
  /** creates the user, or sets its password (the password rules of users/user-service.ts) */
  putUser: (username: string, input: UserInput) => Promise<UserPut>
  /** null when there is no such user */
  removeUser: (username: string) => Promise<UserRemoval | null>
  /** one page of every key, or of one user's, newest first (VALIDATION_FAILED for a bad limit or cursor) */
  listKeys: (user?: string, page?: PageRequest) => Promise<Page<OperatorKey>>
  /** null when no such key was ever registered */
  getKey: (apiKey: string) => Promise<OperatorKeyDetail | null>
  /** revokes the key for every gateway on the store; null when no such key was ever registered */
  revokeKey: (apiKey: string) => Promise<KeyRevocation | null>
  /**
   * Changes the key's scopes (some of its owner's) and/or expiry, for every gateway on the store
   * within a second; null when no such key was ever registered (VALIDATION_FAILED for bad values)
   */
  updateKey: (apiKey: string, changes: KeyChanges) => Promise<KeyChange | null>
}

export const operatorKey = (record: KeyRecord & { status: KeyStatus }): OperatorKey => ({ owner: record.owner, ...keyView(record) })

/**
 * A key with its public key, its properties in the order the admin API's serialiser writes them
 * (required ones first, then keyType, expiresAt, revokedAt, then publicKey, optional since tombstones
 * have none): the CLI's direct way prints the same JSON.
 */
const operatorKeyDetail = (record: KeyRecord & { status: KeyStatus }): OperatorKeyDetail => {
  const { owner, apiKey, name, createdAt, lastUsedAt, status, scopes, ...optional } = operatorKey(record)
  return { owner, apiKey, name, createdAt, lastUsedAt, status, scopes, ...optional, ...(record.publicKey !== undefined && { publicKey: record.publicKey }) }
}

const invalidUserInput = (field: string, message: string): GatewayError =>
  new GatewayError('VALIDATION_FAILED', message, { extra: { errors: [{ field, message }] } })

export function createOperations ({ users, keys }: { users: UserService; keys: KeyRegistry }): Operations {
  const summary = async (user: UserRecord): Promise<UserSummary> => {
    const owned = await keys.listAll(user.username)
    return {
      username: user.username,
      createdAt: user.createdAt,
      updatedAt: user.updatedAt,
      activeKeys: owned.filter((k) => k.status === 'active').length,
      keys: owned.length,
      scopes: user.scopes
    }
  }
  return {
    async listUsers (page = {}) {
      // the key after which the page starts: a username (cursors hold any string; names are checked where users are made)
      const after = page.cursor === undefined ? undefined : (decodeCursor(page.cursor, 1, (name) => name.length > 0)[0] as string)
      const listed = pageOf(await users.list(), page, (user) => [user.username], after === undefined ? undefined : (user) => user.username > after)
      return { items: await Promise.all(listed.items.map(summary)), nextCursor: listed.nextCursor }
    },
    async getUser (username) {
      const user = await users.get(username)
      return user === null ? null : await summary(user)
    },
    async putUser (username, { password, scopes }) {
      if (password !== undefined) {
        const existed = await users.get(username) !== null
        return { user: await summary(await users.upsert(username, password, scopes)), created: !existed }
      }
      if (scopes === undefined) throw invalidUserInput('password', 'give a password, scopes or both: the changes to make')
      const user = await users.setScopes(username, scopes)
      if (user === null) throw invalidUserInput('password', `there is no user ${username}: a new user needs a password`)
      return { user: await summary(user), created: false }
    },
    async removeUser (username) {
      const { removed, revokedKeys } = await users.remove(username)
      return removed ? { username, revokedKeys } : null
    },
    async listKeys (user, page) {
      const listed = await keys.list(user, page)
      return { items: listed.items.map(operatorKey), nextCursor: listed.nextCursor }
    },
    async getKey (apiKey) {
      const record = await keys.get(apiKey)
      return record === null ? null : operatorKeyDetail(record)
    },
    async revokeKey (apiKey) {
      const { outcome, record } = await keys.revoke(apiKey)
      if (outcome === 'not-found' || record === null) return null
      return { key: operatorKey({ ...record, status: keyStatus(record, Date.now()) }), alreadyRevoked: outcome === 'already-revoked' }
    },
    async updateKey (apiKey, changes) {
      const { outcome, record } = await keys.update(apiKey, changes)
      if (outcome === 'not-found' || record === null) return null
      return { outcome, key: operatorKey(record) }
    }
  }
}
