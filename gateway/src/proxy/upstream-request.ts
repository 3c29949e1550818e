// What the upstream receives for a verified request: the route's rewrite applied to the path, the
// client's headers minus anything that could pass for the gateway's word or for a hop-by-hop
// header, or change the request's meaning (method and URL overrides: OVERRIDE_HEADERS), the
// route's own header changes, and then the gateway's identity headers, written last
// (identity.ts). The body is the exact bytes received.
import type { IncomingHttpHeaders } from 'node:http'
import { BODYLESS_METHODS, pathOf } from '#client/protocol'
import type { AuthState } from '../auth/stage.js'
import type { ProxyHop } from '../lib/client-address.js'
import { connectionListed } from '../lib/http-headers.js'
import { identityHeaderNames, writeIdentity } from './identity.js'
import type { RouteConfig } from './route.js'

/** What the proxy knows about a request it forwards. */
export interface ForwardState {
  route: RouteConfig
  /** the exact bytes received, once read */
  body?: Buffer
  identityToken?: string
  /** on limited routes: the RateLimit fields for the upstream's answer, over any the upstream sent (limits/limiter.ts) */
  answerHeaders?: Readonly<Record<string, string | undefined>>
}

declare module 'fastify' {
  interface FastifyRequest {
    /** a business request: its route, and its body and identity token once known; null elsewhere */
    forward: ForwardState | null
  }
}

/** The client's request (downstream), as the upstream request is made from it. */
export interface DownstreamRequest {
  method: string
  /** the raw request target: path, and ?query when there is one */
  target: string
  headers: IncomingHttpHeaders
  /** the client's address */
  ip: string
  /** through a trusted proxy: the forwarding headers to pass on (http/plugins/client-address.ts) */
  proxyHop?: ProxyHop | null
}

export interface UpstreamRequest {
  origin: string
  method: string
  /** path and query, as the upstream receives them */
  path: string
  headers: IncomingHttpHeaders
  body: Buffer | undefined
  /** the wait for the answer's headers */
  timeoutMs: number
  /** the longest silence between two bytes of the answer's body: timeoutMs, or an MCP route's stream idle bound */
  idleMs: number
}

/**
 * Never forwarded from the client: keygate's own credentials (a DPoP proof among them), the fields keygate answers with
 * (RateLimit, RateLimit-Policy: a request's copy is the client's invention), framing the gateway sets itself,
 * hop-by-hop headers (undici refuses some, which would turn a good request into a 502), and the
 * forwarding headers the gateway writes itself (from a trusted proxy, it passes that proxy's on).
 */
