// What the route table offers one caller (the user API's GET /v1/routes, and the routes whose
// limits its usage read-outs list): the routes whose required scopes the caller has, each as a
// client developer needs to call it. Nothing about where or how a route forwards (upstream,
// rewrite, headers, identity token, timeouts): that is the operator's, shown by the admin API only.
import type { AuthTier, SignatureScheme } from '../auth/stage.js'
import type { RateLimitBy } from '../limits/rate-limit.js'
import { missingScopes } from '../users/scopes.js'
import type { RouteConfig } from './route.js'

/** One route as its caller sees it. */
export interface OfferedRoute {
  name: string
  /** one of the two: a prefix, or one exact path */
  prefix?: string
  path?: string
  methods: string[]
  tier: AuthTier
  /** the scopes a request must have, all of them */
  scopes: string[]
  /** signed routes: the schemes taken */
  signature?: SignatureScheme[]
  /** signed routes taking RFC 9421 with one label only: that label */
  signatureLabel?: string
  rateLimits: Array<{ by: RateLimitBy; limit: number; window: string; policy: string }>
}

/**
 * The routes `scopes` allow, in table order: those that require none, or only scopes in it. For a
 * user that is every route their bearer token or some key of theirs could call (a key may do less:
 * callableByKey).
 */
export function allowedRoutes<R extends Pick<RouteConfig, 'scopes'>> (routes: readonly R[], scopes: ReadonlySet<string>): R[] {
  return routes.filter((route) => missingScopes(route.scopes, scopes).length === 0)
}

/** Of the routes a user may call, those a key of theirs signs for: signed ones its scopes allow. */
export function callableByKey<R extends Pick<RouteConfig, 'scopes' | 'auth'>> (routes: readonly R[], keyScopes: ReadonlySet<string>): R[] {
  return allowedRoutes(routes, keyScopes).filter((route) => route.auth === 'signed')
}

/** A route as the caller sees it (no upstream, rewrite, header or other forwarding setting). */
export function offeredRoute (route: RouteConfig): OfferedRoute {
  const signed = route.auth === 'signed'
  return {
    name: route.name,
    ...(route.exact ? { path: route.prefix } : { prefix: route.prefix }),
    methods: [...route.methods],
    tier: route.auth,
    scopes: [...route.scopes],
    ...(signed && { signature: route.signature === 'any' ? ['seed', 'rfc9421'] : [route.signature] }),
    ...(signed && route.signature !== 'seed' && route.signatureLabel !== undefined && { signatureLabel: route.signatureLabel }),
    rateLimits: route.rateLimits.map(({ by, limit, window, policy }) => ({ by, limit, window, policy }))
  }
}
