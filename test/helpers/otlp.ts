// What an OTLP/HTTP exporter sends, decoded by the test's own means (not OpenTelemetry's encoder):
// a JSON body parsed, a protobuf body decoded by protobufjs with the messages of
// ExportTraceServiceRequest below, written from the OpenTelemetry protocol's .proto files
// (opentelemetry/proto/collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
// resource/v1/resource.proto, common/v1/common.proto), the fields keygate's spans use.
// Either way the result has the shape of OTLP/JSON: ids in hex, 64-bit integers as strings.
import protobuf from 'protobufjs'

const PROTO = `
syntax = "proto3";
package opentelemetry.proto;

message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }

message Status { string message = 2; int32 code = 3; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  fixed32 flags = 16;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10;
  uint32 dropped_events_count = 12;
  uint32 dropped_links_count = 14;
  Status status = 15;
}
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
`

const request = protobuf.parse(PROTO).root.lookupType('opentelemetry.proto.ExportTraceServiceRequest')

export interface OtlpAnyValue {
  stringValue?: string
  intValue?: number | string
  boolValue?: boolean
  doubleValue?: number
  arrayValue?: { values?: OtlpAnyValue[] }
}
export interface OtlpKeyValue { key: string; value: OtlpAnyValue }
export interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  status?: { code?: number; message?: string }
  attributes?: OtlpKeyValue[]
}
export interface OtlpTraces {
  resourceSpans: Array<{ resource: { attributes: OtlpKeyValue[] }; scopeSpans: Array<{ scope?: { name?: string }; spans: OtlpSpan[] }> }>
}

/** The content types of OTLP/HTTP (the protocol's specification): each exporter's own. */
export const OTLP_CONTENT_TYPES = { 'http/protobuf': 'application/x-protobuf', 'http/json': 'application/json' } as const

const hex = (bytes: unknown): string => bytes instanceof Uint8Array ? Buffer.from(bytes).toString('hex') : ''

/** An ExportTraceServiceRequest in protobuf, decoded. */
export function decodeProtobufTraces (body: Uint8Array): OtlpTraces {
  // arrays: an absent repeated field as []; longs as strings, as OTLP/JSON writes int64
  const decoded = request.toObject(request.decode(body), { longs: String, enums: Number, arrays: true }) as {
    resourceSpans: Array<{ resource?: { attributes: OtlpKeyValue[] }; scopeSpans: Array<{ scope?: { name?: string }; spans: Array<Record<string, unknown>> }> }>
  }
  return {
    resourceSpans: decoded.resourceSpans.map((rs) => ({
      resource: { attributes: rs.resource?.attributes ?? [] },
      scopeSpans: rs.scopeSpans.map((ss) => ({
        scope: ss.scope,
        spans: ss.spans.map((span) => ({
          ...(span as unknown as OtlpSpan),
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId)
        }))
      }))
    }))
  }
}

/** An export's body by its content type: undefined when it is neither OTLP/HTTP's protobuf nor its JSON. */
export function decodeTraces (contentType: string | undefined, body: Buffer): { protocol: keyof typeof OTLP_CONTENT_TYPES; traces: OtlpTraces } | undefined {
  const type = contentType?.split(';')[0]?.trim().toLowerCase()
  if (type === OTLP_CONTENT_TYPES['http/protobuf']) return { protocol: 'http/protobuf', traces: decodeProtobufTraces(body) }
  if (type === OTLP_CONTENT_TYPES['http/json']) return { protocol: 'http/json', traces: JSON.parse(body.toString()) as OtlpTraces }
  return undefined
}
