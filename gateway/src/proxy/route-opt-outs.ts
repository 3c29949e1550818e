// Routes that opt out of a rule keygate enforces by default, and what that lets through: warned of
// like tier aliases (route-aliases.ts), by routes check and in the log at start and reload, never
// refused: the route file says it is meant.
import type { RouteConfig } from './route.js'

export interface RouteOptOut {
  route: RouteConfig
  text: string
}

/** Every signed route that takes the seed scheme and verifies bodies starting with a target byte (seedBodyBoundary: unchecked). */
export function routeOptOuts (routes: readonly RouteConfig[]): RouteOptOut[] {
  return routes
    .filter((r) => r.auth === 'signed' && r.signature !== 'rfc9421' && r.seedBodyBoundary === 'unchecked')
    .map((route) => ({
      route,
      text: `${route.name} (signed) has seedBodyBoundary: unchecked: it verifies seed-signed bodies that start with a byte a target may hold, ` +
        'so one seed signature also authorizes the requests its bytes split into another way (POST /x/ with body a=1 is also ' +
        'POST /x/a=1 with none; DELETE /x/42 is also DELETE /x/ with body 42), on this route and on any route that takes the same key; ' +
        'sign such bodies with RFC 9421 (Content-Digest) instead, and drop the option'
    }))
}
