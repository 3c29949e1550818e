// Which route a request belongs to. Matching is on the raw path as sent (no decoding), so the
// route that verifies a request is the route that forwards it. An exact path beats a prefix;
// among prefixes the longest (most specific) wins. A table is immutable: a reload builds a new
// one and swaps it in, and a request keeps the route it was matched to.
import type { RouteConfig } from './route.js'

export type RouteMatch =
  | { kind: 'route'; route: RouteConfig }
  | { kind: 'not-found' }
  | { kind: 'method-not-allowed'; allow: string[] }

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
    const candidates = this.#exact.get(path) ?? this.#longestPrefix(path)
    if (candidates.length === 0) return { kind: 'not-found' }
    const route = candidates.find((r) => r.methods.includes(method))
    if (route !== undefined) return { kind: 'route', route }
    return { kind: 'method-not-allowed', allow: [...new Set(candidates.flatMap((r) => r.methods))] }
  }

  /** the routes of the longest prefix that matches (several when they split the methods) */
  #longestPrefix (path: string): RouteConfig[] {
    const first = this.#prefixes.find((r) => routeMatchesPath(r.prefix, false, path))
    if (first === undefined) return []
    return this.#prefixes.filter((r) => r.prefix === first.prefix)
  }
}
