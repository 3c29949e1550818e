// Business traffic: every request that is not one of keygate's own endpoints lands here. It is
// matched against the live route table, authenticated by its route's tier, and forwarded with
// @fastify/http-proxy to the route's upstream. The body is buffered (up to the route's limit) so
// the signature is checked over the exact bytes, and those same bytes are forwarded. Client-sent
// identity headers never reach an upstream: the gateway drops them and writes its own last.
import type { IncomingHttpHeaders } from 'node:http'
import { Readable } from 'node:stream'
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy'
import type { FastifyReplyFromHooks } from '@fastify/reply-from'
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { runStages, type AuthStage } from '../auth/pipeline.js'
import { HTTP_METHODS, type AuthTier, type RouteConfig } from '../config.js'
import { GatewayError } from '../errors.js'
import type { GatewayMetrics } from '../metrics/metrics.js'
import type { IdentityTokenIssuer } from '../routing/identity-token.js'
import type { RouteRegistry } from '../routing/route-registry.js'

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
  /** performance.now() when the request left for the upstream (the upstream latency metric) */
  sentAt?: number
}

declare module 'fastify' {
  interface FastifyRequest {
    forward: ForwardState | null
  }
}

const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'TRACE'])
/** the largest body any route may allow (the route file's schema maximum) */
const MAX_BODY_LIMIT = 1024 * 1024 * 1024
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer'])
/**
 * Never forwarded from the client: keygate's own credentials, framing the gateway sets itself,
 * hop-by-hop headers (undici refuses some, which would turn a good request into a 502), and the
 * forwarding headers the gateway writes itself.
 */
const NEVER_FORWARDED = new Set(['authorization', 'x-api-signature', 'content-length', 'transfer-encoding', 'expect',
  'keep-alive', 'upgrade', 'proxy-connection', 'http2-settings', 'te', 'trailer', 'forwarded', 'x-forwarded-for',
  'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip'])
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
export const upstreamHeaders: NonNullable<FastifyReplyFromHooks['rewriteRequestHeaders']> = (request, headers) => {
  const { route, body, identityToken } = forwardState(request as FastifyRequest)
  const names = route.identityHeaders
  const { dropped } = compile(route)
  const out: IncomingHttpHeaders = {}
  for (const name of Object.keys(headers)) {
    // CGI-style servers read "x_gateway_user" as "x-gateway-user": compare names as they would.
    const normalised = name.replaceAll('_', '-')
    if (normalised.startsWith('x-gateway-') || dropped.has(normalised)) continue
    out[name] = (headers as IncomingHttpHeaders)[name]
  }
  Object.assign(out, route.addHeaders)
  const client = (request as FastifyRequest).ip
  if (client !== undefined) out['x-forwarded-for'] = client
  if (!BODYLESS_METHODS.has(request.method)) out['content-length'] = String(body?.length ?? 0)
  const auth = (request as FastifyRequest).auth
  if (auth?.user !== undefined) out[names.user] = auth.user
  if (auth?.key !== undefined) {
    out[names.key] = auth.key.apiKey
    out[names.keyName] = auth.key.name
  }
  if (identityToken !== undefined && route.identityToken !== undefined) out[route.identityToken.header] = identityToken
  return out
}

/**
 * The upstream's answer minus its hop-by-hop headers (RFC 9110 §7.6.1): its `Connection:
 * keep-alive` describes the gateway's pooled connection, not the client's, and must not override
 * the client's own `Connection: close`.
 */
export const clientResponseHeaders: NonNullable<FastifyReplyFromHooks['rewriteHeaders']> = (headers) => {
  const listed = String(headers.connection ?? '').toLowerCase().split(',').map((name) => name.trim())
  const out: IncomingHttpHeaders = {}
  for (const [name, value] of Object.entries(headers)) {
    if (HOP_BY_HOP.has(name) || listed.includes(name)) continue
    out[name] = value as string | string[]
  }
  return out
}

