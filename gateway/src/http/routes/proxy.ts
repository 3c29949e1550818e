// Business traffic: every request that is not one of keygate's own endpoints lands here, and its
// trip reads top to bottom: match the route (proxy/route-table.ts) -> authenticate by the route's
// tier, and authorise by its scopes (auth/authenticate.ts) -> count it against the route's rate
// limits (limits/limiter.ts) -> mutate: the identity token (proxy/identity.ts) -> forward the
// upstream request (proxy/upstream-request.ts) over the transport (proxy/forwarder.ts). The body
// is buffered (up to the route's limit) so the signature is checked over the exact bytes, and
// those same bytes are forwarded.
import type { ServerResponse } from 'node:http'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import { HTTP_METHODS } from '#client/protocol'
import { asHook, type Authenticator } from '../../auth/authenticate.js'
import { headersDeclareBody } from '../../auth/described-request.js'
import { describeInline } from '../../auth/inline-request.js'
import { releaseReplayMark } from '../../auth/replay.js'
import type { UpstreamLimits } from '../../config/env.js'
import { GatewayError } from '../../errors.js'
import type { ByteBudget } from '../../lib/byte-budget.js'
import type { RateLimiter } from '../../limits/limiter.js'
import type { GatewayMetrics } from '../../metrics/metrics.js'
import { Forwarder } from '../../proxy/forwarder.js'
import { admit, limitAndIdentify, routeState, tooLarge } from '../../proxy/admission.js'
import type { IdentityTokenIssuer } from '../../proxy/identity.js'
import type { RouteConfig } from '../../proxy/route.js'
import type { RouteRegistry } from '../../proxy/route-registry.js'
import { upstreamRequest, type ForwardState } from '../../proxy/upstream-request.js'
import { PROXY_ROUTE_URLS } from '../catch-all.js'
import { bodyMemoryExhausted } from '../plugins/body-memory.js'

export interface ProxyOptions {
  routes: RouteRegistry
  authenticator: Authenticator
  identityTokens: IdentityTokenIssuer
  metrics: GatewayMetrics
  /** the upstream queue: connections, waiting requests and connect timeout per upstream origin */
  upstreams: UpstreamLimits
  /** the routes' rate limits */
  limiter: RateLimiter
  /** the bytes of request bodies every request together may hold at once (KEYGATE_BODY_MEMORY_LIMIT) */
  bodyMemory: ByteBudget
}
/** the largest body any route may allow (the route file's schema maximum) */
const MAX_BODY_LIMIT = 1024 * 1024 * 1024

function forwardState (request: FastifyRequest): ForwardState {
  if (request.forward === null) throw new Error('the proxy hook did not run')
  return request.forward
}

/** the client's answer of each business request: its end (sent, failed or cut) frees the body's bytes */
const answers = new WeakMap<FastifyRequest, ServerResponse>()

