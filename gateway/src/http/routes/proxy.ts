// Business traffic: every request that is not one of keygate's own endpoints lands here, and its
// trip reads top to bottom: match the route (proxy/route-table.ts) -> authenticate by the route's
// tier, and authorise by its scopes (auth/authenticate.ts) -> count it against the route's rate
// limits (limits/limiter.ts) -> mutate: the identity token (proxy/identity.ts) -> forward the
// upstream request (proxy/upstream-request.ts) over the transport (proxy/forwarder.ts). The body
// is buffered (up to the route's limit) so the signature is checked over the exact bytes, and
// those same bytes are forwarded.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import { HTTP_METHODS } from '#client/protocol'
import { asHook, type Authenticator } from '../../auth/authenticate.js'
import { headersDeclareBody, type DescribedRequest } from '../../auth/described-request.js'
import { describeInline } from '../../auth/inline-request.js'
import { releaseReplayMark } from '../../auth/replay.js'
import type { UpstreamLimits } from '../../config/env.js'
import type { ByteBudget } from '../../lib/byte-budget.js'
import type { RateLimiter } from '../../limits/limiter.js'
import { listAnswerHook } from '../../mcp/list-filter.js'
import { checkSession, requestedSession, sessionAnswerHook } from '../../mcp/sessions.js'
import type { GatewayMetrics } from '../../metrics/metrics.js'
import { Forwarder, type UpstreamTrace } from '../../proxy/forwarder.js'
import { admit, limitAndIdentify, routeState } from '../../proxy/admission.js'
import type { IdentityTokenIssuer } from '../../proxy/identity.js'
import type { RouteConfig } from '../../proxy/route.js'
import type { RouteRegistry } from '../../proxy/route-registry.js'
import { upstreamRequest, type ForwardState } from '../../proxy/upstream-request.js'
import type { McpSessionStore } from '../../store/types.js'
import { parseRawBodies, rememberAnswer } from '../plugins/body-memory.js'
import { PROXY_ROUTE_URLS } from '../plugins/catch-all.js'

export interface ProxyOptions {
  routes: RouteRegistry
  authenticator: Authenticator
  identityTokens: IdentityTokenIssuer
  metrics: GatewayMetrics
  /** the upstream queue: connections, waiting requests and connect timeout per upstream origin */
  upstreams: UpstreamLimits
  /** the routes' rate limits */
  limiter: RateLimiter
  /** MCP routes' sessions and who opened each (mcp/sessions.ts) */
  mcpSessions: McpSessionStore
  /** the bytes of request bodies every request together may hold at once (KEYGATE_BODY_MEMORY_LIMIT) */
  bodyMemory: ByteBudget
  /** with tracing on (tracing/tracer.ts): the upstream call's CLIENT span, and the rate-limit script's span */
  tracing?: { upstream: UpstreamTrace; around: (described: DescribedRequest, name: string, startTime: number, pending: Promise<void>) => Promise<void> }
}

function forwardState (request: FastifyRequest): ForwardState {
  if (request.forward === null) throw new Error('the proxy hook did not run')
  return request.forward
}

