// Which route a request belongs to. Matching is on the raw path as sent (no decoding), so the
// route that verifies a request is the route that forwards it. An exact path beats a prefix;
// among prefixes the longest (most specific) wins. A path with ";" (matrix parameters, which
// Tomcat and Spring drop) is matched without them, as such a backend reads it, and taken only by
// a route that allows them, with every ";" below the route's prefix. A path a backend reads as a
// stronger route's (/V1/CLIENTS/42 beside a signed /v1/clients/: backend-paths.ts) is refused, not
// forwarded by the weaker route that matched it raw. A table is immutable: a reload builds a new
// one and swaps it in, and a request keeps the route it was matched to.
import { maskOf, normalisePath, type NormalisationMask } from './backend-paths.js'
import { asksMoreThan, type RouteConfig } from './route.js'
import { forwardedPath } from './upstream-request.js'

export type RouteMatch =
  | { kind: 'route'; route: RouteConfig }
  | { kind: 'not-found' }
  | { kind: 'method-not-allowed'; allow: string[] }
  /** a ";" the matched route does not take: 400 INVALID_TARGET, with this detail */
  | { kind: 'invalid-target'; detail: string }
  /** a path the upstream reads as one of `stronger`'s, matched raw by the weaker `route`: 400 PATH_ALIAS */
  | { kind: 'alias'; route: RouteConfig; stronger: RouteConfig; detail: string }

/**
 * A prefix ending in "/" matches everything under it; one without matches itself and whole
 * segments under it ("/status" matches "/status" and "/status/x", not "/statusx").
 */
export function routeMatchesPath (prefix: string, exact: boolean, path: string): boolean {
  if (exact) return path === prefix
  return path.startsWith(prefix) && (prefix.endsWith('/') || path.length === prefix.length || path[prefix.length] === '/')
}

/** A route's upstream path space as its backend reads it: the forwarded form of its prefix, normalised by its own setting. */
interface UpstreamSpace {
  route: RouteConfig
  mask: NormalisationMask
  /** the forwarded prefix (or exact path), normalised; without its trailing slash when the backend drops it */
  anchor: string
  exact: boolean
  /** the forwarded prefix as it is, to tell a normalisation alias from a rewrite onto the space (route-aliases.ts warns of those) */
  rawAnchor: string
}

function upstreamSpace (route: RouteConfig): UpstreamSpace {
  const mask = maskOf(route.backendNormalises)
  const rawAnchor = forwardedPath(route, route.prefix)
  return { route, mask, anchor: normalisePath(rawAnchor, mask), exact: route.exact, rawAnchor }
}

function originOf (route: RouteConfig): string | undefined {
  try {
    return new URL(route.upstream).origin
  } catch {
    return undefined
  }
}

/**
 * For each route that a stronger route shares an upstream origin with, every route space on that
 * origin. Only routes on one origin count: an alias reaches a resource only where one backend
 * serves both paths (two origins that are one backend are the route file's to avoid).
 */
function aliasGuards (routes: readonly RouteConfig[]): Map<RouteConfig, readonly UpstreamSpace[]> {
  const byOrigin = new Map<string, RouteConfig[]>()
  for (const route of routes) {
    const origin = originOf(route)
    if (origin !== undefined) byOrigin.set(origin, [...(byOrigin.get(origin) ?? []), route])
  }
  const guards = new Map<RouteConfig, readonly UpstreamSpace[]>()
  for (const neighbours of byOrigin.values()) {
    const spaces = neighbours.map(upstreamSpace)
    for (const route of neighbours) {
      if (neighbours.some((other) => asksMoreThan(other, route))) guards.set(route, spaces)
    }
  }
  return guards
}

export class RouteTable {
  readonly routes: readonly RouteConfig[]
  readonly #exact = new Map<string, RouteConfig[]>()
  readonly #prefixes: RouteConfig[]
  /**
   * aliasGuards(): the only routes whose requests pay for the alias check. The rest (a signed
   * route with no stronger neighbour, routes alone on their upstream) cost nothing more.
   */
  readonly #aliasGuards: ReadonlyMap<RouteConfig, readonly UpstreamSpace[]>

  constructor (routes: readonly RouteConfig[]) {
    this.routes = routes
    for (const route of routes) {
      if (!route.exact) continue
      const list = this.#exact.get(route.prefix) ?? []
      list.push(route)
      this.#exact.set(route.prefix, list)
    }
    this.#prefixes = routes.filter((route) => !route.exact).sort((a, b) => b.prefix.length - a.prefix.length)
    this.#aliasGuards = aliasGuards(routes)
  }

  /** Whether a path this route takes may be refused as another spelling of a stronger route's (400 PATH_ALIAS). */
  guardsAgainstAliases (route: RouteConfig): boolean {
    return this.#aliasGuards.has(route)
  }

