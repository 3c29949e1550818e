// Whether this process traces, read from the standard OpenTelemetry variables, and keygate's one
// setting of its own (KEYGATE_TRACE_PARENT). No OpenTelemetry module is imported here: with
// tracing off (the default) none is ever loaded (tracing/tracer.ts is imported only when on).
import { ConfigError } from './config-error.js'

/** What a client's own `traceparent` does: `ignore` starts a new trace at keygate; `continue` joins the client's. */
export type TraceParentPolicy = 'ignore' | 'continue'
export const TRACE_PARENT_POLICIES: readonly TraceParentPolicy[] = ['ignore', 'continue']

/** How the spans go to the collector: OTLP over HTTP, as protobuf (the specification's default) or JSON. */
export type OtlpProtocol = 'http/protobuf' | 'http/json'
export const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json']
export const DEFAULT_OTLP_PROTOCOL: OtlpProtocol = 'http/protobuf'

export interface TracingSettings {
  /** KEYGATE_TRACE_PARENT (default ignore: a public gateway's strangers pick neither trace ids nor sampling) */
  traceParent: TraceParentPolicy
  /** OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL (default http/protobuf) */
  protocol: OtlpProtocol
}

/**
 * The OTLP protocol of the spans: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL over OTEL_EXPORTER_OTLP_PROTOCOL,
 * as the specification orders them, trimmed and lower-cased; unset or empty: http/protobuf. gRPC and
 * anything else are refused here, when the configuration is read: not at the first export, where the
 * spans would be lost with only a line in the log to say so.
 */
export function otlpProtocolFrom (env: NodeJS.ProcessEnv): OtlpProtocol {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const value = env[name]?.trim().toLowerCase() ?? ''
    if (value === '') continue
    if ((OTLP_PROTOCOLS as readonly string[]).includes(value)) return value as OtlpProtocol
    const refused = `${name}: ${JSON.stringify(env[name])} is not allowed: `
    const accepted = `use ${OTLP_PROTOCOLS[0]} (the default) or ${OTLP_PROTOCOLS[1]}`
    throw new ConfigError(value === 'grpc'
      ? `${refused}keygate sends its spans over OTLP/HTTP only (no gRPC exporter is built in): ${accepted}, ` +
        'to the collector\'s OTLP/HTTP port (4318; 4317 is its gRPC port)'
      : `${refused}${accepted}`)
  }
  return DEFAULT_OTLP_PROTOCOL
}

/**
 * On when OTEL_TRACES_EXPORTER is otlp, or an OTLP endpoint is set (and OTEL_TRACES_EXPORTER is
 * not none), and OTEL_SDK_DISABLED is not true. The protocol is read (and checked) only then; the
 * exporter, sampler and resource read their other OTEL_* variables themselves (tracer.ts).
 */
export function tracingSettingsFrom (env: NodeJS.ProcessEnv, traceParent: TraceParentPolicy | undefined): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase()
  if (exporter === 'none') return undefined
  const endpoint = (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '') !== '' || (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? '') !== ''
  if (exporter !== 'otlp' && !endpoint) return undefined
  return { traceParent: traceParent ?? 'ignore', protocol: otlpProtocolFrom(env) }
}
