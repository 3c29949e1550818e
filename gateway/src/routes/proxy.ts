// Business traffic: every request that is not one of keygate's own endpoints lands here. It is
// matched against the live route table, authenticated by its route's tier, and forwarded to the
// route's upstream (forwarder.ts). The body is buffered (up to the route's limit) so the signature
// is checked over the exact bytes, and those same bytes are forwarded. Client-sent identity
// headers never reach an upstream: the gateway drops them and writes its own last.
import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { runStages, type AuthStage, type AuthState } from '../auth/pipeline.js'
import { HTTP_METHODS, type AuthTier, type RouteConfig } from '../config.js'
import { GatewayError } from '../errors.js'
import { BODYLESS_METHODS } from '../plugins/request-target.js'
import type { GatewayMetrics } from '../metrics/metrics.js'
import type { IdentityTokenIssuer } from '../routing/identity-token.js'
import type { RouteRegistry } from '../routing/route-registry.js'
import { Forwarder } from './forwarder.js'

export interface ProxyOptions {
  routes: RouteRegistry
  pipelines: Record<AuthTier, readonly AuthStage[]>
  identityTokens: IdentityTokenIssuer
  metrics: GatewayMetrics
}

/** What the proxy knows about a request it forwards. */
export interface ForwardState {
  route: RouteConfig
  /** the exact bytes received, once read */
  body?: Buffer
  identityToken?: string
}

declare module 'fastify' {
  interface FastifyRequest {
    forward: ForwardState | null
  }
}

/** the largest body any route may allow (the route file's schema maximum) */
const MAX_BODY_LIMIT = 1024 * 1024 * 1024
/**
 * Never forwarded from the client: keygate's own credentials, framing the gateway sets itself,
 * hop-by-hop headers (undici refuses some, which would turn a good request into a 502), and the
 * forwarding headers the gateway writes itself.
 */
