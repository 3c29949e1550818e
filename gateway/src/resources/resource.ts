// A protected resource (RFC 9728, RFC 8707): a group of routes with one identifier, the absolute
// URL clients know the API by, which the route file names (docs/resource-server.md). The
// identifier is the external URL: every URL keygate tells a client about the resource (its
// metadata URL in a challenge, `resource` in the metadata) is made from it alone, never from a
// request's Host or X-Forwarded-* headers, which a client can forge.
import type { IssuerConfig } from '../idp/issuers.js'
import { isLoopbackHost } from '../remote-keys/key-set-fetch.js'

/** RFC 9728 §3: the well-known URI's path; a resource's own path follows it */
export const METADATA_PATH = '/.well-known/oauth-protected-resource'
/** how long a client may keep a resource's metadata (Cache-Control max-age, seconds) */
export const METADATA_MAX_AGE_SECONDS = 300

export interface ProtectedResource {
  /** the resource identifier: an absolute https URL (http on a loopback host, for tests), no query or fragment */
  readonly id: string
  /** resource_name */
  readonly name: string
  /** resource_documentation */
  readonly documentation: string | undefined
  /** the names (in the issuers file) of the issuers that mint tokens for it: its authorization servers */
  readonly issuers: readonly string[]
  /** other `aud` values a token for it may carry, besides its id */
  readonly audiences: readonly string[]
  /**
   * the IdP's scopes (or roles) -> keygate's, for tokens used on its routes, in place of the
   * issuer's `scopes.map`; undefined: the issuer's map applies
   */
  readonly scopeMap: ReadonlyMap<string, readonly string[]> | undefined
  /** every token on its routes must be DPoP-bound and sent with a proof (RFC 9449; its `dpop: required`) */
  readonly dpopRequired: boolean
  /** the id and the audiences: a token for it names one of these in `aud` */
  readonly accepted: ReadonlySet<string>
  /** where keygate serves its metadata: /.well-known/oauth-protected-resource + the id's path */
  readonly metadataPath: string
  /** the metadata's URL as clients reach it: the id's origin + metadataPath */
  readonly metadataUrl: string
}

/** Why `id` cannot be a resource identifier, or undefined when it can. */
export function resourceIdProblem (id: string): string | undefined {
  let url: URL
  try {
    url = new URL(id)
  } catch {
    return 'is not an absolute URL'
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    return 'must be an https URL (http only on a loopback host, for tests)'
  }
  if (id.includes('?') || id.includes('#')) return 'must have no query and no fragment (RFC 8707 §2)'
  if (url.username !== '' || url.password !== '') return 'must have no user or password'
  return undefined
}

/** A resource as the route file gives it. */
export interface ResourceFields {
  id: string
  name: string
  documentation?: string | undefined
  issuers: readonly string[]
  audiences?: readonly string[] | undefined
  scopes?: { map: Readonly<Record<string, string | readonly string[]>> } | undefined
  dpop?: 'required' | 'allowed' | undefined
}

/** The resource, from its configuration (its id checked by resourceIdProblem). */
export function protectedResource (entry: ResourceFields): ProtectedResource {
  const url = new URL(entry.id)
  const metadataPath = METADATA_PATH + (url.pathname === '/' ? '' : url.pathname)
  const resource = {
    id: entry.id,
    name: entry.name,
    documentation: entry.documentation,
    issuers: [...entry.issuers],
    audiences: [...entry.audiences ?? []],
    dpopRequired: entry.dpop === 'required',
    metadataPath,
    metadataUrl: url.origin + metadataPath
  }
  // not enumerable: a route shown as JSON (the admin API, routes check --json) lists id and audiences, not the set and map made of them
  return Object.defineProperties<Omit<ProtectedResource, 'accepted' | 'scopeMap'>>(resource, {
    accepted: { value: new Set([entry.id, ...entry.audiences ?? []]), enumerable: false },
    scopeMap: {
      value: entry.scopes === undefined
        ? undefined
        : new Map(Object.entries(entry.scopes.map).map(([from, to]) => [from, typeof to === 'string' ? [to] : [...to]])),
      enumerable: false
    }
  }) as ProtectedResource
}

/** The resources some route belongs to, each once, in the order the routes name them. */
export function resourcesOf (routes: ReadonlyArray<{ resource?: ProtectedResource | undefined }>): ProtectedResource[] {
  const seen = new Map<string, ProtectedResource>()
  for (const route of routes) if (route.resource !== undefined && !seen.has(route.resource.id)) seen.set(route.resource.id, route.resource)
  return [...seen.values()]
}

/**
 * The resources' issuers that are not in the issuers in force, in words: the route file names
 * issuers by the names the issuers file gives them, so the two are checked together wherever
 * both are known (at start, and on every reload).
 */
export function resourceIssuerProblems (routes: ReadonlyArray<{ resource?: ProtectedResource | undefined }>, issuers: readonly IssuerConfig[]): string[] {
  const known = new Set(issuers.map((issuer) => issuer.name))
  const problems: string[] = []
  for (const resource of resourcesOf(routes)) {
    for (const name of resource.issuers) {
      if (known.has(name)) continue
      problems.push(`resources: ${JSON.stringify(resource.id)} names the issuer ${JSON.stringify(name)}, which is not a trusted issuer ` +
        `(${known.size === 0 ? 'none is configured: KEYGATE_ISSUERS or KEYGATE_OIDC_ISSUER' : `known: ${[...known].join(', ')}`})`)
    }
  }
  return problems
}

/** The audiences of the resources that name `issuer`: tokens it mints for them pass its own audience check too. */
export function resourceAudiences (routes: ReadonlyArray<{ resource?: ProtectedResource | undefined }>, issuer: string): string[] {
  return resourcesOf(routes).filter((resource) => resource.issuers.includes(issuer)).flatMap((resource) => [...resource.accepted])
}