export const proxyRoutes: FastifyPluginAsync<ProxyOptions> = async (app, options) => {
  const { routes, authenticator, identityTokens, metrics, limiter, bodyMemory } = options
  app.decorateRequest('forward', null)

  // Every content type arrives as raw bytes, never parsed or re-encoded, up to the route's limit.
  // Bodies count against the body memory of all requests together (KEYGATE_BODY_MEMORY_LIMIT), so
  // slow senders cannot make the gateway hold more: a declared Content-Length is taken whole before
  // a byte is read (a body let in can always finish: partial bodies never fill the memory so that
  // none can complete), a chunked body chunk by chunk. The bytes are given back when the answer
  // ends, however it ends (sent, failed, or the connection cut).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { bodyLimit: MAX_BODY_LIMIT }, (request, payload, done) => {
    const limit = forwardState(request).route.bodyLimit
    let chunks: Buffer[] = []
    let size = 0
    let held = 0
    let finished = false
    const giveBack = (): void => {
      bodyMemory.give(held)
      held = 0
    }
    const answer = answers.get(request)
    answer?.once('close', giveBack)
    // checked against the route's limit before the body was read (matchAndAuthenticate)
    const declared = Number(request.headers['content-length'] ?? 0)
    if (declared > 0) {
      if (!bodyMemory.tryTake(declared)) {
        done(bodyMemoryExhausted(bodyMemory.limit), undefined)
        return
      }
      held = declared
    }
    const finish = (err: Error | null, body?: Buffer): void => {
      if (finished) return
      finished = true
      payload.removeAllListeners('data')
      // a refused body is dropped now, not when the answer ends; so is one whose answer ended already
      // (its client went away): no 'close' would come to give its bytes back
      if (err !== null || answer === undefined || answer.destroyed) {
        chunks = []
        giveBack()
      }
      done(err, body)
    }
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) finish(tooLarge(limit))
      else if (declared === 0 && !bodyMemory.tryTake(chunk.length)) finish(bodyMemoryExhausted(bodyMemory.limit))
      else {
        if (declared === 0) held += chunk.length
        chunks.push(chunk)
      }
    })
    payload.on('end', () => { finish(null, Buffer.concat(chunks, size)) })
    // A client that goes away mid-body is the client's doing, not an internal error.
    payload.on('error', (err) => {
      finish(new GatewayError('MALFORMED_HTTP', 'The request body ended before its declared length', { cause: err }))
    })
  })

  // 1. Match the route (proxy/admission.ts), then authenticate what needs no body.
  const matchAndAuthenticate = (request: FastifyRequest): void | Promise<void> => {
    const route = admit(routes.current, describeInline(request))
    request.forward = { route }
    return authenticator.beforeBody(request, route.auth, routeState(route))
  }

  // 2. Authenticate what needs the body; 3. count the request against the route's rate limits
  // and 4. mutate: the identity token, on routes that send one (proxy/admission.ts).
  const admitted = { limiter, identityTokens }
  const finishAuthentication = (request: FastifyRequest): void | Promise<void> => {
    const state = forwardState(request)
    const { route } = state
    const authenticated = authenticator.afterBody(request, route.auth)
    // most routes send no identity token and have no limits: nothing more to allocate or wait for
    if (route.identityToken === undefined && route.rateLimits.length === 0) return authenticated
    const next = (): void | Promise<void> => limitAndIdentify(admitted, route, describeInline(request), request.auth ?? {}, state)
    return authenticated === undefined ? next() : authenticated.then(next)
  }

  // 5. Forward.
  const forwarder = new Forwarder<RouteConfig>({
    ...options.upstreams,
    onAnswerBegins: (route, seconds) => { metrics.observeUpstreamLatency(route, seconds) },
    // nothing reached the upstream: the signed request may come again
    onNotSent: (reply) => { releaseReplayMark(reply.request.auth) }
  })
  metrics.watchUpstreams(() => forwarder.queues())
  app.addHook('onClose', async () => { await forwarder.close() })
  const handler = (request: FastifyRequest, reply: FastifyReply): void => {
    const state = forwardState(request)
    const body = request.body
    if (Buffer.isBuffer(body) && body.length > 0) state.body = body
    const client = { method: request.method, target: request.raw.url ?? '/', headers: request.headers, ip: request.ip, proxyHop: request.proxyHop }
    forwarder.forward(upstreamRequest(client, state, request.auth), reply, state.route, state.answerHeaders)
  }

  const authenticateHook = asHook(matchAndAuthenticate)
  const onRequest: onRequestHookHandler = (request, reply, done) => {
    // only a request with a body needs its answer (above); a bodyless one costs nothing here
    if (headersDeclareBody(request.headers)) answers.set(request, reply.raw)
    authenticateHook(request, reply, done)
  }
  app.addHook('onRequest', onRequest)
  const preHandler = asHook(finishAuthentication)
  for (const url of PROXY_ROUTE_URLS) app.route({ method: [...HTTP_METHODS], url, preHandler, handler })
}
