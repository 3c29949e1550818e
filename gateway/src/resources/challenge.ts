// The one place a refusal on a protected resource's route becomes its WWW-Authenticate challenge
// (RFC 6750 §3, RFC 9728 §5.1), for inline and decision mode alike (http/plugins/problems.ts):
// a 401 points the client at the resource's metadata, and says invalid_token when a token was
// sent and refused; a 403 for a missing scope says insufficient_scope and the scopes to ask for,
// so that a client can step up. No stage writes it; the problem+json body is unchanged. A route
// that takes tokens offers DPoP (RFC 9449) beside Bearer: its refusals of a token carry both
// challenges (tokenChallenges), or the DPoP one alone where DPoP is required.
import type { GatewayError } from '../errors.js'
import type { IssuerConfig } from '../idp/issuers.js'
import { issuerScopes } from './metadata.js'
import type { ProtectedResource } from './resource.js'

/** A value as an RFC 9110 quoted-string: `\` and `"` escaped, anything outside printable ASCII replaced. */
export function quoted (value: string): string {
  return `"${value.replace(/[\\"]/g, '\\$&').replace(/[^\x20-\x7e]/g, '?')}"`
}

/** RFC 6750 §3: error_description holds printable ASCII without `"` and `\`. */
function description (detail: string): string {
  return detail.replace(/"/g, '\'').replace(/\\/g, '/').replace(/[^\x20-\x7e]/g, '?').slice(0, 500)
}

/** the refusals of a token that was sent: RFC 6750's invalid_token */
const TOKEN_REFUSED = new Set(['INVALID_TOKEN', 'UNKNOWN_SIGNING_KEY'])

/**
 * The challenge for `error` on a route of `resource`, or undefined when the refusal has none (not
 * a 401 nor a missing scope). `issuer`: the IdP whose token the request carried, whose names for
 * the missing scopes the client must ask for.
 */
export function resourceChallenge (error: GatewayError, resource: ProtectedResource, issuer: IssuerConfig | undefined): string | undefined {
  const metadata = `resource_metadata=${quoted(resource.metadataUrl)}`
  if (error.statusCode === 401) {
    const refused = TOKEN_REFUSED.has(error.code) ? `, error="invalid_token", error_description=${quoted(description(error.message))}` : ''
    return `Bearer realm="keygate", ${metadata}${refused}`
  }
  if (error.code === 'INSUFFICIENT_SCOPE') {
    const wanted = error.extra?.requiredScopes
    const scopes = issuerScopes(issuer, Array.isArray(wanted) ? wanted.filter((s): s is string => typeof s === 'string') : [], resource)
    return `Bearer realm="keygate", error="insufficient_scope", scope=${quoted(scopes.join(' '))}, ${metadata}`
  }
  return undefined
}

/** What a token route offers besides Bearer: DPoP (RFC 9449), its algorithms, whether it is the only way in. */
export interface DpopOffer {
  /** the DPoP challenge's algs: the algorithms, space-separated */
  algs: string
  /** the route takes DPoP-bound tokens only */
  required: boolean
  /** the scheme the refused token came with, when one came */
  scheme: 'bearer' | 'dpop' | undefined
}

/** the refusals of a token route that a DPoP challenge answers too */
const TOKEN_CHALLENGED = new Set(['MISSING_TOKEN', 'INVALID_TOKEN', 'UNKNOWN_SIGNING_KEY', 'DPOP_REQUIRED', 'INVALID_DPOP_PROOF', 'USE_DPOP_NONCE'])
/** RFC 9449 §7.1, §12.2: the DPoP challenge's error for each of keygate's DPoP refusals */
const DPOP_ERRORS: Readonly<Record<string, string>> = {
  INVALID_DPOP_PROOF: 'invalid_dpop_proof',
  USE_DPOP_NONCE: 'use_dpop_nonce',
  DPOP_REQUIRED: 'invalid_token'
}

/**
 * The challenges of a token refusal on a route that takes DPoP (RFC 9449 §7.1): `bearer` (the
 * Bearer challenge the refusal has, or the resource's) beside `DPoP algs="..."`, which carries the
 * error when the refusal is DPoP's or the token came with the DPoP scheme; the DPoP one alone
 * where the route takes DPoP-bound tokens only. Undefined for any other refusal.
 */
export function tokenChallenges (error: GatewayError, bearer: string | undefined, offer: DpopOffer,
  resource: ProtectedResource | undefined): string[] | undefined {
  if (error.statusCode !== 401 || !TOKEN_CHALLENGED.has(error.code)) return undefined
  const refused = DPOP_ERRORS[error.code] ?? (offer.scheme === 'dpop' && error.code !== 'MISSING_TOKEN' ? 'invalid_token' : undefined)
  const parts = [`algs=${quoted(offer.algs)}`]
  if (resource !== undefined) parts.push(`resource_metadata=${quoted(resource.metadataUrl)}`)
  if (refused !== undefined) parts.push(`error="${refused}"`, `error_description=${quoted(description(error.message))}`)
  const dpop = `DPoP ${parts.join(', ')}`
  return offer.required ? [dpop] : [bearer ?? 'Bearer realm="keygate"', dpop]
}
