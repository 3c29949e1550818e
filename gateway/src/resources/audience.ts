// Tokens for this resource only (RFC 8707): an identity provider's token passes on a route when
// its `aud` names what the route accepts: the route's resource (its id or one of its audiences)
// when it belongs to one, the issuer's own audiences otherwise. Checked on every request, against
// the verified token's cached audiences (a set lookup or two): the token's verification is
// cached, which route it is used on is not.
import { GatewayError } from '../errors.js'
import type { IssuerConfig } from '../idp/issuers.js'
import type { ProtectedResource } from './resource.js'

/** What an audience check needs of a verified token. */
export interface AudienceBound {
  readonly issuer: IssuerConfig
  readonly audiences: ReadonlySet<string>
}

const refused = (detail: string): GatewayError => new GatewayError('INVALID_TOKEN', detail, {
  headers: { 'www-authenticate': 'Bearer realm="keygate", error="invalid_token"' }
})

const named = (audiences: ReadonlySet<string>): string => audiences.size === 0 ? 'no audience' : [...audiences].join(', ')

/** Throws INVALID_TOKEN when `token` is not for `resource` (or, without one, not for its issuer's audiences). */
export function checkAudience (token: AudienceBound, resource: ProtectedResource | undefined): void {
  if (resource === undefined) {
    for (const audience of token.issuer.audiences) if (token.audiences.has(audience)) return
    throw refused(`This token is for ${named(token.audiences)}; this route takes tokens of ${token.issuer.name} for ` +
      `${token.issuer.audiences.join(', ')}`)
  }
  if (!resource.issuers.includes(token.issuer.name)) {
    throw refused(`This route's resource ${resource.id} takes tokens from ${resource.issuers.join(', ')}, not from ${token.issuer.name}`)
  }
  for (const audience of token.audiences) if (resource.accepted.has(audience)) return
  throw refused(`This token is for ${named(token.audiences)}, not for ${resource.id}: ask ${token.issuer.name} for a token ` +
    `with resource=${resource.id}`)
}
