// OpenTelemetry traces (issue 24): a real gateway on Redis, a recording upstream and an OTLP/HTTP
// receiver this test starts, decoding what arrives by its content type: protobuf (the default,
// OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, @opentelemetry/exporter-trace-otlp-proto) with
// protobufjs, or JSON (http/json, @opentelemetry/exporter-trace-otlp-http). The spans of a signed
// request (and the components an RFC 9421 one covered), a refused one, a replay, an upstream that
// is down, an MCP route's JSON-RPC method and tool, the traceparent the upstream receives, a client's traceparent ignored or continued; a
// protocol keygate does not speak refused at start; and with tracing off, no OpenTelemetry module
// loaded at all.
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { compiled, ROOT } from '../helpers/build.js'
import { exitOn, startCommand } from '../helpers/listening.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startTestIdp } from '../helpers/oidc-provider.js'
import { mcpPostHeaders, startMcpServer } from '../helpers/mcp-server.js'
import { startRecorder } from '../helpers/recorder.js'
import { routesFromYaml } from '../helpers/routes.js'
import { send } from '../helpers/http.js'
import { addUser, login, registerKey, sendSigned, startTestGateway } from '../helpers/stack.js'
import { route } from '../../gateway/src/proxy/route.js'
import { signRequest } from '../../client/src/index.js'
import { startMetricsServer } from '../../gateway/src/http/metrics-server.js'
import { parse, parseOpenMetrics } from '../helpers/prometheus.js'
import { decodeTraces, OTLP_CONTENT_TYPES, type OtlpAnyValue } from '../helpers/otlp.js'
import { tracingSettingsFrom, type OtlpProtocol } from '../../gateway/src/config/tracing.js'

interface Span {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  status?: { code?: number }
  attributes: Record<string, unknown>
  /** how its export came */
  protocol: OtlpProtocol
}
const SERVER = 2
const CLIENT = 3
const STATUS_ERROR = 2

const valueOf = (v: OtlpAnyValue): unknown =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue ?? v.arrayValue?.values?.map(valueOf))

/** An OTLP/HTTP receiver: every span it is sent, decoded; an export it cannot decode fails the test. */
async function startReceiver (): Promise<{ url: string; spans: Span[]; resources: Array<Record<string, unknown>> }> {
  const spans: Span[] = []
  const resources: Array<Record<string, unknown>> = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const contentType = req.headers['content-type']
      const decoded = req.method === 'POST' && req.url === '/v1/traces' ? decodeTraces(contentType, Buffer.concat(chunks)) : undefined
      if (decoded === undefined) {
        t.fail(`the receiver got ${req.method ?? ''} ${req.url ?? ''} of ${contentType ?? 'no content type'}`)
        res.writeHead(415).end()
        return
      }
      const { protocol, traces } = decoded
      for (const rs of traces.resourceSpans) {
        resources.push(Object.fromEntries(rs.resource.attributes.map(({ key, value }) => [key, valueOf(value)])))
        for (const ss of rs.scopeSpans) {
          for (const span of ss.spans) {
            spans.push({ ...span, protocol, attributes: Object.fromEntries((span.attributes ?? []).map(({ key, value }) => [key, valueOf(value)])) })
          }
        }
      }
      // an empty ExportTraceServiceResponse, in the request's encoding: all accepted
      res.writeHead(200, { 'content-type': OTLP_CONTENT_TYPES[protocol] }).end(protocol === 'http/json' ? '{}' : '')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => { await new Promise((resolve) => server.close(resolve)) })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, resources }
}

const receiver = await startReceiver()
// what the exporter and batch processor read when the gateway starts tracing
process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = `${receiver.url}/v1/traces`
process.env.OTEL_BSP_SCHEDULE_DELAY = '20'
process.env.OTEL_SERVICE_NAME = 'keygate-test'
process.env.OTEL_RESOURCE_ATTRIBUTES = 'deployment.environment.name=test'

/** The SERVER span of the request to `path`, once it has arrived, and every span of its trace. */
async function traceOf (path: string): Promise<{ server: Span; spans: Span[] }> {
  for (let i = 0; i < 500; i++) {
    const server = receiver.spans.find((span) => span.kind === SERVER && span.attributes['url.path'] === path)
    // the CLIENT span ends before the SERVER span: once the SERVER span is here, its batch held the rest
    if (server !== undefined) return { server, spans: receiver.spans.filter((span) => span.traceId === server.traceId) }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`no SERVER span for ${path} arrived`)
}

