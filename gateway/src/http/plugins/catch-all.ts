/**
 * The proxy's own Fastify routes: every request that is not one of keygate's endpoints lands on
 * them. The metrics and the docs name such requests by their business route instead.
 */
export const PROXY_ROUTE_URLS: ReadonlySet<string> = new Set(['/', '/*'])
