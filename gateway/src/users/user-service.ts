import { GatewayError } from '../errors.js'
import { USERNAME_PATTERN, type BootstrapUser } from '../config/bootstrap-users.js'
import type { RemoveUserResult, Store, UserRecord } from '../store/index.js'
import { hashPassword, verifyPassword } from './passwords.js'

export const MAX_PASSWORD_LENGTH = 1024

export interface UserService {
  /** the username when the password is right; INVALID_CREDENTIALS otherwise, in the same time */
  authenticate: (username: string, password: string) => Promise<string>
  /** creates the user or changes its password */
  upsert: (username: string, password: string) => Promise<UserRecord>
  bootstrap: (users: BootstrapUser[]) => Promise<void>
  /** the user; null when there is none (a name no user can have included) */
  get: (username: string) => Promise<UserRecord | null>
  /** every user, by name */
  list: () => Promise<UserRecord[]>
  /** removes the user and revokes every key of theirs, at every gateway, in one atomic step */
  remove: (username: string) => Promise<RemoveUserResult>
}

export function validateNewUser (username: string, password: string): void {
  if (!USERNAME_PATTERN.test(username)) {
    throw new GatewayError('VALIDATION_FAILED', 'A username is 1-64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit')
  }
  if (password.length < 8 || password.length > MAX_PASSWORD_LENGTH) {
    throw new GatewayError('VALIDATION_FAILED', `A password is 8 to ${MAX_PASSWORD_LENGTH} characters`)
  }
}

export function createUserService (store: Store): UserService {
  // An unknown user is checked against this hash, so it costs exactly what a wrong password costs.
  let dummyHash: Promise<string> | undefined
  const getDummyHash = async (): Promise<string> => await (dummyHash ??= hashPassword('keygate-no-such-user'))

  return {
    async authenticate (username, password) {
      const user = USERNAME_PATTERN.test(username) ? await store.getUser(username) : null
      const ok = await verifyPassword(password, user?.passwordHash ?? await getDummyHash())
      if (user === null || !ok) throw new GatewayError('INVALID_CREDENTIALS', 'The username or the password is wrong')
      return user.username
    },
    async upsert (username, password) {
      validateNewUser(username, password)
      return await store.putUser(username, await hashPassword(password))
    },
    async bootstrap (users) {
      for (const { username, password } of users) {
        const existing = await store.getUser(username)
        // Hashing costs ~0.2 s: skip users whose stored password already matches.
        if (existing !== null && await verifyPassword(password, existing.passwordHash)) continue
        await store.putUser(username, await hashPassword(password))
      }
    },
    async get (username) {
      return USERNAME_PATTERN.test(username) ? await store.getUser(username) : null
    },
    async list () {
      return await store.listUsers()
    },
    async remove (username) {
      if (!USERNAME_PATTERN.test(username)) return { removed: false, revokedKeys: [] }
      return await store.removeUser(username)
    }
  }
}
