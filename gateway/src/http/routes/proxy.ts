// Business traffic: every request that is not one of keygate's own endpoints lands here, and its
// trip reads top to bottom: match the route (proxy/route-table.ts) -> authenticate by the route's
// tier, and authorise by its scopes (auth/authenticate.ts) -> count it against the route's rate
// limits (limits/limiter.ts) -> mutate: the identity token (proxy/identity.ts) -> forward the
// upstream request (proxy/upstream-request.ts) over the transport (proxy/forwarder.ts). The body
// is buffered (up to the route's limit) so the signature is checked over the exact bytes, and
// those same bytes are forwarded.
import type { ServerResponse } from 'node:http'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import { HTTP_METHODS, pathOf, signedBodyMethodProblem } from '#client/protocol'
import { asHook, type Authenticator } from '../../auth/authenticate.js'
import { releaseReplayMark } from '../../auth/replay.js'
import type { UpstreamLimits } from '../../config/env.js'
import { GatewayError } from '../../errors.js'
import type { ByteBudget } from '../../lib/byte-budget.js'
import type { RateLimiter } from '../../limits/limiter.js'
import type { GatewayMetrics } from '../../metrics/metrics.js'
import { Forwarder } from '../../proxy/forwarder.js'
import { identityTokenFor, type IdentityTokenIssuer } from '../../proxy/identity.js'
import type { RouteConfig } from '../../proxy/route.js'
import type { RouteRegistry } from '../../proxy/route-registry.js'
import { upstreamRequest, type ForwardState } from '../../proxy/upstream-request.js'
import { PROXY_ROUTE_URLS } from '../catch-all.js'
import { bodyMemoryExhausted } from '../plugins/body-memory.js'
import { declaresBody } from '../plugins/request-target.js'

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

const tooLarge = (limit: number): GatewayError =>
  new GatewayError('PAYLOAD_TOO_LARGE', `The request body is larger than this route accepts (${limit} bytes)`)

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

  // 1. Match the route, then authenticate what needs no body.
  const matchAndAuthenticate = (request: FastifyRequest): void | Promise<void> => {
    const match = routes.current.match(pathOf(request.raw.url ?? '/'), request.method)
    if (match.kind === 'not-found') throw new GatewayError('NOT_FOUND', `No route for ${request.method} ${pathOf(request.url)}`)
    // a ";" (matrix parameters) the route does not take: refused before authentication
    if (match.kind === 'invalid-target') throw new GatewayError('INVALID_TARGET', match.detail)
    // another spelling of a stronger route's path, for its backend: refused before authentication
    if (match.kind === 'alias') throw new GatewayError('PATH_ALIAS', match.detail)
    if (match.kind === 'method-not-allowed') {
      throw new GatewayError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; allowed: ${match.allow.join(', ')}`, {
        headers: { allow: match.allow.join(', ') }
      })
    }
    const { route } = match
    request.forward = { route }
    // (a GET with a body was refused before: http/plugins/request-target.ts.) On a signed route a
    // DELETE or OPTIONS with one too, unless the route takes it: what a backend does with such a
    // body is its own guess, and the signature should not vouch for a guess.
    if (route.auth === 'signed' && declaresBody(request.headers)) {
      const problem = signedBodyMethodProblem(request.method, route.bodyOnMethods)
      if (problem !== undefined) throw new GatewayError('VALIDATION_FAILED', problem)
    }
    // A declared length over the limit is refused before a byte of the body is read.
    const declaredLength = request.headers['content-length']
    if (declaredLength !== undefined && Number(declaredLength) > route.bodyLimit) throw tooLarge(route.bodyLimit)
    // the route's required scopes travel with the state to the scope stage, which ends the pipeline
    return authenticator.beforeBody(request, route.auth, {
      replay: route.replay,
      requiredScopes: route.scopes,
      signaturePolicy: route.signature,
      signatureLabel: route.signatureLabel,
      seedBodyBoundary: route.seedBodyBoundary
    })
  }

  // 2. Authenticate what needs the body; 3. count the request against the route's rate limits:
  // only once it is authenticated (a forged request spends nobody's quota) and before it is
  // forwarded (a refused one never reaches the upstream); 4. mutate: the identity token, on
  // routes that send one.
  const addIdentityToken = (request: FastifyRequest): void | Promise<void> => {
    const state = forwardState(request)
    const token = identityTokenFor(identityTokens, state.route, request.auth)
    if (token !== undefined) return token.then((value) => { state.identityToken = value })
  }
  const countAndMutate = (request: FastifyRequest): void | Promise<void> => {
    const state = forwardState(request)
    if (state.route.rateLimits.length === 0) return addIdentityToken(request)
    const auth = request.auth
    return limiter.check(state.route, { key: auth?.key?.apiKey, user: auth?.user, address: request.ip }).then((headers) => {
      state.answerHeaders = headers
      return addIdentityToken(request)
    })
  }
  // Refused after the replay check (a rate limit, the identity token): never forwarded, so the
  // same signed request may come again.
  const refusedAfterAuthentication = (request: FastifyRequest, err: unknown): never => {
    releaseReplayMark(request.auth)
    throw err
  }
  const countAndMutateOrRelease = (request: FastifyRequest): void | Promise<void> => {
    let pending: void | Promise<void>
    try {
      pending = countAndMutate(request)
    } catch (err) {
      return refusedAfterAuthentication(request, err)
    }
    return pending?.catch((err: unknown) => refusedAfterAuthentication(request, err))
  }
  const finishAuthentication = (request: FastifyRequest): void | Promise<void> => {
    const { route } = forwardState(request)
    const authenticated = authenticator.afterBody(request, route.auth)
    // most routes send no identity token and have no limits: nothing more to allocate or wait for
    if (route.identityToken === undefined && route.rateLimits.length === 0) return authenticated
    return authenticated === undefined ? countAndMutateOrRelease(request) : authenticated.then(() => countAndMutateOrRelease(request))
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
    if (declaresBody(request.headers)) answers.set(request, reply.raw)
    authenticateHook(request, reply, done)
  }
  app.addHook('onRequest', onRequest)
  const preHandler = asHook(finishAuthentication)
  for (const url of PROXY_ROUTE_URLS) app.route({ method: [...HTTP_METHODS], url, preHandler, handler })
}
