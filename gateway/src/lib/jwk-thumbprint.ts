// RFC 7638 JWK thumbprints: one rule for every key keygate names by its value (registered keys,
// published key sets, DPoP proof keys).
import { sha256Base64url } from './sha256.js'

/** the required public members of each key type, in lexicographic order */
export const THUMBPRINT_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  EC: ['crv', 'kty', 'x', 'y'], OKP: ['crv', 'kty', 'x'], RSA: ['e', 'kty', 'n']
}

/**
 * The SHA-256 thumbprint (base64url) of `jwk`: the hash of its required members, as JSON in
 * lexicographic order without whitespace. Undefined for a key type without a thumbprint here, or
 * a required member that is not a string.
 */
export function jwkThumbprint (jwk: Readonly<Record<string, unknown>>): string | undefined {
  const members = typeof jwk.kty === 'string' && Object.hasOwn(THUMBPRINT_MEMBERS, jwk.kty) ? THUMBPRINT_MEMBERS[jwk.kty] : undefined
  if (members === undefined || members.some((name) => typeof jwk[name] !== 'string')) return undefined
  return sha256Base64url(`{${members.map((name) => `"${name}":${JSON.stringify(jwk[name])}`).join(',')}}`)
}