const recorder = await startRecorder(t)
const routes = (upstream: string): ReturnType<typeof route>[] => [
  route({ prefix: '/v1/clients/', upstream, auth: 'signed', name: 'clients', methods: ['GET', 'POST'] }, { bodyLimit: 1 << 20, timeoutMs: 5000 }),
  route({ prefix: '/v1/down/', upstream: 'http://127.0.0.1:1', auth: 'signed', name: 'down', methods: ['GET'] }, { bodyLimit: 1 << 20, timeoutMs: 5000 })
]
/** the tracing settings a gateway reads from `env` (its protocol among them), with this receiver's endpoint */
const tracingOf = (env: NodeJS.ProcessEnv, traceParent: 'ignore' | 'continue'): NonNullable<ReturnType<typeof tracingSettingsFrom>> => {
  const settings = tracingSettingsFrom({ ...process.env, ...env }, traceParent)
  if (settings === undefined) throw new Error('tracing is off')
  return settings
}
/** the access log's lines of the first gateway */
const logLines: Array<Record<string, unknown>> = []
const ignoring = await startTestGateway(t, {
  store: 'redis',
  logger: { level: 'info', stream: { write: (line: string) => { logLines.push(JSON.parse(line) as Record<string, unknown>) } } },
  upstreamUrl: recorder.url,
  routes,
  // no protocol set: the default, http/protobuf
  config: { tracing: tracingOf({}, 'ignore'), decision: { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1'] } }
})
// on the same Redis prefix: the key registered through the first is a cache miss here; its spans
// go as JSON (the traces' own variable over the general one)
const continuing = await startTestGateway(t, {
  store: 'redis',
  redisPrefix: ignoring.config.redisPrefix,
  upstreamUrl: recorder.url,
  routes,
  config: { tracing: tracingOf({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }, 'continue') }
})
const keys = rsaKeyPair()
const setUp = async (url: string, gateway: typeof ignoring): Promise<string> => {
  await addUser(gateway, 'alice')
  const token = await login(url, 'alice')
  const registered = await registerKey(url, token, keys)
  if (registered.status !== 201) throw new Error(`registering the key: ${registered.status} ${registered.text}`)
  return token
}
const token = await setUp(ignoring.url, ignoring)
const token2 = await login(continuing.url, 'alice')

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c'
const clientParent = `00-${CLIENT_TRACE}-b7ad6b7169203331-01`

t.test('a signed request: SERVER span with the auth attributes, child spans, and a CLIENT span whose traceparent the upstream receives', async (t) => {
  const headers = { traceparent: clientParent, tracestate: 'a=b' }
  const res = await sendSigned(ignoring.url, { keys, token, method: 'GET', target: '/v1/clients/traced', headers })
  t.equal(res.status, 200)
  const { server, spans } = await traceOf('/v1/clients/traced')
  t.equal(server.name, 'GET clients')
  t.ok(spans.every((span) => span.protocol === 'http/protobuf'), 'sent as protobuf, the default')
  t.not(server.traceId, CLIENT_TRACE, 'the client\'s trace id is ignored by default')
  t.equal(server.parentSpanId ?? '', '', 'a root span')
  t.match(server.attributes, {
    'http.request.method': 'GET',
    'url.path': '/v1/clients/traced',
    'url.scheme': 'http',
    'server.address': '127.0.0.1',
    'client.address': '127.0.0.1',
    'http.response.status_code': 200,
    'http.route': '/v1/clients/*',
    'keygate.route': 'clients',
    'keygate.tier': 'signed',
    'keygate.scheme': 'seed',
    'keygate.user': 'alice',
    'keygate.key.type': 'rsa',
    'keygate.key.algorithm': 'rsa-v1_5-sha256',
    'keygate.decision': 'allowed'
  })
  t.type(server.attributes['keygate.api_key'], 'string')
  t.notOk('keygate.error_code' in server.attributes)
  const names = spans.filter((span) => span.parentSpanId === server.spanId).map((span) => span.name)
  t.ok(names.includes('keygate.verify_signature'), 'the verification')
  const client = spans.find((span) => span.kind === CLIENT)
  t.ok(client, 'a CLIENT span')
  t.equal(client?.parentSpanId, server.spanId)
  t.match(client?.attributes, { 'http.request.method': 'GET', 'server.address': '127.0.0.1', 'http.response.status_code': 200 })
  t.equal(client?.attributes['server.port'], Number(new URL(recorder.url).port))
  const upstream = recorder.requests.at(-1)
  t.equal(upstream?.headers.traceparent, `00-${server.traceId}-${client?.spanId}-01`, 'the upstream\'s parent is the CLIENT span')
  t.equal(upstream?.headers.tracestate, undefined, 'the client\'s tracestate does not pass')
  const line = logLines.find((entry) => entry.msg === 'request' && entry.url === '/v1/clients/traced')
  t.match(line, { trace_id: server.traceId, span_id: server.spanId }, 'the access log line names the trace and the SERVER span')
})

t.test('an RFC 9421 request: keygate.covered_components, the covered components\' names in Signature-Input\'s order', async (t) => {
  const target = '/v1/clients/covered'
  const body = '{"name":"Ada Lovelace"}'
  const signed = await signRequest({ scheme: 'rfc9421', privateKey: keys.privateKey, apiKey: keys.apiKey, baseUrl: ignoring.url, method: 'POST', target, body })
  const res = await send(ignoring.url, target, { method: 'POST', headers: { authorization: `Bearer ${token}`, ...signed }, body })
  t.equal(res.status, 200, res.text)
  const { server } = await traceOf(target)
  t.match(signed['Signature-Input'], /^sig1=\("@method" "@target-uri" "content-digest" "content-type"\);/, 'what the client covered')
  t.same(server.attributes['keygate.covered_components'], ['@method', '@target-uri', 'content-digest', 'content-type'],
    'an array of strings: each component\'s name, unquoted, in the order covered')
  t.match(server.attributes, { 'keygate.scheme': 'rfc9421', 'keygate.key.algorithm': 'rsa-v1_5-sha256' })
})

t.test('the upstream latency histogram: a sampled request\'s trace id as its bucket\'s exemplar, in OpenMetrics only', async (t) => {
  const metrics = await startMetricsServer(ignoring.app.keygate.metrics.scrape, { port: 0, host: '127.0.0.1' })
  t.teardown(metrics.close)
  t.equal((await sendSigned(ignoring.url, { keys, token, method: 'GET', target: '/v1/clients/exemplar' })).status, 200)
  const { server } = await traceOf('/v1/clients/exemplar')
  // what Prometheus sends
  const accept = 'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
  const open = await send(metrics.url, '/metrics', { headers: { accept } })
  t.equal(open.headers['content-type'], 'application/openmetrics-text; version=1.0.0; charset=utf-8')
  t.match(open.text, /\n# EOF\n$/)
  const line = open.text.split('\n').find((l) => l.startsWith('keygate_upstream_latency_seconds_bucket{') && l.includes(server.traceId))
  const bucketLine = '^keygate_upstream_latency_seconds_bucket\\{route="clients",le="[^"]+"\\} \\d+'
  t.match(line, new RegExp(`${bucketLine} # \\{trace_id="${server.traceId}"\\} [0-9.e-]+ \\d+(\\.\\d+)?$`), 'the exemplar: trace id, value, timestamp')
  // the latest request of the route: the exemplar of its bucket, whose bound its value is within
  const bucket = parseOpenMetrics(open.text).find((s) => s.exemplar?.labels.trace_id === server.traceId)
  t.ok(bucket !== undefined && (bucket.exemplar?.value ?? Infinity) <= Number((bucket.labels.le ?? '').replace('+Inf', 'Infinity')))
  const classic = await send(metrics.url, '/metrics')
  t.equal(classic.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
  t.notMatch(classic.text, / # \{|# EOF/, 'no exemplar in the classic text')
  t.match(classic.text, /^# TYPE keygate_http_requests_total counter$/m, 'counters keep their names after an OpenMetrics scrape')
  t.ok(parse(classic.text).length > 0)
})

t.test('an MCP route: the SERVER span names the JSON-RPC method and the tool, an unlisted tool as other', async (t) => {
  const mcp = await startMcpServer(t)
  const yaml = 'routes:\n  - { name: mcp, prefix: /mcp/, upstream: UPSTREAM, auth: bearer, mcp: { tools: { whoami: [] } } }\n'
  const gateway = await startTestGateway(t, {
    store: 'memory', upstreamUrl: mcp.url, routes: (url) => routesFromYaml(yaml, url), config: { tracing: tracingOf({}, 'ignore') }
  })
  await addUser(gateway, 'alice')
  const bearer = await login(gateway.url, 'alice')
  for (const [path, name] of [['/mcp/listed', 'whoami'], ['/mcp/unlisted', 'launch-the-missiles']]) {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } })
    const res = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: mcpPostHeaders(bearer), body })
    t.equal(res.status, 200)
    await res.body?.cancel()
  }
  t.match((await traceOf('/mcp/listed')).server.attributes, { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'whoami' })
  const unlisted = (await traceOf('/mcp/unlisted')).server.attributes
  t.match(unlisted, { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'other' }, 'a name the route does not list: other, never the client\'s')
})

t.test('a refused request: its code, decision refused, not an error span (4xx)', async (t) => {
  const res = await send(ignoring.url, '/v1/clients/refused', { headers: { authorization: `Bearer ${token}` } })
  t.equal(res.status, 401)
  const { server, spans } = await traceOf('/v1/clients/refused')
  t.equal(server.name, 'GET clients')
  t.match(server.attributes, { 'keygate.decision': 'refused', 'http.response.status_code': 401, 'keygate.error_code': res.json<{ code: string }>().code })
  t.not(server.status?.code, STATUS_ERROR)
  t.notOk(spans.some((span) => span.kind === CLIENT), 'nothing sent upstream')
})

t.test('a replay: the second use of one signature is refused, with the replay check\'s span', async (t) => {
  const sent = recorder.requests.length
  const input = { keys, token, method: 'POST', target: '/v1/clients/replayed', body: '{"a":1}', headers: {} }
  const headers = { 'content-type': 'application/json', ...signedHeaders(input) }
  t.equal((await send(ignoring.url, input.target, { method: 'POST', headers, body: input.body })).status, 200)
  const first = await traceOf('/v1/clients/replayed')
  receiver.spans.splice(receiver.spans.indexOf(first.server), 1)
  const again = await send(ignoring.url, input.target, { method: 'POST', headers, body: input.body })
  t.equal(again.status, 401)
  t.equal(again.json<{ code: string }>().code, 'REPLAYED_REQUEST')
  t.equal(recorder.requests.length, sent + 1)
  const { server, spans } = await traceOf('/v1/clients/replayed')
  t.not(server.traceId, first.server.traceId)
  t.match(server.attributes, { 'keygate.decision': 'refused', 'keygate.error_code': 'REPLAYED_REQUEST' })
  const replay = spans.find((span) => span.name === 'keygate.replay_check')
  t.equal(replay?.parentSpanId, server.spanId)
  t.equal(replay?.status?.code, STATUS_ERROR)
  t.equal(replay?.attributes['error.type'], 'REPLAYED_REQUEST')
})

t.test('an upstream that is down: 502, an error SERVER span and an error CLIENT span', async (t) => {
  const res = await sendSigned(ignoring.url, { keys, token, method: 'GET', target: '/v1/down/x' })
  t.equal(res.status, 502)
  const { server, spans } = await traceOf('/v1/down/x')
  t.equal(server.name, 'GET down')
  t.equal(server.status?.code, STATUS_ERROR)
  t.match(server.attributes, { 'error.type': 'UPSTREAM_UNAVAILABLE', 'keygate.error_code': 'UPSTREAM_UNAVAILABLE', 'keygate.decision': 'allowed' })
  const client = spans.find((span) => span.kind === CLIENT)
  t.equal(client?.status?.code, STATUS_ERROR)
  t.equal(client?.attributes['error.type'], 'ECONNREFUSED')
})

t.test('KEYGATE_TRACE_PARENT=continue: the client\'s trace goes on through keygate', async (t) => {
  const headers = { traceparent: clientParent, tracestate: 'a=b' }
  const res = await sendSigned(continuing.url, { keys, token: token2, method: 'GET', target: '/v1/clients/continued', headers })
  t.equal(res.status, 200)
  const { server, spans } = await traceOf('/v1/clients/continued')
  t.ok(spans.every((span) => span.protocol === 'http/json'), 'sent as JSON: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL over OTEL_EXPORTER_OTLP_PROTOCOL')
  t.equal(server.traceId, CLIENT_TRACE)
  t.equal(server.parentSpanId, 'b7ad6b7169203331')
  t.equal(server.name, 'GET clients')
  t.match(server.attributes, { 'http.response.status_code': 200, 'http.route': '/v1/clients/*', 'keygate.user': 'alice', 'keygate.decision': 'allowed' })
  const client = spans.find((span) => span.kind === CLIENT)
  const lookup = spans.find((span) => span.name === 'keygate.key_lookup')
  t.equal(lookup?.parentSpanId, server.spanId, 'the key read from the store (not cached in this gateway): a child span')
  const upstream = recorder.requests.at(-1)
  t.equal(upstream?.headers.traceparent, `00-${CLIENT_TRACE}-${client?.spanId}-01`)
  t.equal(upstream?.headers.tracestate, 'a=b')
})

t.test('keygate\'s own endpoints: named by their URL pattern; the resource names the service', async (t) => {
  t.equal((await send(ignoring.url, '/healthz')).status, 200)
  const { server } = await traceOf('/healthz')
  t.equal(server.name, 'GET /healthz')
  t.match(receiver.resources[0], { 'service.name': 'keygate-test', 'deployment.environment.name': 'test' })
})

t.test('an unsampled request: nothing recorded, and the upstream still gets the trace id, unsampled', async (t) => {
  process.env.OTEL_TRACES_SAMPLER = 'always_off'
  const gateway = await startTestGateway(t, {
    store: 'redis', redisPrefix: ignoring.config.redisPrefix, upstreamUrl: recorder.url, routes, config: { tracing: tracingOf({}, 'ignore') }
  })
  delete process.env.OTEL_TRACES_SAMPLER
  t.equal((await sendSigned(gateway.url, { keys, token, method: 'GET', target: '/v1/clients/unsampled' })).status, 200)
  t.match(recorder.requests.at(-1)?.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
  t.notMatch((await gateway.app.keygate.metrics.scrape(true)).body, / # \{/, 'no exemplar')
  // closing exports whatever the gateway recorded: nothing
  await gateway.app.close()
  t.notOk(receiver.spans.some((span) => span.attributes['url.path'] === '/v1/clients/unsampled'))
})

t.test('decision mode: a SERVER span per decision, the stages under it', async (t) => {
  const decisionUrl = await ignoring.app.keygate.decisions?.listen({ port: 0, host: '127.0.0.1' }) as string
  const headers = { host: 'api.test', ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/decided' }) }
  t.equal((await send(decisionUrl, '/decide/envoy/v1/clients/decided', { headers })).status, 200)
  const { server, spans } = await traceOf('/decide/envoy/v1/clients/decided')
  t.equal(server.name, 'GET clients')
  t.match(server.attributes, { 'keygate.decision': 'allowed', 'keygate.scheme': 'seed', 'keygate.user': 'alice' })
  t.equal(spans.find((span) => span.name === 'keygate.verify_signature')?.parentSpanId, server.spanId)
  t.notOk(spans.some((span) => span.kind === CLIENT), 'decision mode forwards nothing')
})

t.test('workers: each exports its own spans, and a SIGTERM flushes what is left', async (t) => {
  const redis = await testRedisUrl()
  const prefix = uniquePrefix()
  t.teardown(async () => { await deletePrefix(redis, prefix) })
  const gateway = await startCommand(process.execPath, [await compiled('gateway/src/main.ts')], {
    REDIS_URL: String(redis),
    KEYGATE_REDIS_PREFIX: prefix,
    KEYGATE_WORKERS: '2',
    UPSTREAM_URL: recorder.url,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    // no batch goes out on its own within this test: only the flush on shutdown sends them
    OTEL_BSP_SCHEDULE_DELAY: '600000'
  }, ROOT)
  const paths = Array.from({ length: 6 }, (_, i) => `/workers/${i}`)
  for (const path of paths) t.equal((await send(gateway.url, path)).status, 404)
  t.equal(await exitOn(gateway.child, 'SIGTERM'), 0)
  const arrived = receiver.spans.filter((span) => span.kind === SERVER && paths.includes(span.attributes['url.path'] as string))
  t.equal(arrived.length, paths.length, 'every request\'s span was exported before its worker exited')
  t.ok(arrived.every((span) => span.protocol === 'http/protobuf'), 'as protobuf (no protocol set), to <OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces')
  t.ok(receiver.resources.some((resource) => resource['process.pid'] !== process.pid && resource['service.name'] === 'keygate'))
})

t.test('an identity provider\'s keys: a span per fetch, with the issuer (a real OpenID Provider)', async (t) => {
  const idp = await startTestIdp(t)
  const traced = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: recorder.url,
    routes,
    config: {
      tracing: tracingOf({}, 'ignore'),
      identityProviders: { file: undefined, oidc: { issuer: idp.issuer, audience: idp.audience, name: 'corp', jwksUri: undefined } }
    }
  })
  t.equal((await send(traced.url, '/readyz')).status, 200, 'its keys fetched at start')
  let fetches: Span[] = []
  for (let i = 0; i < 500 && fetches.length < 2; i++) {
    fetches = receiver.spans.filter((span) => span.name === 'keygate.idp_key_fetch' && span.attributes['keygate.issuer'] === 'corp')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  t.same(fetches.map((span) => span.attributes['keygate.fetch']).sort(), ['discovery', 'jwks'], 'the discovery document, then the key set')
  t.equal(fetches.find((span) => span.attributes['keygate.fetch'] === 'jwks')?.attributes['keygate.keys'], 1, 'its one key')
  t.ok(fetches.every((span) => span.kind === CLIENT && (span.parentSpanId ?? '') === ''), 'CLIENT spans, each a trace of its own')
})

t.test('a protocol keygate does not speak stops the start, naming the variable and what it takes', async (t) => {
  const main = await compiled('gateway/src/main.ts')
  const refusal = async (env: Record<string, string>): Promise<string> => {
    const failed = await startCommand(process.execPath, [main], { UPSTREAM_URL: recorder.url, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, ...env }, ROOT)
      .then(async (gateway) => { await exitOn(gateway.child, 'SIGTERM'); return undefined }, (err: Error) => err)
    return failed?.message.replace(/^.* exited with /s, 'exited with ') ?? 'it started'
  }
  const [grpc, garbage] = await Promise.all([
    refusal({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    refusal({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/proto' })
  ])
  t.equal(grpc, 'exited with 1: configuration error: OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not allowed: keygate sends its spans over OTLP/HTTP ' +
    'only (no gRPC exporter is built in): use http/protobuf (the default) or http/json, to the collector\'s OTLP/HTTP port (4318; 4317 is its gRPC port)\n')
  t.equal(garbage, 'exited with 1: configuration error: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/proto" is not allowed: ' +
    'use http/protobuf (the default) or http/json\n')
})

t.test('tracing off: neither the SDK, the exporter nor keygate\'s tracing code is loaded', async (t) => {
  const app = await compiled('gateway/src/app.ts')
  const config = await compiled('gateway/src/config/env.ts')
  const script = `
    import { registerHooks } from 'node:module'
    const loaded = []
    const watched = (specifier) => specifier.includes('@opentelemetry') || ['tracing/tracer', 'tracing/plugin'].some((name) => specifier.includes(name))
    registerHooks({ resolve (specifier, context, next) { if (watched(specifier)) loaded.push(specifier); return next(specifier, context) } })
    const { buildApp } = await import(${JSON.stringify(app)})
    const { loadConfig } = await import(${JSON.stringify(config)})
    const gateway = await buildApp({ config: { ...loadConfig({}), logLevel: 'silent', port: 0 } })
    const res = await gateway.inject({ method: 'GET', url: '/healthz' })
    await gateway.close()
    console.log(JSON.stringify({ status: res.statusCode, loaded }))
  `
  const env = { ...process.env, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '', OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_TRACES_EXPORTER: '' }
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  await new Promise((resolve) => child.on('close', resolve))
  const { status, loaded } = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as { status: number; loaded: string[] }
  t.equal(status, 200)
  // prom-client's process CPU metric loads the API (no-op without a provider) whatever keygate does
  t.same(loaded.filter((name) => name !== '@opentelemetry/api'), [])
})
