// Tier aliases: a route that forwards into the path space a stronger route guards, on the same
// upstream. Routes match the raw path, so without rewrites longest-prefix matching gives every
// upstream path one route (a bearer catch-all "/" beside a signed /v1/clients/ never forwards a
// path under /v1/clients/: those are the signed route's), and the canonical-path rules stop
// encodings, "//" and ";" from dodging that. A rewrite, or an upstream URL with a path, maps one
// path space onto another, though: a bearer /reports/ rewritten to /v1/clients/ lets a token
// alone read what /v1/clients/ guards with a signature. Such a pair is warned about (routes check
// prints it, the gateway logs it at start and reload), never refused: it may be meant.
//
// The rule, exactly: routes W and S on the same upstream origin, W of a weaker tier (public <
// bearer < signed), are warned of when some method and upstream path reach the upstream through
// both, W changing the path on the way: a raw path W takes (the route table gives it to W) and
// one S takes (the table gives it to S) are forwarded as the same path, W's by its rewrite or its
// upstream URL's path, with the same method (HEAD counting as GET, which servers answer alike).
// A W that forwards paths unchanged is never warned of: the path it forwards is the path the
// client sent, which the route table gave to W and not to S; a stronger route rewritten onto it
// only adds a stricter way in. Checked on witness paths of the overlap of the two path spaces.
import type { AuthTier, RouteConfig } from './route.js'
import { RouteTable, routeMatchesPath } from './route-table.js'
import { forwardedPath } from './upstream-request.js'

const TIER_RANK: Record<AuthTier, number> = { public: 0, bearer: 1, signed: 2 }
/** who passes a route of this tier */
const PASSES: Record<AuthTier, string> = { public: 'a request with no credentials', bearer: 'a bearer token alone', signed: 'a signed request' }
/** what a route of this tier asks for */
const ASKS: Record<AuthTier, string> = { public: 'nothing', bearer: 'a bearer token', signed: 'a token and a signature' }

export interface RouteWarning {
  /** the weaker route, which forwards into the stronger one's path space */
  weak: RouteConfig
  strong: RouteConfig
  text: string
}

function originOf (route: RouteConfig): string | undefined {
  try {
    return new URL(route.upstream).origin
  } catch {
    return undefined
  }
}

/** Where a route's path space starts upstream: the forwarded form of its prefix (or exact path). */
const anchorOf = (route: RouteConfig): string => forwardedPath(route, route.prefix)

/** The raw path the route forwards as `upstreamPath`, if any. */
function rawPathFor (route: RouteConfig, upstreamPath: string): string | undefined {
  const anchor = anchorOf(route)
  if (route.exact) return upstreamPath === anchor ? route.prefix : undefined
  if (!upstreamPath.startsWith(anchor)) return undefined
  const raw = route.prefix + upstreamPath.slice(anchor.length)
  return routeMatchesPath(route.prefix, false, raw) && forwardedPath(route, raw) === upstreamPath ? raw : undefined
}

const sameMethod = (method: string): string => method === 'HEAD' ? 'GET' : method

/** A method with which some upstream path is reached through both routes, each taking its raw path; undefined when none. */
function aliasOf (table: RouteTable, weak: RouteConfig, strong: RouteConfig): { method: string } | undefined {
  // Witnesses: the start of each space, and a path under it that no route names (no route holds a
  // NUL), so that more specific routes exclude it only when they exclude the whole overlap.
  const witnesses = [anchorOf(weak), anchorOf(strong)].flatMap((anchor) => [anchor, `${anchor}\u0000`, `${anchor}/\u0000`])
  for (const upstreamPath of witnesses) {
    const weakRaw = rawPathFor(weak, upstreamPath)
    const strongRaw = weakRaw === undefined ? undefined : rawPathFor(strong, upstreamPath)
    // (weakRaw === upstreamPath: W forwards the path as the client sent it, which is W's own)
    if (weakRaw === undefined || strongRaw === undefined || weakRaw === upstreamPath) continue
    for (const method of weak.methods) {
      const strongMethod = strong.methods.find((m) => sameMethod(m) === sameMethod(method))
      if (strongMethod === undefined) continue
      const weakMatch = table.match(weakRaw, method)
      const strongMatch = table.match(strongRaw, strongMethod)
      if (weakMatch.kind === 'route' && weakMatch.route === weak && strongMatch.kind === 'route' && strongMatch.route === strong) {
        return { method }
      }
    }
  }
  return undefined
}

const space = (route: RouteConfig, path: string): string => route.exact ? path : `${path}...`

/** "/reports/... as /v1/clients/..." ("/v1/clients/..." when it is forwarded unchanged) */
function forwarding (route: RouteConfig): string {
  const [raw, upstream] = [space(route, route.prefix), space(route, anchorOf(route))]
  return raw === upstream ? raw : `${raw} as ${upstream}`
}

/** Every pair of routes where a weaker one forwards into a stronger one's path space on the same upstream. */
export function routeWarnings (routes: readonly RouteConfig[]): RouteWarning[] {
  const table = new RouteTable(routes)
  const warnings: RouteWarning[] = []
  for (const weak of routes) {
    for (const strong of routes) {
      if (TIER_RANK[weak.auth] >= TIER_RANK[strong.auth]) continue
      const origin = originOf(weak)
      if (origin === undefined || origin !== originOf(strong)) continue
      const alias = aliasOf(table, weak, strong)
      if (alias === undefined) continue
      warnings.push({
        weak,
        strong,
        text: `${weak.name} (${weak.auth}) forwards into the path space of ${strong.name} (${strong.auth}) on ${origin}: ` +
          `${weak.name} forwards ${forwarding(weak)}, ${strong.name} forwards ${forwarding(strong)}, so with ${alias.method} ${PASSES[weak.auth]} ` +
          `reaches what ${strong.name} guards with ${ASKS[strong.auth]}; ` +
          `give ${weak.name} auth: ${strong.auth}, or forward it elsewhere`
      })
    }
  }
  return warnings
}