const NEVER_FORWARDED = new Set(['authorization', 'x-api-signature', 'content-length', 'transfer-encoding', 'expect',
  'keep-alive', 'upgrade', 'proxy-connection', 'http2-settings', 'te', 'trailer', 'forwarded', 'x-forwarded-for',
  'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'host', 'connection'])
/** the catch-all's own Fastify routes (metrics and docs name requests by their business route instead) */
export const PROXY_ROUTE_URLS: ReadonlySet<string> = new Set(['/', '/*'])
/** upstream keep-alive connections per origin */
const UPSTREAM_CONNECTIONS = 128

const pathOf = (target: string): string => {
  const query = target.indexOf('?')
  return query === -1 ? target : target.slice(0, query)
}

function forwardState (request: FastifyRequest): ForwardState {
  if (request.forward === null) throw new Error('the proxy hook did not run')
  return request.forward
}

/** What every request of a route needs and the route config does not spell out: computed once per route. */
interface CompiledRoute {
  origin: string
  /** the Host header the upstream receives */
  host: string
  basePath: string
  /** client headers never forwarded on this route */
  dropped: Set<string>
}
const compiled = new WeakMap<RouteConfig, CompiledRoute>()

function compile (route: RouteConfig): CompiledRoute {
  let result = compiled.get(route)
  if (result === undefined) {
    const upstream = new URL(route.upstream)
    const names = route.identityHeaders
    result = {
      origin: upstream.origin,
      host: upstream.host,
      basePath: upstream.pathname.replace(/\/$/, ''),
      dropped: new Set([...NEVER_FORWARDED, names.user, names.key, names.keyName, ...route.removeHeaders,
        ...(route.identityToken ? [route.identityToken.header] : [])])
    }
    compiled.set(route, result)
  }
  return result
}

/** The path the upstream receives: the route's rewrite applied, under the upstream URL's own path. */
export function forwardedPath (route: RouteConfig, path: string): string {
  let rewritten = path
  if (route.rewrite !== undefined) {
    const rest = route.exact ? '' : path.slice(route.prefix.length)
    // Only the prefix is replaced. When the prefix has no trailing slash ("/status"), the rest
    // starts at a segment boundary ("/x"), whose slash a rewrite ending in "/" already holds;
    // any further slash is the client's and is kept ("/c//x" stays "/internal//x").
    const boundary = !route.prefix.endsWith('/') && route.rewrite.endsWith('/') && rest.startsWith('/')
    rewritten = route.rewrite + (boundary ? rest.slice(1) : rest)
  }
  return compile(route).basePath + rewritten
}

/** Client headers minus anything that could pass for the gateway's word, plus the gateway's own. */
export function upstreamHeaders (request: FastifyRequest, state: ForwardState): IncomingHttpHeaders {
  const { route, body, identityToken } = state
  const names = route.identityHeaders
  const { dropped, host } = compile(route)
  const headers = request.headers
  // Headers the client's Connection header names are hop-by-hop: its own, not the upstream's.
  const listed = headers.connection === undefined ? undefined : headers.connection.toLowerCase().split(',').map((name) => name.trim())
  const out: IncomingHttpHeaders = { host }
  for (const name in headers) {
    // CGI-style servers read "x_gateway_user" as "x-gateway-user": compare names as they would.
    const normalised = name.includes('_') ? name.replaceAll('_', '-') : name
    if (normalised.startsWith('x-gateway-') || dropped.has(normalised) || listed?.includes(name) === true) continue
    out[name] = headers[name]
  }
  Object.assign(out, route.addHeaders)
  out['x-forwarded-for'] = request.ip
  if (!BODYLESS_METHODS.has(request.method)) out['content-length'] = String(body?.length ?? 0)
  const auth = request.auth
  if (auth?.user !== undefined) out[names.user] = auth.user
  if (auth?.key !== undefined) {
    out[names.key] = auth.key.apiKey
    out[names.keyName] = auth.key.name
  }
  if (identityToken !== undefined && route.identityToken !== undefined) out[route.identityToken.header] = identityToken
  return out
}

const tooLarge = (limit: number): GatewayError =>
  new GatewayError('PAYLOAD_TOO_LARGE', `The request body is larger than this route accepts (${limit} bytes)`)

export const proxyRoutes: FastifyPluginAsync<ProxyOptions> = async (app, { routes, pipelines, identityTokens, metrics }) => {
  const phases = Object.fromEntries(Object.entries(pipelines).map(([tier, stages]) => [tier, {
    beforeBody: stages.filter((stage) => !stage.needsBody),
    afterBody: stages.filter((stage) => stage.needsBody)
  }])) as Record<AuthTier, { beforeBody: AuthStage[]; afterBody: AuthStage[] }>

  app.decorateRequest('forward', null)

  // Every content type arrives as raw bytes, never parsed or re-encoded, up to the route's limit.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { bodyLimit: MAX_BODY_LIMIT }, (request, payload, done) => {
    const limit = forwardState(request).route.bodyLimit
    const chunks: Buffer[] = []
    let size = 0
    let finished = false
    const finish = (err: Error | null, body?: Buffer): void => {
      if (finished) return
      finished = true
      payload.removeAllListeners('data')
      done(err, body)
    }
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) finish(tooLarge(limit))
      else chunks.push(chunk)
    })
    payload.on('end', () => { finish(null, Buffer.concat(chunks, size)) })
    // A client that goes away mid-body is the client's doing, not an internal error.
    payload.on('error', (err) => {
      finish(new GatewayError('MALFORMED_HTTP', 'The request body ended before its declared length', { cause: err }))
    })
  })

  const beginForward = (request: FastifyRequest): void | Promise<void> => {
    const match = routes.current.match(pathOf(request.raw.url ?? '/'), request.method)
    if (match.kind === 'not-found') throw new GatewayError('NOT_FOUND', `No route for ${request.method} ${pathOf(request.url)}`)
    if (match.kind === 'method-not-allowed') {
      throw new GatewayError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; allowed: ${match.allow.join(', ')}`, { headers: { allow: match.allow.join(', ') } })
    }
    const { route } = match
    request.forward = { route }
    const declaredLength = request.headers['content-length']
    // (a GET with a body was refused before: plugins/request-target.ts)
    // A declared length over the limit is refused before a byte of the body is read.
    if (declaredLength !== undefined && Number(declaredLength) > route.bodyLimit) throw tooLarge(route.bodyLimit)
    request.auth = { replay: route.replay }
    return runStages(phases[route.auth].beforeBody, request, request.auth)
  }
  app.addHook('onRequest', (request, _reply, done) => {
    let pending: void | Promise<void>
    try {
      pending = beginForward(request)
    } catch (err) {
      done(err as Error)
      return
    }
    if (pending === undefined) done()
    else pending.then(() => { done() }, done)
  })

  const forwarder = new Forwarder({ connections: UPSTREAM_CONNECTIONS })
  app.addHook('onClose', async () => { await forwarder.close() })

  const identityToken = async (state: ForwardState, auth: AuthState): Promise<void> => {
    if (state.route.identityToken !== undefined && auth.user !== undefined) {
      state.identityToken = await identityTokens.tokenFor(state.route.identityToken, auth.user, auth.key?.apiKey)
    }
  }
  const preHandler = (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void => {
    const state = forwardState(request)
    const auth = request.auth ?? {}
    let pending: void | Promise<void>
    try {
      pending = runStages(phases[state.route.auth].afterBody, request, auth)
    } catch (err) {
      done(err as Error)
      return
    }
    if (pending === undefined && state.route.identityToken === undefined) {
      request.authenticated = true
      done()
      return
    }
    Promise.resolve(pending).then(async () => {
      request.authenticated = true
      await identityToken(state, auth)
    }).then(() => { done() }, done)
  }
  const handler = (request: FastifyRequest, reply: FastifyReply): void => {
    const state = forwardState(request)
    const body = request.body
    if (Buffer.isBuffer(body) && body.length > 0) state.body = body
    const target = request.raw.url ?? '/'
    const path = pathOf(target)
    const sentAt = performance.now()
    forwarder.forward({
      origin: compile(state.route).origin,
      method: request.method,
      // the route's rewrite applies to the path; the query goes on as the client sent it
      path: forwardedPath(state.route, path) + target.slice(path.length),
      headers: upstreamHeaders(request, state),
      body: state.body,
      timeoutMs: state.route.timeoutMs,
      onResponseHeaders: () => { metrics.observeUpstreamLatency(state.route, (performance.now() - sentAt) / 1000) }
    }, reply)
  }
  for (const url of PROXY_ROUTE_URLS) app.route({ method: [...HTTP_METHODS], url, preHandler, handler })
}