export const proxyRoutes: FastifyPluginAsync<ProxyOptions> = async (app, options) => {
  const { routes, authenticator, identityTokens, metrics, limiter, bodyMemory, tracing, mcpSessions } = options
  app.decorateRequest('forward', null)

  // Raw bytes up to the route's limit, counted against the body memory (http/plugins/body-memory.ts)
  parseRawBodies(app, bodyMemory, (request) => forwardState(request).route.bodyLimit)

  // 1. Match the route (proxy/admission.ts), then authenticate what needs no body.
  const matchAndAuthenticate = (request: FastifyRequest): void | Promise<void> => {
    const route = admit(routes.current, describeInline(request), (matched) => { request.forward = { route: matched } })
    return authenticator.beforeBody(request, route.auth, routeState(route))
  }

  // 2. Authenticate what needs the body; on an MCP route, a request in a session passes only for
  // the session's owner (mcp/sessions.ts); 3. count the request against the route's rate limits
  // and 4. mutate: the identity token, on routes that send one (proxy/admission.ts).
  const admitted = { limiter, identityTokens }
  const limitAndMutate = (request: FastifyRequest, state: ForwardState): void | Promise<void> => {
    const { route } = state
    // limits of its own, or (an MCP route) of its tools
    const limited = route.rateLimits.length > 0 || route.mcp?.toolLimits !== undefined
    if (route.identityToken === undefined && !limited) return
    const described = describeInline(request)
    const startTime = tracing === undefined ? 0 : performance.now()
    const pending = limitAndIdentify(admitted, route, described, request.auth ?? {}, state)
    return pending === undefined || tracing === undefined || !limited
      ? pending
      : tracing.around(described, 'keygate.rate_limit', startTime, pending)
  }
  const finishAuthentication = (request: FastifyRequest): void | Promise<void> => {
    const state = forwardState(request)
    const { route } = state
    const authenticated = authenticator.afterBody(request, route.auth)
    // most routes send no identity token, have no limits and are not MCP: nothing more to allocate or wait for
    if (route.mcp === undefined && route.identityToken === undefined && route.rateLimits.length === 0) return authenticated
    const next = (): void | Promise<void> => {
      const session = checkSession(mcpSessions, route, request.auth, request.headers)
      return session === undefined ? limitAndMutate(request, state) : session.then(() => limitAndMutate(request, state))
    }
    return authenticated === undefined ? next() : authenticated.then(next)
  }

  // 5. Forward.
  const forwarder = new Forwarder<RouteConfig>({
    ...options.upstreams,
    // with tracing on, a sampled request's trace id is its latency bucket's exemplar
    onAnswerBegins: tracing === undefined
      ? (route, seconds) => { metrics.observeUpstreamLatency(route, seconds) }
      : (route, seconds, span) => { metrics.observeUpstreamLatency(route, seconds, span === undefined ? undefined : tracing.upstream.traceId(span)) },
    // nothing reached the upstream: the signed request may come again
    onNotSent: (reply) => { releaseReplayMark(reply.request.auth) },
    ...(tracing !== undefined && { trace: tracing.upstream })
  })
  metrics.watchUpstreams(() => forwarder.queues())
  app.addHook('onClose', async () => { await forwarder.close() })
  const handler = (request: FastifyRequest, reply: FastifyReply): void => {
    const state = forwardState(request)
    const body = request.body
    if (Buffer.isBuffer(body) && body.length > 0) state.body = body
    const client = { method: request.method, target: request.raw.url ?? '/', headers: request.headers, ip: request.ip, proxyHop: request.proxyHop }
    const { route } = state
    // an MCP route: the answer binds a session the upstream opens, or forgets one it ended (mcp/sessions.ts)
    const sessions = route.mcp === undefined
      ? undefined
      : sessionAnswerHook(mcpSessions, route, { method: request.method, session: requestedSession(request.headers), auth: request.auth })
    // and a list's answer shows only what the caller may use (mcp/list-filter.ts), read uncompressed
    const lists = listAnswerHook(route.mcp, request.method, request.auth, request.headers.accept)
    const upstream = upstreamRequest(client, state, request.auth)
    if (lists !== undefined) upstream.headers['accept-encoding'] = 'identity'
    forwarder.forward(upstream, reply, route, state.answerHeaders, sessions, lists)
  }

  const authenticateHook = asHook(matchAndAuthenticate)
  const onRequest: onRequestHookHandler = (request, reply, done) => {
    // only a request with a body needs its answer (above); a bodyless one costs nothing here
    if (headersDeclareBody(request.headers)) rememberAnswer(request, reply.raw)
    authenticateHook(request, reply, done)
  }
  app.addHook('onRequest', onRequest)
  const preHandler = asHook(finishAuthentication)
  for (const url of PROXY_ROUTE_URLS) app.route({ method: [...HTTP_METHODS], url, preHandler, handler })
}