const upstreamFailure: NonNullable<FastifyReplyFromHooks['onError']> = (reply, { error }) => {
  const timedOut = (error as Error & { statusCode?: number }).statusCode === 504
  reply.request.log.warn({ err: error.cause ?? error }, 'upstream request failed')
  reply.send(timedOut
    ? new GatewayError('UPSTREAM_TIMEOUT', 'The upstream service did not answer in time')
    : new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream service could not be reached', { headers: { 'retry-after': '1' } }))
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

  app.addHook('onRequest', async (request) => {
    const match = routes.current.match(pathOf(request.raw.url ?? '/'), request.method)
    if (match.kind === 'not-found') throw new GatewayError('NOT_FOUND', `No route for ${request.method} ${pathOf(request.url)}`)
    if (match.kind === 'method-not-allowed') {
      throw new GatewayError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; allowed: ${match.allow.join(', ')}`, { headers: { allow: match.allow.join(', ') } })
    }
    const { route } = match
    request.forward = { route }
    const declaredLength = request.headers['content-length']
    // GET carries no body (and Fastify would not read one): refuse rather than forward unread bytes.
    if (BODYLESS_METHODS.has(request.method) && (request.headers['transfer-encoding'] !== undefined || (declaredLength ?? '0') !== '0')) {
      throw new GatewayError('VALIDATION_FAILED', `A ${request.method} request carries no body`)
    }
    // A declared length over the limit is refused before a byte of the body is read.
    if (declaredLength !== undefined && Number(declaredLength) > route.bodyLimit) throw tooLarge(route.bodyLimit)
    request.auth = { replay: route.replay }
    await runStages(phases[route.auth].beforeBody, request, request.auth)
  })

  const proxyOptions: FastifyHttpProxyOptions = {
    // No fixed upstream: each request goes to its route's, through one pooled undici Agent.
    upstream: '',
    routes: ['/', '/*'],
    httpMethods: [...HTTP_METHODS],
    proxyPayloads: false,
    preHandler: async (request) => {
      const state = forwardState(request)
      const auth = request.auth ?? {}
      await runStages(phases[state.route.auth].afterBody, request, auth)
      request.authenticated = true
      if (state.route.identityToken !== undefined && auth.user !== undefined) {
        state.identityToken = await identityTokens.tokenFor(state.route.identityToken, auth.user, auth.key?.apiKey)
      }
    },
    undici: { connections: UPSTREAM_CONNECTIONS, pipelining: 1 },
    // the access log writes the one line per request
    disableRequestLogging: true,
    replyOptions: {
      getUpstream: (request) => compile(forwardState(request as FastifyRequest).route).origin,
      rewriteRequestHeaders: (request, headers) => {
        forwardState(request as FastifyRequest).sentAt = performance.now()
        return upstreamHeaders(request, headers)
      },
      // called when the upstream's response headers arrive
      rewriteHeaders: (headers, request) => {
        const state = forwardState(request as FastifyRequest)
        if (state.sentAt !== undefined) metrics.observeUpstreamLatency(state.route, (performance.now() - state.sentAt) / 1000)
        return clientResponseHeaders(headers, request)
      },
      onError: upstreamFailure,
      // A gateway that silently re-sends requests can double a side effect: never retry.
      retryDelay: () => null
    },
    handler: (request, reply, _dest, options) => {
      const state = forwardState(request)
      const body = request.body
      if (Buffer.isBuffer(body) && body.length > 0) {
        state.body = body
        // reply-from would JSON-encode a Buffer body sent as application/json; a stream passes as is.
        request.body = Readable.from([body])
      } else {
        request.body = undefined
      }
      // The query string is not part of the path: reply-from appends the raw one from the request.
      return reply.from(forwardedPath(state.route, pathOf(request.raw.url ?? '/')), { ...options, timeout: state.route.timeoutMs })
    }
  }
  await app.register(httpProxy, proxyOptions)
}
