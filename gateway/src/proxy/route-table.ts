// Which route a request belongs to. Matching is on the raw path as sent (no decoding), so the
// route that verifies a request is the route that forwards it. An exact path beats a prefix;
// among prefixes the longest (most specific) wins. A path with ";" (matrix parameters, which
// Tomcat and Spring drop) is matched without them, as such a backend reads it, and taken only by
// a route that allows them, with every ";" below the route's prefix. A table is immutable: a reload builds a new
// one and swaps it in, and a request keeps the route it was matched to.
import type { RouteConfig } from './route.js'

export type RouteMatch =
  | { kind: 'route'; route: RouteConfig }
  | { kind: 'not-found' }
  | { kind: 'method-not-allowed'; allow: string[] }
  /** a ";" the matched route does not take: 400 INVALID_TARGET, with this detail */
  | { kind: 'invalid-target'; detail: string }

/**
 * A prefix ending in "/" matches everything under it; one without matches itself and whole
 * segments under it ("/status" matches "/status" and "/status/x", not "/statusx").
 */
export function routeMatchesPath (prefix: string, exact: boolean, path: string): boolean {
  if (exact) return path === prefix
  return path.startsWith(prefix) && (prefix.endsWith('/') || path.length === prefix.length || path[prefix.length] === '/')
}

export class RouteTable {
  readonly routes: readonly RouteConfig[]
  readonly #exact = new Map<string, RouteConfig[]>()
  readonly #prefixes: RouteConfig[]

  constructor (routes: readonly RouteConfig[]) {
    this.routes = routes
    for (const route of routes) {
      if (!route.exact) continue
      const list = this.#exact.get(route.prefix) ?? []
      list.push(route)
      this.#exact.set(route.prefix, list)
    }
    this.#prefixes = routes.filter((route) => !route.exact).sort((a, b) => b.prefix.length - a.prefix.length)
  }

  match (path: string, method: string): RouteMatch {
    if (path.includes(';')) return this.#matchWithParams(path, method)
    const candidates = this.#exact.get(path) ?? this.#longestPrefix(path)
    if (candidates.length === 0) return { kind: 'not-found' }
    const route = candidates.find((r) => r.methods.includes(method))
    if (route !== undefined) return { kind: 'route', route }
    return { kind: 'method-not-allowed', allow: [...new Set(candidates.flatMap((r) => r.methods))] }
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

/** The path with each segment's matrix parameters (";" and what follows, up to the next "/") removed. */
export function withoutMatrixParams (path: string): string {
  return path.split('/').map((segment) => {
    const semicolon = segment.indexOf(';')
    return semicolon === -1 ? segment : segment.slice(0, semicolon)
  }).join('/')
}
