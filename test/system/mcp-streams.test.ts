// MCP streams pass through (issue 42, point 6; docs/mcp.md, "Streams"). A real stateful MCP
// server (the SDK's McpServer, resumable with the SDK's InMemoryEventStore: test/helpers/mcp-server.ts)
// behind a keygate whose MCP routes have a 300 ms timeoutMs and a 2 s stream idle bound; one
// upstream sends no SSE keep-alives, the other one every 200 ms. Through keygate: a POST answered
// as SSE gets its first event while the stream is still open; a stream quieter than timeoutMs
// but within the idle bound goes on, one idle past it is cut, one kept busy by keep-alive
// comments goes on; a client that goes away closes the upstream's stream at once; the GET
// stream carries server-initiated messages, and a GET with Last-Event-ID replays those missed;
// another identity's GET on the session is refused 404.
import t from 'tap'
import { rawRequest, sendHalfClosed } from '../helpers/http.js'
import { mcpPostHeaders, startMcpServer, type McpRequest, type TestMcpServer } from '../helpers/mcp-server.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, startTestGateway } from '../helpers/stack.js'

const ROUTES = `routes:
  - prefix: /quiet
    upstream: QUIET
    auth: bearer
    timeoutMs: 300
    mcp:
      streams: { idleSeconds: 2 }
  - prefix: /kept
    upstream: KEPT
    auth: bearer
    timeoutMs: 300
    mcp:
      streams: { idleSeconds: 2 }
`
// undici checks these bounds on a timer that ticks every half second: a 300 ms bound cuts within
// 0.5 to 1 s, a 2 s one within 2 to 2.5 s
const TIMEOUT_MS = 300
const IDLE_MS = 2000

const INITIALIZE = {
  jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }
}

interface SseEvent { id?: string, data: string }

/** Reads an event stream as an EventSource does: events (their id and data), comments counted. */
class EventReader {
  comments = 0
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>
  readonly #decoder = new TextDecoder()
  #buffer = ''

  constructor (body: ReadableStream<Uint8Array> | null) {
    if (body === null) throw new Error('no body')
    this.#reader = body.getReader()
  }

  /** the next event with data; undefined when the stream ends; throws when it breaks off */
  async next (): Promise<SseEvent | undefined> {
    for (;;) {
      const end = this.#buffer.search(/\r?\n\r?\n/)
      if (end >= 0) {
        const block = this.#buffer.slice(0, end)
        this.#buffer = this.#buffer.slice(end).replace(/^\r?\n\r?\n/, '')
        const event: SseEvent = { data: '' }
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(':')) this.comments++
          else if (line.startsWith('id:')) event.id = line.slice(3).trim()
          else if (line.startsWith('data:')) event.data += line.slice(5).trim()
        }
        if (event.data !== '') return event
        continue
      }
      const { done, value } = await this.#reader.read()
      if (done) return undefined
      this.#buffer += this.#decoder.decode(value, { stream: true })
    }
  }

  async cancel (): Promise<void> {
    await this.#reader.cancel()
  }

  /** the JSON-RPC message of the next event */
  async message (): Promise<{ method?: string, params?: Record<string, unknown>, result?: unknown, id?: unknown }> {
    const event = await this.next()
    if (event === undefined) throw new Error('the stream ended')
    return JSON.parse(event.data)
  }
}

const settledWithin = async (promise: Promise<unknown>, ms: number): Promise<boolean> => {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<boolean>((resolve) => { timer = setTimeout(() => { resolve(false) }, ms) })
  try {
    return await Promise.race([promise.then(() => true), late])
  } finally {
    clearTimeout(timer)
  }
}

/** the upstream's record of the last request it received with `method` (and that JSON-RPC method) */
const lastRequest = (mcp: TestMcpServer, method: string, rpc?: string): McpRequest => {
  const found = mcp.requests.findLast((r) => r.method === method && (rpc === undefined || r.rpc === rpc))
  if (found === undefined) throw new Error(`the MCP server received no ${method}`)
  return found
}

const quiet = await startMcpServer(t, { stateful: true, resumable: true, keepAliveMs: 0 })
const kept = await startMcpServer(t, { stateful: true, resumable: true, keepAliveMs: 200 })
const gateway = await startTestGateway(t, {
  store: 'memory',
  upstreamUrl: quiet.url,
  routes: (url) => routesFromYaml(ROUTES.replace('KEPT', kept.url).replace('QUIET', url), url)
})
await addUser(gateway, 'alice')
await addUser(gateway, 'bob')
const alice = await login(gateway.url, 'alice')
const bob = await login(gateway.url, 'bob')

