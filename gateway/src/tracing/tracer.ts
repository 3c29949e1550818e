// OpenTelemetry traces, loaded only when tracing is on (app.ts imports this file dynamically): a
// SERVER span per request, child spans where a request's time goes (a key or scopes read from the
// store, the signature verification, the replay check, the rate-limit script), and a CLIENT span
// for the upstream call, whose trace context the upstream receives. Exported over OTLP/HTTP in
// batches, as protobuf (the default) or JSON (OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, config/tracing.ts),
// configured by the standard OTEL_* variables; only the chosen exporter's module is loaded.
//
// Why hand-made spans and not @opentelemetry/sdk-node or @fastify/otel: those wrap every Fastify
// hook and handler in a span and patch http/undici through async-context tracking, which costs
// every request a context switch per hook whether sampled or not; here a request costs one span
// start and end per phase, the parent is passed by hand (no AsyncLocalStorage), and the span names
// and attributes are keygate's own (the route's name, the auth decision, the key).
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api'
import { defaultTextMapGetter, defaultTextMapSetter } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import {
  ATTR_CLIENT_ADDRESS, ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE, ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT, ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION, ATTR_URL_PATH, ATTR_URL_SCHEME, ATTR_USER_AGENT_ORIGINAL
} from '@opentelemetry/semantic-conventions'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'
import { pathOf } from '#client/protocol'
import type { DescribedRequest } from '../auth/described-request.js'
import { describeInline } from '../auth/inline-request.js'
import type { AuthStage, AuthState } from '../auth/stage.js'
import type { TracingSettings } from '../config/tracing.js'
import { isGatewayError } from '../errors.js'
import { keygateVersion } from '../lib/version.js'
import { requestLabels } from '../mcp-calls/labels.js'
import type { UpstreamTrace } from '../proxy/forwarder.js'
import type { UpstreamRequest } from '../proxy/upstream-request.js'

/** The child spans of the auth pipeline's stages: the stage's name -> the span's, and whether a synchronous run gets one. */
const TRACED_STAGES: Record<string, { span: string; always: boolean }> = {
  // a key or a user's scopes read from the store: a span only on a cache miss (the stage returned a promise)
  'api-key': { span: 'keygate.key_lookup', always: false },
  scope: { span: 'keygate.user_scopes', always: false },
  bearer: { span: 'keygate.user_scopes', always: false },
  signature: { span: 'keygate.verify_signature', always: true },
  replay: { span: 'keygate.replay_check', always: false }
}

/** The seed scheme's algorithm of each key type (RFC 9421 names its own, or takes the key type's). */
const SEED_ALGORITHMS: Record<string, string> = { rsa: 'rsa-v1_5-sha256', ed25519: 'ed25519', p256: 'ecdsa-p256-sha256' }

export interface Tracing {
  /** the hooks of a listener (the public port, decision mode): a SERVER span per request */
  /** `inline`: the public port, whose pipeline judges the request itself (decision mode adopts its own) */
  onRequest: (request: FastifyRequest, inline: boolean) => void
  /** `name`: the span's route part (the route's name, or keygate's own endpoint's URL pattern); undefined: none */
  onResponse: (request: FastifyRequest, reply: FastifyReply, name: string | undefined, route: string | undefined) => void
  /** the access log's trace_id and span_id of a request */
  ids: (request: FastifyRequest) => { traceId: string; spanId: string } | undefined
  /** the auth pipeline's stages, with child spans where time goes */
  traceStages: (stages: readonly AuthStage[]) => AuthStage[]
  /** a child span of `described`'s request around `pending` (the rate-limit script) */
  around: (described: DescribedRequest, name: string, startTime: number, pending: Promise<void>) => Promise<void>
  /** decision mode: `described` is the request `request` judges (its stages' spans go under its SERVER span) */
  adopt: (request: FastifyRequest, described: DescribedRequest) => void
  /** the upstream call's CLIENT span (proxy/forwarder.ts) */
  upstream: UpstreamTrace
  /**
   * a fetch keygate made of its own accord (an identity provider's keys or discovery document): a
   * span of its own trace, from `seconds` ago to now; `error` when it failed
   */
  fetched: (name: string, seconds: number, attributes: Record<string, string | number>, error?: string) => void
  /** exports what is left: on close (SIGTERM), so the last spans are not lost */
  shutdown: () => Promise<void>
}

/** where a request (Fastify's, or its description) holds its SERVER span */
const SPAN = Symbol('keygate.span')
interface Traced { [SPAN]?: Span }

function failed (span: Span, err: unknown): void {
  const code = isGatewayError(err) ? err.code : (err as Error | undefined)?.name ?? 'Error'
  span.setAttribute(ATTR_ERROR_TYPE, code)
  span.setStatus({ code: SpanStatusCode.ERROR, message: code })
  span.end()
}

// A request's SERVER span lives on the request itself (Fastify's, and the description the
// pipeline judges) under a symbol: a WeakMap of every request would cost the garbage collector
// an ephemeron per request.
const spanOf = (holder: object): Span | undefined => (holder as Traced)[SPAN]
const setSpan = (holder: object, span: Span): void => { (holder as Traced)[SPAN] = span }