const NEVER_FORWARDED = new Set(['authorization', 'x-api-signature', 'dpop', 'ratelimit', 'ratelimit-policy', 'content-length', 'transfer-encoding',
  'expect', 'keep-alive', 'upgrade', 'proxy-connection', 'http2-settings', 'te', 'trailer', 'forwarded', 'x-forwarded-for',
  'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'host', 'connection'])

/**
 * Headers that tell an upstream honouring them to act on another method or path than the request
 * line's, which is what the signature covers: never forwarded, on any route, unless the route
 * names one in keepHeaders. (Underscore spellings count too: names are compared with "_" as "-".)
 */
export const OVERRIDE_HEADERS: readonly string[] = ['x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-url', 'x-rewrite-url']

/**
 * keygate's namespaces: a client header of either is never forwarded (any name, `_` spelling too).
 * Only keygate writes them: the identity headers, the identity token, the digest to check.
 */
const KEYGATE_NAMESPACES: readonly string[] = ['x-gateway-', 'x-keygate-']

const inKeygateNamespace = (normalised: string): boolean => KEYGATE_NAMESPACES.some((prefix) => normalised.startsWith(prefix))

/**
 * Of NEVER_FORWARDED, what a proxy forwarding in keygate's stead (decision mode) must drop itself:
 * the client's credentials, keygate's answer fields, and the forwarding headers a proxy passes on
 * unless told (its own X-Forwarded-For and -Proto it writes; framing and hop-by-hop it handles).
 */
const PROXY_DROPS: readonly string[] = ['authorization', 'x-api-signature', 'dpop', 'ratelimit', 'ratelimit-policy', 'forwarded', 'x-forwarded-host',
  'x-real-ip']

/**
 * The client headers a proxy that forwards in keygate's stead (decision mode) must remove so that
 * the upstream receives what inline mode sends it: PROXY_DROPS, the override headers the route
 * does not keep, its removeHeaders, and each of `present` (the client's header names, lower case)
 * in keygate's namespaces. Names keygate itself sets on the request are the caller's to leave out.
 */
export function droppedByProxy (route: RouteConfig, present: Iterable<string>): string[] {
  const names = new Set([...PROXY_DROPS, ...OVERRIDE_HEADERS.filter((name) => !route.keepHeaders.includes(name)), ...route.removeHeaders])
  for (const name of present) if (inKeygateNamespace(name.replaceAll('_', '-'))) names.add(name)
  return [...names]
}

/** What every request of a route needs and the route config does not spell out: computed once per route. */
interface CompiledRoute {
  origin: string
  /** the Host header the upstream receives */
  host: string
  basePath: string
  /** client headers never forwarded on this route */
  dropped: Set<string>
  /** the route's removeHeaders: a trusted proxy's forwarding headers are not passed on either */
  removed: Set<string>
}
const compiled = new WeakMap<RouteConfig, CompiledRoute>()

function compile (route: RouteConfig): CompiledRoute {
  let result = compiled.get(route)
  if (result === undefined) {
    const upstream = new URL(route.upstream)
    result = {
      origin: upstream.origin,
      host: upstream.host,
      basePath: upstream.pathname.replace(/\/$/, ''),
      dropped: new Set([...NEVER_FORWARDED, ...OVERRIDE_HEADERS.filter((name) => !route.keepHeaders.includes(name)),
        ...identityHeaderNames(route), ...route.removeHeaders]),
      removed: new Set(route.removeHeaders)
    }
    compiled.set(route, result)
  }
  return result
}

/** The path the upstream receives: the route's rewrite applied, under the upstream URL's own path. */
export function forwardedPath (route: RouteConfig, path: string): string {
  return rewrite(route, compile(route), path)
}

function rewrite (route: RouteConfig, compiledRoute: CompiledRoute, path: string): string {
  let rewritten = path
  if (route.rewrite !== undefined) {
    const rest = route.exact ? '' : path.slice(route.prefix.length)
    // Only the prefix is replaced. When the prefix has no trailing slash ("/status"), the rest
    // starts at a segment boundary ("/x"), whose slash a rewrite ending in "/" already holds;
    // any further slash is the client's and is kept ("/c//x" stays "/internal//x").
    const boundary = !route.prefix.endsWith('/') && route.rewrite.endsWith('/') && rest.startsWith('/')
    rewritten = route.rewrite + (boundary ? rest.slice(1) : rest)
  }
  return compiledRoute.basePath + rewritten
}

/** Client headers minus anything that could pass for the gateway's word, plus the gateway's own. */
export function upstreamHeaders (request: DownstreamRequest, state: ForwardState, auth: AuthState | null): IncomingHttpHeaders {
  return headersFor(request, state, auth, compile(state.route))
}

function headersFor (request: DownstreamRequest, state: ForwardState, auth: AuthState | null, { dropped, removed, host }: CompiledRoute): IncomingHttpHeaders {
  const { route, body } = state
  const headers = request.headers
  // Headers the client's Connection header names are hop-by-hop: its own, not the upstream's.
  const listed = headers.connection === undefined ? undefined : connectionListed(headers.connection)
  const out: IncomingHttpHeaders = { host }
  for (const name in headers) {
    // keygate's namespaces (x-gateway-*, x-keygate-*) carry only its own word. CGI-style servers
    // read "x_gateway_user" as "x-gateway-user": compare names as they would.
    const normalised = name.includes('_') ? name.replaceAll('_', '-') : name
    if (inKeygateNamespace(normalised) || dropped.has(normalised) || listed?.includes(name) === true) continue
    out[name] = headers[name]
  }
  // From a trusted proxy: its X-Forwarded-Proto and -Host (or its Forwarded, keygate's hop added),
  // and its X-Forwarded-For chain with its own address; from anyone else, only the client's address.
  const hop = request.proxyHop
  if (hop != null) {
    for (const name in hop.headers) if (!removed.has(name)) out[name] = hop.headers[name]
  }
  Object.assign(out, route.addHeaders)
  out['x-forwarded-for'] = hop?.forwardedFor ?? request.ip
  if (!BODYLESS_METHODS.has(request.method)) out['content-length'] = String(body?.length ?? 0)
  writeIdentity(out, route, auth, state.identityToken)
  return out
}

/** The whole upstream request: the route's origin, the rewritten path with the query as sent. */
export function upstreamRequest (request: DownstreamRequest, state: ForwardState, auth: AuthState | null): UpstreamRequest {
  const path = pathOf(request.target)
  const compiledRoute = compile(state.route)
  return {
    origin: compiledRoute.origin,
    method: request.method,
    // the route's rewrite applies to the path; the query goes on as the client sent it
    path: rewrite(state.route, compiledRoute, path) + request.target.slice(path.length),
    headers: headersFor(request, state, auth, compiledRoute),
    body: state.body,
    timeoutMs: state.route.timeoutMs,
    // an MCP route's answers may be event streams, silent for long between events (docs/mcp.md, "Streams")
    idleMs: state.route.mcp === undefined ? state.route.timeoutMs : state.route.mcp.streams.idleSeconds * 1000
  }
}
