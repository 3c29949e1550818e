import { GatewayError } from '../errors.js'
import { USERNAME_PATTERN, type BootstrapUser } from '../config/bootstrap-users.js'
import type { RemoveUserResult, Store, UserRecord } from '../store/index.js'
import { IDP_ACTIVE, idpRemovedAt, idpRemovedMarker, isIdpUsername, removedIdpUserError } from './idp-users.js'
import { hashPassword, verifyPassword } from './passwords.js'
import { normaliseScopes } from './scopes.js'

export const MAX_PASSWORD_LENGTH = 1024

export interface UserService {
  /**
   * the user when the password is right (its id and credential go into the token, so they are
   * those of the very record whose password was checked); INVALID_CREDENTIALS otherwise, in the same time
   */
  authenticate: (username: string, password: string) => Promise<UserRecord>
  /**
   * Creates the user or changes its password. With `scopes` (checked: VALIDATION_FAILED naming a
   * bad one) the user's scopes become those; without, an existing user keeps theirs and a new one
   * has none.
   */
  upsert: (username: string, password: string, scopes?: string[]) => Promise<UserRecord>
  /**
   * Replaces the user's scopes (checked as for upsert); every gateway on the store sees the change
   * within a second, and every key of the user loses what the user lost at once. null: no such user.
   */
  setScopes: (username: string, scopes: string[]) => Promise<UserRecord | null>
  bootstrap: (users: BootstrapUser[]) => Promise<void>
  /** the user; null when there is none (a name no user can have included) */
  get: (username: string) => Promise<UserRecord | null>
  /** every user, by name */
  list: () => Promise<UserRecord[]>
  /**
   * removes the user and revokes every key of theirs, at every gateway, in one atomic step; an IdP
   * user (idp-users.ts) stays on record as removed, so the tokens issued before stay refused
   */
  remove: (username: string) => Promise<RemoveUserResult>
  /**
   * The record of the IdP user a verified token (issued at `issuedAt`, seconds) stands for: as it
   * is, or made now when there is none, or made again when it was removed before the token was
   * issued; INVALID_TOKEN when it was removed after.
   */
  provisionIdpUser: (username: string, issuedAt: number) => Promise<UserRecord>
}

/** names an operator may look up, change and remove: local users and IdP users */
const knownName = (username: string): boolean => USERNAME_PATTERN.test(username) || isIdpUsername(username)

export function validateNewUser (username: string, password: string): void {
  if (!USERNAME_PATTERN.test(username)) {
    throw new GatewayError('VALIDATION_FAILED', 'A username is 1-64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit')
  }
  if (password.length < 8 || password.length > MAX_PASSWORD_LENGTH) {
    throw new GatewayError('VALIDATION_FAILED', `A password is 8 to ${MAX_PASSWORD_LENGTH} characters`)
  }
}

export interface UserServiceOptions {
  /**
   * Hears each user this process changed or removed, once the store has it: the process's own
   * cache of users (user-scopes.ts) drops it at once, before the change is answered, rather than
   * when the store's announcement comes back (which tells the other gateways, within a second).
   */
  onChanged?: (username: string) => void
  /** the cost of the hashes it writes (KEYGATE_PASSWORD_SCRYPT_LOG_N; default SCRYPT_LOG_N) */
  scryptLogN?: number
}

export function createUserService (store: Store, { onChanged, scryptLogN }: UserServiceOptions = {}): UserService {
  // An unknown user is checked against this hash, so it costs exactly what a wrong password costs
  // for a user whose hash this process wrote.
  let dummyHash: Promise<string> | undefined
  const getDummyHash = async (): Promise<string> => await (dummyHash ??= hashPassword('keygate-no-such-user', scryptLogN))

  return {
    async authenticate (username, password) {
      const user = USERNAME_PATTERN.test(username) ? await store.getUser(username) : null
      const ok = await verifyPassword(password, user?.passwordHash ?? await getDummyHash())
      if (user === null || !ok) throw new GatewayError('INVALID_CREDENTIALS', 'The username or the password is wrong')
      return user
    },
    async upsert (username, password, scopes) {
      validateNewUser(username, password)
      const checked = scopes === undefined ? undefined : normaliseScopes(scopes)
      const user = await store.putUser(username, await hashPassword(password, scryptLogN), checked)
      onChanged?.(username)
      return user
    },
    async setScopes (username, scopes) {
      const checked = normaliseScopes(scopes)
      if (!knownName(username)) return null
      const user = await store.setUserScopes(username, checked)
      onChanged?.(username)
      return user
    },
    async bootstrap (users) {
      for (const { username, password } of users) {
        const existing = await store.getUser(username)
        // Hashing costs ~0.2 s: skip users whose stored password already matches.
        if (existing !== null && await verifyPassword(password, existing.passwordHash)) continue
        await store.putUser(username, await hashPassword(password, scryptLogN))
        onChanged?.(username)
      }
    },
    async get (username) {
      if (!knownName(username)) return null
      const user = await store.getUser(username)
      return user === null || idpRemovedAt(user.passwordHash) !== undefined ? null : user
    },
    async list () {
      return (await store.listUsers()).filter((user) => idpRemovedAt(user.passwordHash) === undefined)
    },
    async remove (username) {
      if (!knownName(username)) return { removed: false, revokedKeys: [] }
      if (isIdpUsername(username) && await this.get(username) === null) return { removed: false, revokedKeys: [] }
      const removal = await store.removeUser(username)
      if (isIdpUsername(username) && removal.removed) await store.putUser(username, idpRemovedMarker(Date.now() / 1000))
      onChanged?.(username)
      return removal
    },
    async provisionIdpUser (username, issuedAt) {
      const existing = await store.getUser(username)
      const removedAt = existing === null ? undefined : idpRemovedAt(existing.passwordHash)
      if (existing !== null && removedAt === undefined) return existing
      if (removedAt !== undefined && issuedAt <= removedAt) throw removedIdpUserError(username)
      // a removed user made again is another incarnation: a new id, so nothing of the old one applies
      if (removedAt !== undefined) await store.removeUser(username)
      const user = await store.putUser(username, IDP_ACTIVE)
      onChanged?.(username)
      return user
    }
  }
}
