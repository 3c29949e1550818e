// What a client is told about a protected resource: its metadata document (RFC 9728 §2) and the
// scopes, said in the terms a client asks its authorization server for. An issuer whose
// `scopes.map` (or the resource's own `scopes.map`) turns its own scopes into keygate's is asked
// for its own names; an issuer without one is asked for keygate's names, which its tokens carry
// as they are.
import type { IssuerConfig } from '../idp/issuers.js'
import { policyScopes, type McpPolicy } from '../mcp-calls/policy.js'
import type { ProtectedResource } from './resource.js'

export interface ResourceMetadata {
  resource: string
  authorization_servers: string[]
  scopes_supported: string[]
  bearer_methods_supported: string[]
  resource_name: string
  resource_documentation?: string
  /** RFC 9449 §5.1: the algorithms DPoP proofs may use */
  dpop_signing_alg_values_supported?: string[]
  /** RFC 9449 §5.1: every token on the resource must be DPoP-bound */
  dpop_bound_access_tokens_required?: boolean
}

/**
 * The scopes to ask `issuer` for so that a token carries keygate's `scopes` on `resource`: the
 * names that map to them (through the resource's own map when it has one, else the issuer's), or
 * the names themselves. No issuer (keygate's own token): keygate's names.
 */
export function issuerScopes (issuer: IssuerConfig | undefined, scopes: readonly string[], resource?: ProtectedResource): string[] {
  const map = issuer === undefined ? undefined : (resource?.scopeMap ?? issuer.scopeMap)
  if (map === undefined) return [...scopes]
  const out = new Set<string>()
  for (const scope of scopes) {
    for (const [theirs, ours] of map) if (ours.includes(scope)) out.add(theirs)
  }
  // none of the issuer's scopes maps to them: keygate's names are the best a client can be told
  return out.size === 0 ? [...scopes] : [...out]
}

/** The resource's metadata: everything from configuration (its routes' scopes, its issuers in force). */
export function resourceMetadata (resource: ProtectedResource,
  routes: ReadonlyArray<{ resource?: ProtectedResource | undefined, scopes: readonly string[], mcp?: Pick<McpPolicy, 'toJSON'> | undefined, dpop?: string }>,
  issuers: readonly IssuerConfig[], dpopAlgorithms?: readonly string[]): ResourceMetadata {
  const its = routes.filter((route) => route.resource?.id === resource.id)
  // an MCP route's tools (resources, prompts, methods) may ask for more: a client asks for those when a call needs them
  // (the 403's challenge), but registers for what is listed here, so they are listed too
  const scopes = [...new Set(its
    .flatMap((route) => route.mcp === undefined ? route.scopes : [...route.scopes, ...policyScopes(route.mcp)]))]
  const servers = resource.issuers.map((name) => issuers.find((issuer) => issuer.name === name)).filter((issuer) => issuer !== undefined)
  const supported = new Set(servers.length === 0 ? scopes : servers.flatMap((issuer) => issuerScopes(issuer, scopes, resource)))
  return {
    resource: resource.id,
    authorization_servers: servers.map((issuer) => issuer.issuer),
    scopes_supported: [...supported].sort(),
    bearer_methods_supported: ['header'],
    resource_name: resource.name,
    ...(resource.documentation !== undefined && { resource_documentation: resource.documentation }),
    // DPoP (RFC 9449 §5.1): the algorithms proofs may use, and whether every token must be bound (the
    // resource requires it, or each of its routes does)
    ...(dpopAlgorithms !== undefined && {
      dpop_signing_alg_values_supported: [...dpopAlgorithms],
      dpop_bound_access_tokens_required: resource.dpopRequired || (its.length > 0 && its.every((route) => route.dpop === 'required'))
    })
  }
}