  match (path: string, method: string): RouteMatch {
    if (path.includes(';')) return this.#matchWithParams(path, method)
    const candidates = this.#exact.get(path) ?? this.#longestPrefix(path)
    if (candidates.length === 0) return { kind: 'not-found' }
    const route = candidates.find((r) => r.methods.includes(method))
    if (route !== undefined) return this.#aliasGuards.has(route) ? this.#unlessAlias(route, path, method) : { kind: 'route', route }
    return { kind: 'method-not-allowed', allow: [...new Set(candidates.flatMap((r) => r.methods))] }
  }

  /**
   * The route, unless the path it forwards reads, to its backend, as a path of a route that asks
   * more: the route whose space holds the normalised path (an exact path first, then the longest
   * anchor, as the table matches raw paths), for this method (any method: the canonical path would
   * get 405, which an alias must not get around). A rewrite that forwards onto a stronger route's
   * space as it is, is the route file's choice, warned of (route-aliases.ts), not refused here.
   */
  #unlessAlias (route: RouteConfig, path: string, method: string): RouteMatch {
    const spaces = this.#aliasGuards.get(route) as readonly UpstreamSpace[]
    const upstream = forwardedPath(route, path)
    const normalised = new Map<NormalisationMask, string>()
    let owners: UpstreamSpace[] = []
    for (const space of spaces) {
      let read = normalised.get(space.mask)
      if (read === undefined) {
        read = normalisePath(upstream, space.mask)
        normalised.set(space.mask, read)
      }
      // (a backend that drops a trailing slash has the anchor /x hold /x, /x/ and /x/... alike)
      if (!routeMatchesPath(space.anchor, space.exact, read)) continue
      const best = owners[0]
      const better = best === undefined || (space.exact && !best.exact) ||
        (space.exact === best.exact && space.anchor.length > best.anchor.length)
      if (better) owners = [space]
      else if (space.exact === best.exact && space.anchor.length === best.anchor.length) owners.push(space)
    }
    const taking = owners.filter((space) => space.route.methods.includes(method))
    const stronger = (taking.length > 0 ? taking : owners).find((space) => asksMoreThan(space.route, route))
    if (stronger === undefined || routeMatchesPath(stronger.rawAnchor, stronger.exact, upstream)) return { kind: 'route', route }
    return { kind: 'alias', route, stronger: stronger.route, detail: aliasDetail(path, route, stronger.route) }
  }

  /**
   * The route of the path as a backend that drops matrix parameters reads it, so a ";" can never
   * steer a request past a more specific route (/v1/clients;x/42 is /v1/clients/42's). That route
   * must allow them, and the raw path must match its prefix too: the ";" only below the prefix,
   * which is matched literally and replaced by the rewrite as usual.
   */
  #matchWithParams (path: string, method: string): RouteMatch {
    const match = this.match(withoutMatrixParams(path), method)
    if (match.kind !== 'route') return match
    const { route } = match
    if (!route.allowMatrixParams) {
      return {
        kind: 'invalid-target',
        detail: 'The request path has a ";" (matrix parameters, which servers such as Tomcat and Spring drop from the path), ' +
          'and the route for this path does not take them'
      }
    }
    if (!routeMatchesPath(route.prefix, route.exact, path)) {
      return {
        kind: 'invalid-target',
        detail: `The request path has a ";" (matrix parameters) inside its route's prefix: only the path below ${route.prefix} may carry them`
      }
    }
    return match
  }

  /** the routes of the longest prefix that matches (several when they split the methods) */
  #longestPrefix (path: string): RouteConfig[] {
    const first = this.#prefixes.find((r) => routeMatchesPath(r.prefix, false, path))
    if (first === undefined) return []
    return this.#prefixes.filter((r) => r.prefix === first.prefix)
  }
}

const ASKS = { public: 'no credentials', bearer: 'a bearer token', agent: 'a signed agent\'s signature', signed: 'a bearer token and a signature' } as const
const READS = { case: 'folds case', slash: 'adds or drops a trailing slash', trim: 'trims trailing dots and spaces from a segment' } as const

function aliasDetail (path: string, weak: RouteConfig, strong: RouteConfig): string {
  const where = strong.exact ? `the path ${strong.prefix}` : `a path under ${strong.prefix}`
  const scopes = strong.scopes.length > 0 ? ` and the scopes ${strong.scopes.join(' ')}` : ''
  const reads = strong.backendNormalises.map((n) => READS[n])
  const backend = reads.length > 1 ? `${reads.slice(0, -1).join(', ')} or ${reads.at(-1) as string}` : (reads[0] ?? 'decodes %XX')
  return `The path ${path} is, to a backend that ${backend}, ${where}, which route ${strong.name} guards (${strong.auth}${scopes}); ` +
    `route ${weak.name} (${weak.auth}) does not forward it. Send it as ${strong.name} spells it (${strong.exact ? strong.prefix : `${strong.prefix}...`}), ` +
    `with ${ASKS[strong.auth]}${scopes}`
}

/** The path with each segment's matrix parameters (";" and what follows, up to the next "/") removed. */
export function withoutMatrixParams (path: string): string {
  return path.split('/').map((segment) => {
    const semicolon = segment.indexOf(';')
    return semicolon === -1 ? segment : segment.slice(0, semicolon)
  }).join('/')
}
