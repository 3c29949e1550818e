// KEYGATE_BOOTSTRAP_USERS, and the one rule for usernames that the environment and the user
// service both apply.
import { ConfigError } from './config-error.js'

export interface BootstrapUser {
  username: string
  password: string
}

export const USERNAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/

/**
 * `name:password,name2:password2`; a password may hold `:` but not `,`. Errors name an entry by
 * its number only: a mistyped entry may well hold a password, which must not reach a log.
 */
export function parseBootstrapUsers (text: string | undefined): BootstrapUser[] {
  if (text === undefined || text.trim() === '') return []
  return text.split(',').map((entry, index) => {
    const colon = entry.indexOf(':')
    const username = colon === -1 ? '' : entry.slice(0, colon).trim()
    const password = colon === -1 ? '' : entry.slice(colon + 1)
    if (colon === -1 || password.length === 0) {
      throw new ConfigError(`KEYGATE_BOOTSTRAP_USERS: entry ${index + 1} is not name:password (a password may not contain ",")`)
    }
    if (!USERNAME_PATTERN.test(username)) {
      throw new ConfigError(`KEYGATE_BOOTSTRAP_USERS: entry ${index + 1} has no valid username ` +
        '(letters, digits, . _ @ -, at most 64, starting with a letter or digit)')
    }
    return { username, password }
  })
}