/** Alice's session on `path` (initialize through keygate): its id */
async function openSession (path: string): Promise<string> {
  const res = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: mcpPostHeaders(alice), body: JSON.stringify(INITIALIZE) })
  await res.body?.cancel()
  return res.headers.get('mcp-session-id') ?? ''
}
const quietSession = await openSession('/quiet')
const keptSession = await openSession('/kept')

let nextId = 10
/** A tools/call, asking for progress (the tool's notifications come on the answer's stream), as a raw POST through keygate. */
async function callTool (path: string, session: string, name: string, meta: Record<string, unknown> = {}, signal?: AbortSignal): Promise<Response> {
  const id = nextId++
  return await fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: mcpPostHeaders(alice, { 'mcp-session-id': session }),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {}, _meta: { progressToken: id, ...meta } } }),
    ...(signal !== undefined && { signal })
  })
}

/** The session's GET stream through keygate, as an MCP client opens it. */
async function getStream (path: string, token: string, session: string, extra: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return await fetch(`${gateway.url}${path}`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-protocol-version': '2025-06-18', 'mcp-session-id': session, ...extra },
    ...(signal !== undefined && { signal })
  })
}

t.test('a POST answered as SSE: the first event reaches the client while the stream is open; the headers as the upstream sent them', async (t) => {
  const res = await callTool('/quiet', quietSession, 'hold')
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'text/event-stream', 'an event stream')
  t.equal(res.headers.get('content-length'), null, 'of no declared length')
  t.equal(res.headers.get('cache-control'), 'no-cache, no-transform', 'Cache-Control as the upstream sent it')
  t.equal(res.headers.get('x-accel-buffering'), 'no', 'and X-Accel-Buffering')
  const upstream = lastRequest(quiet, 'POST', 'tools/call')
  let closed = false
  void upstream.closed.then(() => { closed = true })
  const events = new EventReader(res.body)
  t.match(await events.message(), { method: 'notifications/progress', params: { progress: 1 } }, 'the tool\'s first notification arrives')
  t.notOk(closed, 'while the upstream\'s stream is still open (the tool has not answered)')
  quiet.release()
  t.match(await events.message(), { result: { content: [{ text: 'released' }] } }, 'then the answer')
  t.equal(await events.next(), undefined, 'and the stream ends')
})

t.test('a stream quieter than timeoutMs but within the idle bound is not cut', async (t) => {
  const pauseMs = 5 * TIMEOUT_MS
  const events = new EventReader((await callTool('/quiet', quietSession, 'pause', { pauseMs })).body)
  t.match(await events.message(), { params: { progress: 1 } })
  t.match(await events.message(), { params: { progress: 2 } }, `the notification after ${pauseMs} ms of silence arrives`)
  t.match(await events.message(), { result: { content: [{ text: 'paused' }] } }, 'and the answer')
})

t.test('a stream idle past the idle bound is cut; keep-alive comments are bytes, and keep a stream alive', async (t) => {
  // the two at once: one waits out the other's bound
  const [cut, alive] = await Promise.all([
    callTool('/quiet', quietSession, 'pause', { pauseMs: 3 * IDLE_MS }),
    callTool('/kept', keptSession, 'pause', { pauseMs: 1.5 * IDLE_MS })
  ])
  const cutUpstream = lastRequest(quiet, 'POST', 'tools/call').closed
  const cutEvents = new EventReader(cut.body)
  const aliveEvents = new EventReader(alive.body)
  const silent = async (): Promise<number> => {
    t.match(await cutEvents.message(), { params: { progress: 1 } })
    const from = performance.now()
    await t.rejects(cutEvents.next(), 'after its first event the upstream is silent: the stream breaks off (no clean end: the client knows it is cut)')
    return performance.now() - from
  }
  const keptAlive = async (): Promise<void> => {
    t.match(await aliveEvents.message(), { params: { progress: 1 } })
    t.match(await aliveEvents.message(), { params: { progress: 2 } },
      `${1.5 * IDLE_MS} ms without an event, but keep-alive comments every 200 ms: not cut`)
    t.match(await aliveEvents.message(), { result: { content: [{ text: 'paused' }] } })
  }
  const [idle] = await Promise.all([silent(), keptAlive()])
  t.ok(idle > 0.9 * IDLE_MS && idle < 1.8 * IDLE_MS,
    `cut after ${Math.round(idle)} ms of silence: the idle bound (${IDLE_MS} ms), not timeoutMs nor the tool's end`)
  t.ok(await settledWithin(cutUpstream, 1000), 'and the upstream\'s stream was closed')
  t.ok(aliveEvents.comments >= 5, `the comments reached the client (${aliveEvents.comments})`)
})

