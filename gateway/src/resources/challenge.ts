// The one place a refusal on a protected resource's route becomes its WWW-Authenticate challenge
// (RFC 6750 §3, RFC 9728 §5.1), for inline and decision mode alike (http/plugins/problems.ts):
// a 401 points the client at the resource's metadata, and says invalid_token when a token was
// sent and refused; a 403 for a missing scope says insufficient_scope and the scopes to ask for,
// so that a client can step up. No stage writes it; the problem+json body is unchanged.
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
