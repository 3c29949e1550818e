// Decision mode: keygate as the auth service of the proxy a team already runs (nginx
// auth_request, ingress-nginx auth-url, Traefik forwardAuth, Caddy forward_auth, Envoy ext_authz).
// A listener of its own (KEYGATE_DECISION_PORT), which forwards nothing: for each decision request
// it describes the original request from where that proxy puts it (dialects.ts), then judges it
// exactly as inline mode would: the same route table (proxy/admission.ts), the same tier pipeline
// (auth/), the same rate limits, replay guard and failed-signature budget, on the same store. It
// answers 200 with the identity headers for the proxy to copy upstream, or the refusal inline mode
// would send (status, problem+json, WWW-Authenticate, Retry-After, RateLimit). It believes the
// headers of peers it is told to trust only (KEYGATE_DECISION_TRUSTED_PROXIES); anyone else is
// refused before anything is read. docs/decision-mode.md, SECURITY.md say what each mode promises.
import type { Tracing } from '../tracing/tracer.js'
import type { IncomingHttpHeaders } from 'node:http'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { FORWARDED_DIGEST_HEADER, HTTP_METHODS, pathOf } from '#client/protocol'
import { asHook, type Judge } from '../auth/authenticate.js'
import { headersDeclareBody, UNSEEN_BODY, unseenBodyError } from '../auth/described-request.js'
import type { AuthState } from '../auth/stage.js'
import { MAX_HEADER_BYTES, type ServerLimits } from '../config/env.js'
import { GatewayError } from '../errors.js'
import { accessLogPlugin } from '../http/plugins/access-log.js'
import { parseRawBodies, rememberAnswer } from '../http/plugins/body-memory.js'
import { listenerOptions } from '../http/listener-options.js'
import { problemsPlugin } from '../http/plugins/problems.js'
import { refuseMalformedRequestLine, targetRefusal } from '../http/plugins/request-target.js'
import { resourceMetadataRoutes } from '../http/routes/resource-metadata.js'
import type { IssuerConfig } from '../idp/issuers.js'
import type { ByteBudget } from '../lib/byte-budget.js'
import { clientAddress, trustedProxies, type TrustedProxies } from '../lib/client-address.js'
import { trackRequestLines } from '../lib/request-line-tracker.js'
import { admit, limitAndIdentify, routeState, type AfterAuthentication, type Admitted } from '../proxy/admission.js'
import { identityHeaderNames, writeIdentity } from '../proxy/identity.js'
import type { RouteConfig } from '../proxy/route.js'
import type { RouteRegistry } from '../proxy/route-registry.js'
import { droppedByProxy } from '../proxy/upstream-request.js'
import { DecisionRequest, DECISION_PATH_PREFIX, dialectOf, DIALECTS, originalRequest, STATUS_IN_HEADER, type Dialect } from './dialects.js'

/** nginx never passes an auth answer's body: a refusal's problem+json, on one line, for its config to send the client. */
export const PROBLEM_HEADER = 'x-keygate-problem'
/** nginx: the real status of a refusal sent as 403 */
export const STATUS_HEADER = 'x-keygate-status'
/** the longest X-Keygate-Problem: past it, the problem without its extension members */
const PROBLEM_HEADER_MAX = 8 * 1024
/** Envoy: the request headers it removes before forwarding (ext_authz) */
const ENVOY_HEADERS_TO_REMOVE = 'x-envoy-auth-headers-to-remove'
/** Envoy's mark of a body it cut at max_request_bytes (allow_partial_message) */
const ENVOY_PARTIAL_BODY = 'x-envoy-auth-partial-body'
/** the decision request's headers: the client's and the proxy's */
const DECISION_HEADER_BYTES = 4 * MAX_HEADER_BYTES

export interface DecisionServices extends AfterAuthentication {
  routes: RouteRegistry
  /** the issuers in force: the resources' authorization servers in their metadata */
  issuers?: () => readonly IssuerConfig[]
  judge: Judge
  /** the request bodies held at once, with inline mode's (KEYGATE_BODY_MEMORY_LIMIT) */
  bodyMemory: ByteBudget
  /** with tracing on: a SERVER span per decision, its stages' spans under it (tracing/tracer.ts) */
  tracing?: Tracing | undefined
  /** the algorithms DPoP proofs may use: the resources' metadata says them */
  dpopAlgorithms?: readonly string[] | undefined
}

export interface DecisionOptions {
  /** the peers whose word about the original request is believed: addresses and CIDRs */
  trustedProxies: readonly string[]
  server: Pick<ServerLimits, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'strictRequestLine'>
  log?: FastifyBaseLogger
}

