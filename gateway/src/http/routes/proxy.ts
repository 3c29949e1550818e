// Business traffic: every request that is not one of keygate's own endpoints lands here, and its
// trip reads top to bottom: match the route (proxy/route-table.ts) -> authenticate by the route's
// tier, and authorise by its scopes (auth/authenticate.ts) -> count it against the route's rate
// limits (limits/limiter.ts) -> mutate: the identity token (proxy/identity.ts) -> forward the
// upstream request (proxy/upstream-request.ts) over the transport (proxy/forwarder.ts). The body
// is buffered (up to the route's limit) so the signature is checked over the exact bytes, and
// those same bytes are forwarded.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { HTTP_METHODS, pathOf } from '#client/protocol'
import { asHook, type Authenticator } from '../../auth/authenticate.js'
import { releaseReplayMark } from '../../auth/replay.js'
import type { UpstreamLimits } from '../../config/env.js'
import { GatewayError } from '../../errors.js'
import type { RateLimiter } from '../../limits/limiter.js'
import type { GatewayMetrics } from '../../metrics/metrics.js'
import { Forwarder } from '../../proxy/forwarder.js'
import { identityTokenFor, type IdentityTokenIssuer } from '../../proxy/identity.js'
import type { RouteConfig } from '../../proxy/route.js'
import type { RouteRegistry } from '../../proxy/route-registry.js'
import { upstreamRequest, type ForwardState } from '../../proxy/upstream-request.js'
import { PROXY_ROUTE_URLS } from '../catch-all.js'

export interface ProxyOptions {
  routes: RouteRegistry
  authenticator: Authenticator
  identityTokens: IdentityTokenIssuer
  metrics: GatewayMetrics
  /** the upstream queue: connections, waiting requests and connect timeout per upstream origin */
  upstreams: UpstreamLimits
  /** the routes' rate limits */
  limiter: RateLimiter
}
/** the largest body any route may allow (the route file's schema maximum) */
const MAX_BODY_LIMIT = 1024 * 1024 * 1024

function forwardState (request: FastifyRequest): ForwardState {
  if (request.forward === null) throw new Error('the proxy hook did not run')
  return request.forward
}

const tooLarge = (limit: number): GatewayError =>
  new GatewayError('PAYLOAD_TOO_LARGE', `The request body is larger than this route accepts (${limit} bytes)`)

export const proxyRoutes: FastifyPluginAsync<ProxyOptions> = async (app, options) => {
  const { routes, authenticator, identityTokens, metrics, limiter } = options
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

  // 1. Match the route, then authenticate what needs no body.
  const matchAndAuthenticate = (request: FastifyRequest): void | Promise<void> => {
    const match = routes.current.match(pathOf(request.raw.url ?? '/'), request.method)
    if (match.kind === 'not-found') throw new GatewayError('NOT_FOUND', `No route for ${request.method} ${pathOf(request.url)}`)
    // a ";" (matrix parameters) the route does not take: refused before authentication
    if (match.kind === 'invalid-target') throw new GatewayError('INVALID_TARGET', match.detail)
    if (match.kind === 'method-not-allowed') {
      throw new GatewayError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; allowed: ${match.allow.join(', ')}`, {
        headers: { allow: match.allow.join(', ') }
      })
    }
    const { route } = match
    request.forward = { route }
    // (a GET with a body was refused before: http/plugins/request-target.ts)
    // A declared length over the limit is refused before a byte of the body is read.
    const declaredLength = request.headers['content-length']
    if (declaredLength !== undefined && Number(declaredLength) > route.bodyLimit) throw tooLarge(route.bodyLimit)
    // the route's required scopes travel with the state to the scope stage, which ends the pipeline
    return authenticator.beforeBody(request, route.auth, {
      replay: route.replay, requiredScopes: route.scopes, signaturePolicy: route.signature, signatureLabel: route.signatureLabel
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

  app.addHook('onRequest', asHook(matchAndAuthenticate))
  const preHandler = asHook(finishAuthentication)
  for (const url of PROXY_ROUTE_URLS) app.route({ method: [...HTTP_METHODS], url, preHandler, handler })
}