t.test('the client going away closes the upstream\'s stream at once: a POST\'s answer, and the GET stream', async (t) => {
  // on the quiet upstream: nothing is written to the client's connection that could find it closed
  const closesWithin = async (closed: Promise<void>, leave: AbortController): Promise<number> => {
    const from = performance.now()
    leave.abort()
    return await settledWithin(closed, 1000) ? performance.now() - from : Infinity
  }
  const leaving = new AbortController()
  const events = new EventReader((await callTool('/quiet', quietSession, 'hold', {}, leaving.signal)).body)
  t.match(await events.message(), { params: { progress: 1 } }, 'a tool call, held: its answer\'s stream stays open')
  const post = await closesWithin(lastRequest(quiet, 'POST', 'tools/call').closed, leaving)
  t.ok(post < 250, `the client left: the upstream's answer closed ${post.toFixed(1)} ms later (not at the idle bound, nor when the tool answered)`)
  quiet.release()

  const getLeaving = new AbortController()
  const stream = await getStream('/quiet', alice, quietSession, {}, getLeaving.signal)
  t.equal(stream.status, 200, 'the GET stream opens: its status and headers reach the client before any event (a quiet upstream sends none)')
  const reader = new EventReader(stream.body)
  await quiet.log(quietSession, 'hello')
  t.match(await reader.message(), { method: 'notifications/message', params: { data: 'hello' } }, 'a server-initiated message arrives on it')
  const get = await closesWithin(lastRequest(quiet, 'GET').closed, getLeaving)
  t.ok(get < 250, `the client left: the upstream's GET stream closed ${get.toFixed(1)} ms later`)
  const again = await getStream('/quiet', alice, quietSession)
  t.equal(again.status, 200, 'so the session takes a new GET stream (the SDK refuses a second one while one is open: 409)')
  await again.body?.cancel()
  t.ok(await settledWithin(lastRequest(quiet, 'GET').closed, 1000))

  // a raw client that sends its GET and closes its sending side (a FIN, as a closed connection first shows)
  const headers = { authorization: `Bearer ${alice}`, accept: 'text/event-stream', 'mcp-protocol-version': '2025-06-18', 'mcp-session-id': quietSession }
  const from = performance.now()
  const halfClosed = await sendHalfClosed(gateway.url, rawRequest('GET', '/quiet', headers), 5 * IDLE_MS)
  const took = performance.now() - from
  t.ok(halfClosed.closedByServer && took < IDLE_MS / 2,
    `a client that half-closed: keygate closes the connection (${took.toFixed(1)} ms), not at the idle bound`)
  t.ok(await settledWithin(lastRequest(quiet, 'GET').closed, 1000), 'and the upstream\'s GET stream')
})

t.test('resumption: a GET with Last-Event-ID replays the events missed, through keygate; the headers reach the upstream as sent', async (t) => {
  const first = new AbortController()
  const reader = new EventReader((await getStream('/kept', alice, keptSession, {}, first.signal)).body)
  await kept.log(keptSession, 'one')
  const one = await reader.next()
  t.match(JSON.parse(one?.data ?? '{}'), { params: { data: 'one' } })
  t.ok(one?.id, 'events carry ids')
  first.abort()
  await lastRequest(kept, 'GET').closed
  await kept.log(keptSession, 'two')
  await kept.log(keptSession, 'three')

  const resumed = await getStream('/kept', alice, keptSession, { 'last-event-id': one?.id ?? '' })
  t.equal(resumed.status, 200)
  const forwarded = lastRequest(kept, 'GET')
  t.equal(forwarded.headers['last-event-id'], one?.id, 'Last-Event-ID reached the upstream as sent')
  t.equal(forwarded.headers.accept, 'text/event-stream', 'and Accept')
  const replay = new EventReader(resumed.body)
  t.match(await replay.message(), { params: { data: 'two' } }, 'the events sent while the client was away are replayed')
  t.match(await replay.message(), { params: { data: 'three' } })
  await replay.cancel()
})

t.test('another identity\'s GET on the session is refused 404, and never reaches the upstream', async (t) => {
  const received = kept.requests.length
  const cases: Array<Record<string, string>> = [{}, { 'last-event-id': '1' }]
  for (const extra of cases) {
    const res = await getStream('/kept', bob, keptSession, extra)
    t.equal(res.status, 404, `Bob's GET on Alice's session${Object.keys(extra).length > 0 ? ', resuming' : ''}: 404`)
    t.match(await res.json(), { jsonrpc: '2.0', error: { code: -32001, data: { code: 'MCP_SESSION_NOT_FOUND' } } })
  }
  t.equal(kept.requests.length, received, 'the MCP server saw neither')
})