const under = (parent: Span): Context => trace.setSpan(ROOT_CONTEXT, parent)

/** A request's SERVER span, ended with what the request came to: its route, status, auth decision, user, key and agent. */
function endServerSpan (request: FastifyRequest, reply: FastifyReply, name: string | undefined, route: string | undefined): void {
  const span = spanOf(request)
  if (span === undefined || !span.isRecording()) {
    span?.end()
    return
  }
  const status = reply.statusCode
  if (name !== undefined) span.updateName(`${request.method} ${name}`)
  span.setAttributes({
    [ATTR_URL_PATH]: pathOf(request.url),
    [ATTR_URL_SCHEME]: request.protocol,
    [ATTR_SERVER_ADDRESS]: request.hostname,
    [ATTR_CLIENT_ADDRESS]: request.ip,
    [ATTR_HTTP_RESPONSE_STATUS_CODE]: status
  })
  if (request.port != null) span.setAttribute(ATTR_SERVER_PORT, request.port)
  if (route !== undefined) span.setAttribute(ATTR_HTTP_ROUTE, route)
  const agent = request.headers['user-agent']
  if (agent !== undefined) span.setAttribute(ATTR_USER_AGENT_ORIGINAL, agent)
  const forward = request.forward
  if (forward != null) {
    span.setAttributes({ 'keygate.route': forward.route.name, 'keygate.tier': forward.route.auth })
    // decision mode has no `authenticated` flag: its answer is the decision
    const allowed = (request.authenticated as boolean | undefined) ?? status < 400
    if (forward.route.auth !== 'public') span.setAttribute('keygate.decision', allowed ? 'allowed' : 'refused')
    // an MCP route: the JSON-RPC method and tool, as OpenTelemetry's MCP conventions name them, bounded (mcp-calls/labels.ts)
    const labels = forward.route.mcp === undefined ? undefined : requestLabels(forward.route.mcp, request.auth?.mcpMessages)
    if (labels !== undefined) span.setAttribute('mcp.method.name', labels.method)
    if (labels?.tool !== undefined) span.setAttribute('gen_ai.tool.name', labels.tool)
  }
  const auth = request.auth
  if (auth != null) {
    if (auth.scheme !== undefined) span.setAttribute('keygate.scheme', auth.scheme)
    if (auth.user !== undefined) span.setAttribute('keygate.user', auth.user)
    const key = auth.key
    if (key !== undefined) {
      span.setAttribute('keygate.api_key', key.apiKey)
      if (key.keyType !== undefined) span.setAttribute('keygate.key.type', key.keyType)
      const algorithm = auth.messageSignature?.alg ?? (key.keyType === undefined ? undefined : SEED_ALGORITHMS[key.keyType])
      if (algorithm !== undefined) span.setAttribute('keygate.key.algorithm', algorithm)
    }
    const signature = auth.messageSignature
    if (signature !== undefined) span.setAttribute('keygate.covered_components', signature.components.map((component) => component.name))
    // a signed agent (Web Bot Auth): its directory's origin and its key's thumbprint
    if (auth.agent !== undefined) span.setAttributes({ 'keygate.agent': auth.agent.origin, 'keygate.agent_key': auth.agent.thumbprint })
  }
  if (request.denialReason !== null) span.setAttribute('keygate.error_code', request.denialReason)
  // OpenTelemetry's HTTP conventions: a SERVER span is an error on 5xx only (a 4xx is the client's)
  if (status >= 500) {
    const type = request.denialReason ?? String(status)
    span.setAttribute(ATTR_ERROR_TYPE, type)
    span.setStatus({ code: SpanStatusCode.ERROR, message: type })
  }
  span.end()
}

/**
 * The upstream call's CLIENT span: its trace context is what the upstream receives (a client's own
 * is replaced), and an unsampled request still passes its trace id on, unsampled.
 */
