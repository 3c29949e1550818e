// Users an identity provider vouches for (idp/): keygate's record of each, made on first use. Its
// name is `<issuer name>:<subject>`; a local username never holds ":", so an IdP's subject never
// meets a local user, nor another issuer's subject of the same text. The record's passwordHash
// holds no password (none ever matches: `authenticate` refuses every name with ":" before any
// hash is read) but the record's state: IDP_ACTIVE, or IDP_REMOVED_PREFIX and the second an
// operator removed the user. A removed IdP user stays on record so that the tokens issued before
// its removal stay refused; a token issued after it makes the user again, without keys.
import { GatewayError } from '../errors.js'

/** `<issuer name>:<subject>`: the issuer's name (idp/issuers.ts) and a subject of printable ASCII */
export const IDP_USERNAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}:[\x21-\x7e]{1,255}$/
export const IDP_ACTIVE = 'idp'
export const IDP_REMOVED_PREFIX = 'idp-removed:'

export const isIdpUsername = (username: string): boolean => IDP_USERNAME_PATTERN.test(username)

/** when an operator removed the IdP user whose record holds `passwordHash` (seconds), or undefined */
export function idpRemovedAt (passwordHash: string): number | undefined {
  if (!passwordHash.startsWith(IDP_REMOVED_PREFIX)) return undefined
  const seconds = Number(passwordHash.slice(IDP_REMOVED_PREFIX.length))
  return Number.isSafeInteger(seconds) ? seconds : 0
}

export const idpRemovedMarker = (seconds: number): string => `${IDP_REMOVED_PREFIX}${Math.floor(seconds)}`

/** INVALID_TOKEN for a token issued before its user was removed in keygate. */
export function removedIdpUserError (username: string): GatewayError {
  return new GatewayError('INVALID_TOKEN', `The user ${username} was removed in keygate after this token was issued: ` +
    'tokens issued before the removal are refused; a token the identity provider issues now makes the user again, without keys', {
    headers: { 'www-authenticate': 'Bearer realm="keygate", error="invalid_token"' }
  })
}
