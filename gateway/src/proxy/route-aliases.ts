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
//
// Aliases a backend makes (case folding, a trailing slash, trimmed dots and spaces) are refused at
// request time (route-table.ts, 400 PATH_ALIAS) as far as each stronger route's backendNormalises
// says; routes check prints what that protects, and warns where a route leaves one open.
import { NORMALISATION_BACKENDS, PATH_NORMALISATIONS } from './backend-paths.js'
import { asksMoreThan, TIER_RANK, type AuthTier, type RouteConfig } from './route.js'
import { RouteTable, routeMatchesPath } from './route-table.js'
import { forwardedPath } from './upstream-request.js'
/** who passes a route of this tier */
const PASSES: Record<AuthTier, string> = {
  public: 'a request with no credentials', bearer: 'a bearer token alone', agent: 'a signed agent', signed: 'a signed request'
}
/** what a route of this tier asks for */
const ASKS: Record<AuthTier, string> = { public: 'nothing', bearer: 'a bearer token', agent: 'a signed agent\'s signature', signed: 'a token and a signature' }

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

/** The routes on the same upstream origin that ask less than `strong`: those whose paths are checked for its aliases. */
function weakerNeighbours (routes: readonly RouteConfig[], strong: RouteConfig): RouteConfig[] {
  const origin = originOf(strong)
  return origin === undefined ? [] : routes.filter((weak) => weak !== strong && originOf(weak) === origin && asksMoreThan(strong, weak))
}

const named = (routes: readonly RouteConfig[]): string => routes.map((r) => `${r.name} (${r.auth})`).join(', ')

/**
 * For each route with a weaker route on its upstream: the spellings of its paths keygate refuses
 * on those routes (400 PATH_ALIAS), by its backendNormalises, and the backends that protects.
 */
export function aliasGuards (routes: readonly RouteConfig[]): string[] {
  return routes.flatMap((strong) => {
    const weaker = weakerNeighbours(routes, strong)
    if (weaker.length === 0) return []
    const guarded = strong.backendNormalises.map((n) => `${NORMALISATION_BACKENDS[n].name}: ${NORMALISATION_BACKENDS[n].backends}`)
    return [`alias guard: ${strong.name} (${strong.auth}) on ${originOf(strong) as string}, against ${named(weaker)}: ` +
      (guarded.length === 0 ? 'percent-decoding only (backendNormalises: [])' : `protects backends with ${guarded.join('; ')}`)]
  })
}

/** A route whose backendNormalises leaves out a normalisation while a weaker route shares its upstream. */
function openAliasWarnings (routes: readonly RouteConfig[]): RouteWarning[] {
  return routes.flatMap((strong) => {
    const weaker = weakerNeighbours(routes, strong)
    const open = PATH_NORMALISATIONS.filter((n) => !strong.backendNormalises.includes(n))
    const [weak] = weaker
    if (weak === undefined || open.length === 0) return []
    const backends = open.map((n) => `${NORMALISATION_BACKENDS[n].name}: ${NORMALISATION_BACKENDS[n].backends}`).join('; ')
    return [{
      weak,
      strong,
      text: `${strong.name} (${strong.auth}) has backendNormalises: [${strong.backendNormalises.join(', ')}], so ${named(weaker)} on ` +
        `${originOf(strong) as string} forward its paths spelled with ${backends}; ` +
        `keep it only if ${strong.name}'s backend does none of that, or add ${open.join(', ')} to its backendNormalises`
    }]
  })
}

/**
 * Every pair of routes where a weaker one forwards into a stronger one's path space on the same
 * upstream, then every route that leaves a normalisation's aliases open to a weaker neighbour.
 */
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
  return [...warnings, ...openAliasWarnings(routes)]
}
