// Whether this process traces, read from the standard OpenTelemetry variables, and keygate's one
// setting of its own (KEYGATE_TRACE_PARENT). No OpenTelemetry module is imported here: with
// tracing off (the default) none is ever loaded (tracing/tracer.ts is imported only when on).

/** What a client's own `traceparent` does: `ignore` starts a new trace at keygate; `continue` joins the client's. */
export type TraceParentPolicy = 'ignore' | 'continue'
export const TRACE_PARENT_POLICIES: readonly TraceParentPolicy[] = ['ignore', 'continue']

export interface TracingSettings {
  /** KEYGATE_TRACE_PARENT (default ignore: a public gateway's strangers pick neither trace ids nor sampling) */
  traceParent: TraceParentPolicy
}

/**
 * On when OTEL_TRACES_EXPORTER is otlp, or an OTLP endpoint is set (and OTEL_TRACES_EXPORTER is
 * not none), and OTEL_SDK_DISABLED is not true. The exporter, sampler and resource read their own
 * OTEL_* variables (tracer.ts).
 */
export function tracingSettingsFrom (env: NodeJS.ProcessEnv, traceParent: TraceParentPolicy | undefined): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase()
  if (exporter === 'none') return undefined
  const endpoint = (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '') !== '' || (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? '') !== ''
  if (exporter !== 'otlp' && !endpoint) return undefined
  return { traceParent: traceParent ?? 'ignore' }
}