interface DecisionState {
  dialect: Dialect
  route: RouteConfig
  described: DecisionRequest
  state: AuthState
  admitted: Admitted
}

declare module 'fastify' {
  interface FastifyRequest {
    /** a decision request: what it judges; null until its route is known */
    decision: DecisionState | null
  }
}

/** A header value on one line, ASCII only: JSON's own escapes for the rest. */
const asciiJson = (text: string): string => text.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)

// Every answer: never cached (a signed request's decision holds once; docs/decision-mode.md says
// when a bearer route's may be). A refusal also carries its problem on one header line, and to
// nginx (which passes only 401 and 403 from an auth request, turns the rest into a 500 with a
// line in its error log, and drops the body) it is a 403 with the real status in
// X-Keygate-Status and no body: the shipped nginx config answers the client with both.
function shapeAnswer (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  reply.header('x-request-id', request.id)
  // a resource's metadata (RFC 9728) says how long it may be kept; every decision: never
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store')
  if (reply.statusCode < 400 || typeof payload !== 'string') {
    done(null, payload)
    return
  }
  let problem = asciiJson(payload)
  if (problem.length > PROBLEM_HEADER_MAX) {
    const { type, title, status, detail, code } = JSON.parse(payload) as Record<string, unknown>
    problem = asciiJson(JSON.stringify({ type, title, status, detail, code })).slice(0, PROBLEM_HEADER_MAX)
  }
  reply.header(PROBLEM_HEADER, problem)
  const dialect = request.decision?.dialect ?? dialectOf(request.raw.url ?? '/')
  if (dialect === undefined || !STATUS_IN_HEADER.has(dialect)) {
    done(null, payload)
    return
  }
  reply.header(STATUS_HEADER, String(reply.statusCode))
  reply.code(403)
  done(null, '')
}

/** 1. Who asks, for which proxy, about which request; its route; what needs no body. */
function describeDecision (request: FastifyRequest, proxies: TrustedProxies, routes: DecisionServices['routes']): DecisionState {
  const peer = request.raw.socket?.remoteAddress ?? ''
  if (!proxies.trusts(peer)) {
    throw new GatewayError('UNTRUSTED_PROXY', `${peer} is not a proxy this decision listener trusts: it takes decision requests only from ` +
      'the addresses of KEYGATE_DECISION_TRUSTED_PROXIES (or KEYGATE_TRUSTED_PROXIES), since they describe the request it judges')
  }
  const url = request.raw.url ?? '/'
  const dialect = dialectOf(url)
  if (dialect === undefined) {
    const paths = DIALECTS.map((name) => `${DECISION_PATH_PREFIX}${name}`).join(', ')
    throw new GatewayError('NOT_FOUND', `No decision dialect at ${pathOf(url)}; ask at ${paths} (docs/decision-mode.md)`)
  }
  const ip = clientAddress(peer, request.headers, proxies, 'x-forwarded-for').ip
  const described = new DecisionRequest(originalRequest(dialect, request.raw), request.raw, ip)
  // what the public port refuses before routing (http/plugins/request-target.ts), for the original request
  const refusal = targetRefusal(described.method, described.target, described.declaresBody)
  if (refusal !== undefined) throw refusal
  const route = admit(routes.current, described)
  // the route's refusals from here on are its own (an MCP route's a JSON-RPC error: http/plugins/problems.ts)
  request.forward = { route }
  // a body the proxy cannot say anything about: one not shown, where the request may carry one
  described.settleUnknownBody(route.bodyOnMethods)
  // Envoy writes "false" for a whole body and "true" for a cut one; anything else (two copies, another
  // spelling) is not a whole body's mark either: a body keygate may have seen part of is refused
  const partial = request.headers[ENVOY_PARTIAL_BODY]
  if (dialect === 'envoy' && partial !== undefined && partial !== 'false') {
    throw new GatewayError('PAYLOAD_TOO_LARGE', `Envoy sent only part of the body (x-envoy-auth-partial-body: ${partial}): keygate verifies whole ` +
      `bodies only; make with_request_body.max_request_bytes at least this route's limit (${route.bodyLimit} bytes) and allow_partial_message false`)
  }
  // A body keygate is not shown: on a signed route only where the route lets a digest stand for it
  if (described.body === UNSEEN_BODY && route.auth === 'signed' && route.unseenBody !== 'digest') {
    throw unseenBodyError(`this route (${route.name}) does not take one (its unseenBody is refuse)`)
  }
  return { dialect, route, described, state: routeState(route), admitted: {} }
}

