// Users an identity provider vouches for (idp/): keygate's record of each, made on first use. Its
// name is `<issuer name>:<subject>`; a local username never holds ":", so an IdP's subject never
// meets a local user, nor another issuer's subject of the same text. The record's passwordHash
// holds no password (none ever matches: `authenticate` refuses every name with ":" before any
// hash is read) but the record's state: IDP_ACTIVE, or IDP_REMOVED_PREFIX and the second an
// operator removed the user. A removed IdP user stays on record so that the tokens issued before
// its removal stay refused; a token issued after it makes the user again, without keys.
import { ISSUER_NAME } from '../config/env.js'
import { GatewayError } from '../errors.js'

/** between the issuer's name and the subject in a keygate username; a local username never holds it */
export const IDP_USER_SEPARATOR = ':'
/** a subject keygate names a user after: printable ASCII without spaces, at most 255 (Google's, Entra's, Auth0's `auth0|...` fit) */
export const IDP_SUBJECT = /^[\x21-\x7e]{1,255}$/
/** `<issuer name>:<subject>`: the issuer's name (config/env.ts) and a subject as IDP_SUBJECT */
export const IDP_USERNAME_PATTERN = new RegExp(`^${ISSUER_NAME}${IDP_USER_SEPARATOR}${IDP_SUBJECT.source.slice(1)}`)
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