function upstreamTrace (tracer: Tracer, propagator: W3CTraceContextPropagator): UpstreamTrace {
  /** the upstream's address attributes, per origin (a URL parse per request otherwise) */
  const origins = new Map<string, { address: string; port: number; scheme: string }>()
  return {
    sent (reply: FastifyReply, request: UpstreamRequest) {
      const parent = spanOf(reply.request)
      // the upstream sees keygate's CLIENT span as its parent; a client's own trace context is
      // replaced (KEYGATE_TRACE_PARENT=continue carries its trace id and tracestate on, through this span)
      const headers: IncomingHttpHeaders = request.headers
      delete headers.traceparent
      delete headers.tracestate
      if (parent !== undefined && !parent.isRecording()) {
        // unsampled: no CLIENT span is recorded; the upstream still gets the trace id, unsampled
        propagator.inject(under(parent), headers, defaultTextMapSetter)
        return undefined
      }
      let origin = origins.get(request.origin)
      if (origin === undefined) {
        const url = new URL(request.origin)
        origin = { address: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), scheme: url.protocol.slice(0, -1) }
        origins.set(request.origin, origin)
      }
      const span = tracer.startSpan(request.method, {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR_HTTP_REQUEST_METHOD]: request.method,
          [ATTR_SERVER_ADDRESS]: origin.address,
          [ATTR_SERVER_PORT]: origin.port,
          [ATTR_URL_PATH]: pathOf(request.path),
          [ATTR_URL_SCHEME]: origin.scheme
        }
      }, parent === undefined ? ROOT_CONTEXT : under(parent))
      propagator.inject(under(span), headers, defaultTextMapSetter)
      return span
    },
    ended (handle: unknown, status: number, error?: Error) {
      const span = handle as Span
      if (status > 0) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status)
      if (error !== undefined) {
        failed(span, Object.assign(new Error(error.message), { name: (error as Error & { code?: string }).code ?? error.name }))
        return
      }
      // a CLIENT span is an error on 4xx and 5xx alike (OpenTelemetry's HTTP conventions)
      if (status >= 400) {
        span.setAttribute(ATTR_ERROR_TYPE, String(status))
        span.setStatus({ code: SpanStatusCode.ERROR })
      }
      span.end()
    },
    traceId: (handle: unknown) => (handle as Span).spanContext().traceId
  }
}

export async function startTracing (settings: TracingSettings): Promise<Tracing> {
  const detected = detectResources({ detectors: [envDetector] })
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) over keygate's defaults
  // process.pid: each worker (KEYGATE_WORKERS) exports its own spans, told apart by it
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'keygate', [ATTR_SERVICE_VERSION]: keygateVersion(), 'process.pid': process.pid })
    .merge(detected)
  // the endpoint (<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces, or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as
  // given), headers and timeout: the exporter reads them; the protocol is keygate's to choose
  const { OTLPTraceExporter } = settings.protocol === 'http/json'
    ? await import('@opentelemetry/exporter-trace-otlp-http')
    : await import('@opentelemetry/exporter-trace-otlp-proto')
  // the sampler: OTEL_TRACES_SAMPLER and _ARG, which the provider reads (default parentbased_always_on)
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())]
  })
  const tracer: Tracer = provider.getTracer('keygate', keygateVersion())
  const propagator = new W3CTraceContextPropagator()
  const continueParent = settings.traceParent === 'continue'

  const child = (described: DescribedRequest, name: string, startTime: number): Span | undefined => {
    const parent = spanOf(described)
    // an unsampled request's children would be unsampled too: none is made
    return parent === undefined || !parent.isRecording() ? undefined : tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime }, under(parent))
  }

  const around: Tracing['around'] = (described, name, startTime, pending) => {
    const span = child(described, name, startTime)
    if (span === undefined) return pending
    return pending.then(() => { span.end() }, (err: unknown) => {
      failed(span, err)
      throw err
    })
  }

  const traced = (stage: AuthStage, spanName: string, always: boolean): AuthStage => ({
    name: stage.name,
    needsBody: stage.needsBody,
    run (request: DescribedRequest, state: AuthState) {
      // an unsampled request: the stage alone
      if (spanOf(request)?.isRecording() !== true) return stage.run(request, state)
      const startTime = performance.now()
      let pending: void | Promise<void>
      try {
        pending = stage.run(request, state)
      } catch (err) {
        if (always) {
          const span = child(request, spanName, startTime)
          if (span !== undefined) failed(span, err)
        }
        throw err
      }
      if (pending !== undefined) return around(request, spanName, startTime, pending)
      if (always) child(request, spanName, startTime)?.end()
    }
  })

  const onRequest: Tracing['onRequest'] = (request, inline) => {
    const parent = continueParent ? propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter) : ROOT_CONTEXT
    const span = tracer.startSpan(request.method, { kind: SpanKind.SERVER, attributes: { [ATTR_HTTP_REQUEST_METHOD]: request.method } }, parent)
    setSpan(request, span)
    // the description the auth pipeline judges (made once per request, auth/inline-request.ts)
    if (inline) setSpan(describeInline(request), span)
  }

  return {
    onRequest,
    onResponse: endServerSpan,
    ids (request) {
      const context = spanOf(request)?.spanContext()
      return context === undefined ? undefined : { traceId: context.traceId, spanId: context.spanId }
    },
    traceStages: (stages) => stages.map((stage) => {
      const traced_ = TRACED_STAGES[stage.name]
      return traced_ === undefined ? stage : traced(stage, traced_.span, traced_.always)
    }),
    around,
    adopt (request, described) {
      const span = spanOf(request)
      if (span !== undefined) setSpan(described, span)
    },
    upstream: upstreamTrace(tracer, propagator),
    fetched (name, seconds, attributes, error) {
      const end = performance.timeOrigin + performance.now()
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, startTime: end - seconds * 1000, attributes }, ROOT_CONTEXT)
      if (error !== undefined) {
        span.setAttribute(ATTR_ERROR_TYPE, 'fetch_failed')
        span.setStatus({ code: SpanStatusCode.ERROR, message: error })
      }
      span.end(end)
    },
    shutdown: async () => { await provider.shutdown() }
  }
}