/** The decision app, not listening yet (tests inject into it). */
export async function buildDecisionApp (services: DecisionServices, options: DecisionOptions): Promise<FastifyInstance> {
  const { routes, judge } = services
  const proxies = trustedProxies(options.trustedProxies)
  const app = Fastify({
    ...(options.log !== undefined && { loggerInstance: options.log }),
    // as the public port's (http/listener-options.ts), but with room for the client's headers (up to
    // MAX_HEADER_BYTES on the public port, and about 32 KB through nginx) and the proxy's own: a
    // refusal here would reach the client as "keygate unavailable"
    ...listenerOptions(options.server, DECISION_HEADER_BYTES)
  })
  // Traefik's forwardBody sends the original body on its auth request, a GET: Fastify reads no
  // GET body unless told the method has one (the original's method is judged, not this one's)
  app.addHttpMethod('GET', { hasBody: true, overrideExisting: true })
  app.decorateRequest('decision', null)
  app.decorateRequest('auth', null)
  app.decorateRequest('forward', null)
  await app.register(problemsPlugin)
  if (options.server.strictRequestLine) trackRequestLines(app.server, DECISION_HEADER_BYTES)
  app.addHook('onRequest', refuseMalformedRequestLine)
  const tracing = services.tracing
  if (tracing !== undefined) await app.register((await import('../tracing/plugin.js')).tracingPlugin, { tracing, inline: false })
  await app.register(accessLogPlugin, { traceIds: tracing?.ids })

  app.addHook('onSend', shapeAnswer)

  // 1. Who asks, for which proxy, about which request; its route; what needs no body.
  const describe = (request: FastifyRequest): DecisionState => describeDecision(request, proxies, routes)
  const beforeBody = (request: FastifyRequest, reply: FastifyReply): void | Promise<void> => {
    if (headersDeclareBody(request.headers)) rememberAnswer(request, reply.raw)
    const decision = request.decision = describe(request)
    tracing?.adopt(request, decision.described)
    request.auth = decision.state
    return judge.beforeBody(decision.described, decision.route.auth, decision.state)
  }

  // 2. The body, when the proxy sends it: raw bytes up to the route's limit, counted against the
  // body memory of every request of the process, as inline (http/plugins/body-memory.ts)
  parseRawBodies(app, services.bodyMemory, (request) => request.decision?.route.bodyLimit ?? 0)

  // 3. What needs the body; then the route's limits and identity token, as inline.
  const afterBody = (request: FastifyRequest): void | Promise<void> => {
    const decision = request.decision as DecisionState
    const { described, route, state } = decision
    if (described.body !== UNSEEN_BODY) described.body = Buffer.isBuffer(request.body) && request.body.length > 0 ? request.body : undefined
    const next = (): void | Promise<void> => limitAndIdentify(services, route, described, state, decision.admitted)
    const pending = judge.afterBody(described, route.auth, state)
    return pending === undefined ? next() : pending.then(next)
  }

  // 4. Allowed: what the proxy copies onto the upstream request, and the client's RateLimit fields.
  const handler = (request: FastifyRequest, reply: FastifyReply): void => {
    const { dialect, route, state, admitted } = request.decision as DecisionState
    const headers: IncomingHttpHeaders = {}
    writeIdentity(headers, route, state, admitted.identityToken)
    if (state.deferredDigest !== undefined) headers[FORWARDED_DIGEST_HEADER] = state.deferredDigest
    for (const [name, value] of Object.entries(admitted.answerHeaders ?? {})) if (value !== undefined) headers[name] = value
    // Envoy leaves a client's copy of a header the answer does not name, and forwards every other
    // header as sent: name the ones to remove, so that the upstream gets what inline mode sends it
    if (dialect === 'envoy') {
      const unset = [...identityHeaderNames(route), FORWARDED_DIGEST_HEADER, ...droppedByProxy(route, Object.keys(request.headers))]
      const remove = [...new Set(unset)].filter((name) => headers[name] === undefined)
      if (remove.length > 0) headers[ENVOY_HEADERS_TO_REMOVE] = remove.join(',')
    }
    reply.headers(headers).code(200).send()
  }

  // a protected resource's metadata, for the proxy to send /.well-known/oauth-protected-resource* here (docs/decision/)
  await app.register(resourceMetadataRoutes, {
    routes: () => routes.current.routes,
    issuers: services.issuers ?? (() => []),
    dpopAlgorithms: services.dpopAlgorithms
  })
  // callback-style hooks, as the proxy's: no promise for a decision whose every stage is synchronous
  const hooks = { onRequest: asHook(beforeBody), preHandler: asHook(afterBody), handler }
  app.route({ method: [...HTTP_METHODS], url: '/*', ...hooks })
  app.route({ method: [...HTTP_METHODS], url: '/', ...hooks })
  return app
}
