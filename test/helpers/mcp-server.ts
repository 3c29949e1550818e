// A real MCP server as an upstream (issue 41): the MCP TypeScript SDK's McpServer behind its
// StreamableHTTPServerTransport, stateless (a server and a transport per POST, as the SDK's
// stateless example does; GET and DELETE answer 405, so no stream stays open), on a free
// loopback port, answering at every path (keygate forwards /mcp and /mcp/admin as they came).
// Two tools: `whoami` answers with the identity headers the request carried (what keygate says
// about the caller), `write-note` with the note's number. It records every request it receives
// (method, path, headers, the JSON-RPC method called), so a test can assert what keygate
// forwarded: its identity headers, and never the client's token.
// Stateful (`{ stateful: true }`, issue 42): one server and transport per session, as the SDK's
// stateful example keeps them: initialize opens a session (its id, random, in the answer's
// Mcp-Session-Id), later requests name it, GET opens its stream, DELETE ends it; an unknown id is
// answered 404. `sessions` lists the ids it issued.
// Lists (issue 42, `{ catalog: true }`): more tools, resources, resource templates and prompts
// (CATALOG), for a policy to show some and hide others; `{ sse: true }` answers POSTs as event
// streams (the SDK's default) instead of JSON; `{ holdLists: true }` makes tools/list send a
// progress notification (to a request with a progressToken) and then wait for `releaseLists()`
// before it answers, so a test can see the notification arrive while the list's stream is open.
// Streams (issue 42, point 6): each request's `closed` settles when the server's response to it
// closes (what the server sees of a client, or a gateway, going away). Stateful, the tool `hold`
// sends a progress notification at once and answers only when the test calls `release()`; `pause`
// sends one, waits `_meta.pauseMs` (the caller's, in the request) and sends another before it
// answers. `log(session, text)` sends a server-initiated message (notifications/message) on the
// session's GET stream. `{ resumable: true }` gives each session an event store (events carry
// ids; a GET with Last-Event-ID replays what followed on that stream); `keepAliveMs` is the SDK's
// SSE keep-alive comment interval (0: none).
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport, type EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { isInitializeRequest, ListToolsRequestSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'

/** The headers of a JSON-RPC POST to an MCP endpoint, as a Streamable HTTP client sends them (protocol 2025-06-18), with a bearer token. */
export function mcpPostHeaders (token: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-06-18',
    ...extra
  }
}

export interface McpRequest {
  method: string
  /** the path and query as received */
  url: string
  headers: IncomingHttpHeaders
  /** the JSON-RPC method of a POST's message (initialize, tools/list, tools/call, ...); absent on GET and DELETE */
  rpc?: string
  /** with tools/call: the tool's name */
  tool?: string
  /** settles when the server's response to this request closes (sent in full, or its connection gone) */
  closed: Promise<void>
}

export interface TestMcpServer {
  /** http://127.0.0.1:PORT */
  url: string
  /** every request received, in order */
  requests: McpRequest[]
  /** the tools/call requests received for `tool` */
  calls: (tool: string) => McpRequest[]
  /** stateful: the session ids issued, in order */
  sessions: string[]
  /** holdLists: lets the tools/list answers waiting (and every later one) through */
  releaseLists: () => void
  /** answers every `hold` call waiting so far */
  release: () => void
  /** stateful: a server-initiated message (notifications/message, `text` its data) to the session, on its GET stream */
  log: (session: string, text: string) => Promise<void>
}

export interface McpServerOptions {
  stateful?: boolean
  /** the CATALOG's tools, resources, templates and prompts besides whoami and write-note */
  catalog?: boolean
  /** POSTs answered as text/event-stream (stateless only) */
  sse?: boolean
  /** tools/list: a progress notification, then the list once releaseLists() is called */
  holdLists?: boolean
  /** stateful: an event store per session, so a GET with Last-Event-ID replays what followed */
  resumable?: boolean
  /** the SSE keep-alive comment interval (the SDK's default: 15 s); 0: none */
  keepAliveMs?: number
}

/** With `catalog`: what the server offers beyond whoami and write-note. */
export const CATALOG = {
  tools: ['search-docs', 'admin-reset', 'unlisted-tool'],
  resources: ['file:///public/readme', 'file:///private/plan', 'file:///private/keys', 'other://thing'],
  templates: ['file:///public/{name}', 'file:///private/{name}', 'file:///private/plans/{id}', 'file:///{path}'],
  prompts: ['summarise', 'admin-prompt', 'unlisted-prompt']
} as const

interface Extras { catalog: boolean, holdLists: boolean, held: () => Promise<void> }

function addCatalog (server: McpServer): void {
  for (const name of CATALOG.tools) {
    server.registerTool(name, { description: `the catalog's ${name}` }, async () => ({ content: [{ type: 'text', text: name }] }))
  }
  for (const [i, uri] of CATALOG.resources.entries()) {
    server.registerResource(`resource-${i}`, uri, { mimeType: 'text/plain' }, async () => ({ contents: [{ uri, text: uri }] }))
  }
  for (const [i, template] of CATALOG.templates.entries()) {
    server.registerResource(`template-${i}`, new ResourceTemplate(template, { list: undefined }), { mimeType: 'text/plain' },
      async (uri) => ({ contents: [{ uri: uri.href, text: uri.href }] }))
  }
  for (const name of CATALOG.prompts) {
    server.registerPrompt(name, { description: `the catalog's ${name}` }, () => ({ messages: [{ role: 'user', content: { type: 'text', text: name } }] }))
  }
}

/** holdLists: tools/list sends progress, waits for the test, then answers with every tool's name */
function holdToolsList (server: McpServer, extras: Extras): void {
  const names = ['whoami', 'write-note', ...(extras.catalog ? CATALOG.tools : [])]
  server.server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
    const token = request.params?._meta?.progressToken
    const progress = { progressToken: token ?? 0, progress: 1, message: 'listing' }
    if (token !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: progress })
    await extras.held()
    return { tools: names.map((name) => ({ name, inputSchema: { type: 'object' as const } })) }
  })
}

const IDENTITY = ['x-gateway-user', 'x-gateway-scopes', 'x-gateway-key'] as const

/** a tool's progress notification, on the answer's stream (when the request asked for progress) */
async function progress (extra: { _meta?: Record<string, unknown>, sendNotification: (n: never) => Promise<void> }, value: number): Promise<void> {
  const progressToken = extra._meta?.progressToken
  if (typeof progressToken !== 'string' && typeof progressToken !== 'number') return
  await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: value } } as never)
}

/** Stateful: tools whose answers stream (progress notifications over time); `held`: the hold calls waiting for release() */
function streamingTools (server: McpServer, held: Array<() => void>): void {
  // log(): messages of the server's own, on the GET stream
  server.server.registerCapabilities({ logging: {} })
  server.registerTool('hold', { description: 'Progress at once, the answer when the test releases it' }, async (extra) => {
    await progress(extra, 1)
    await new Promise<void>((resolve) => { held.push(resolve) })
    return { content: [{ type: 'text', text: 'released' }] }
  })
  server.registerTool('pause', { description: 'Progress, a silence of _meta.pauseMs, progress again, the answer' }, async (extra) => {
    await progress(extra, 1)
    await new Promise((resolve) => setTimeout(resolve, Number(extra._meta?.pauseMs ?? 0)))
    await progress(extra, 2)
    return { content: [{ type: 'text', text: 'paused' }] }
  })
}

/** `held`: stateful (answers may be event streams), with the tools that stream; their held calls go there */
function mcpServer (headers: IncomingHttpHeaders, extras?: Extras, held?: Array<() => void>): McpServer {
  const server = new McpServer({ name: 'keygate-test-mcp', version: '1.0.0' })
  let notes = 0
  server.registerTool('whoami', { description: 'The identity keygate sent with this request' }, async (extra) => {
    // stateful: this request's headers (the server outlives the initialize it was made for)
    const current = (extra.requestInfo?.headers ?? headers) as IncomingHttpHeaders
    const seen = Object.fromEntries(IDENTITY.map((name) => [name, current[name] ?? null]))
    return { content: [{ type: 'text', text: JSON.stringify(seen) }] }
  })
  server.registerTool('write-note', { description: 'Writes a note (a tool a write scope guards)' }, async () => {
    notes++
    return { content: [{ type: 'text', text: `note ${notes} written` }] }
  })
  if (extras?.catalog === true) addCatalog(server)
  if (extras?.holdLists === true) holdToolsList(server, extras)
  if (held !== undefined) streamingTools(server, held)
  return server
}

/**
 * Events kept for replay, as the SDK's EventStore. Not the SDK's example InMemoryEventStore: it
 * reads an event's stream from the id's text before the first "_", which is empty for the GET
 * stream's events (its stream is "_GET_stream"), so it never replays them.
 */
function memoryEventStore (): EventStore {
  const events: Array<{ id: string, streamId: string, message: JSONRPCMessage }> = []
  return {
    storeEvent: async (streamId, message) => {
      const id = `${events.length + 1}`
      events.push({ id, streamId, message })
      return id
    },
    getStreamIdForEventId: async (id) => events.find((event) => event.id === id)?.streamId,
    replayEventsAfter: async (lastEventId, { send }) => {
      const at = events.findIndex((event) => event.id === lastEventId)
      const streamId = events[at]?.streamId ?? ''
      for (const event of events.slice(at + 1)) if (at >= 0 && event.streamId === streamId) await send(event.id, event.message)
      return streamId
    }
  }
}

function readJson (chunks: Buffer[]): unknown {
  if (chunks.length === 0) return undefined
  try { return JSON.parse(Buffer.concat(chunks).toString()) } catch { return undefined }
}

/** Stateful: the session's transport (initialize makes one), or an answer for a request that names none or an unknown one. */
interface Sessions {
  transports: Map<string, StreamableHTTPServerTransport>
  servers: Map<string, McpServer>
  ids: string[]
  held: Array<() => void>
  options: McpServerOptions
}

function statefulRequest (sessions: Sessions, req: IncomingMessage, res: ServerResponse, body: unknown): void {
  const { transports, servers, options } = sessions
  const id = req.headers['mcp-session-id']
  let transport = typeof id === 'string' ? transports.get(id) : undefined
  if (transport === undefined && id === undefined && req.method === 'POST' && isInitializeRequest(body)) {
    const server = mcpServer(req.headers, undefined, sessions.held)
    const made = transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sessionId) => { transports.set(sessionId, made); servers.set(sessionId, server); sessions.ids.push(sessionId) },
      ...(options.resumable === true && { eventStore: memoryEventStore() }),
      ...(options.keepAliveMs !== undefined && { keepAliveMs: options.keepAliveMs })
    })
    made.onclose = () => { if (made.sessionId !== undefined) transports.delete(made.sessionId) }
    server.connect(made).then(async () => { await made.handleRequest(req, res, body) }, (error: unknown) => { res.writeHead(500).end(String(error)) })
    return
  }
  if (transport === undefined) {
    res.writeHead(id === undefined ? 400 : 404, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }))
    return
  }
  transport.handleRequest(req, res, body).catch((error: unknown) => { if (!res.headersSent) res.writeHead(500).end(String(error)) })
}

function statelessRequest (req: IncomingMessage, res: ServerResponse, body: unknown, extras: Extras, sse: boolean): void {
  if (req.method !== 'POST') {
    // stateless: no stream to open (GET) nor session to end (DELETE), as the SDK's stateless example answers
    res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' })
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null }))
    return
  }
  const server = mcpServer(req.headers, extras)
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !sse })
  res.on('close', () => { void transport.close(); void server.close() })
  server.connect(transport)
    .then(async () => { await transport.handleRequest(req, res, body) })
    .catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' })
      res.end(String(error))
    })
}

export async function startMcpServer (t: { teardown: (fn: () => unknown) => void }, options: McpServerOptions = {}): Promise<TestMcpServer> {
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  const extras: Extras = { catalog: options.catalog === true, holdLists: options.holdLists === true, held: async () => { await gate } }
  const requests: McpRequest[] = []
  const sessions: Sessions = { transports: new Map(), servers: new Map(), ids: [], held: [], options }
  const { transports } = sessions
  const releaseHeld = (): void => { for (const resolve of sessions.held.splice(0)) resolve() }
  const http = createServer((req, res) => {
    const closed = new Promise<void>((resolve) => { res.once('close', resolve) })
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = readJson(chunks)
      const message = (Array.isArray(body) ? body[0] : body) as { method?: string, params?: { name?: string } } | undefined
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        closed,
        ...(typeof message?.method === 'string' && { rpc: message.method }),
        ...(message?.method === 'tools/call' && typeof message.params?.name === 'string' && { tool: message.params.name })
      })
      if (options.stateful === true) statefulRequest(sessions, req, res, body)
      else statelessRequest(req, res, body, extras, options.sse === true)
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    releaseHeld()
    for (const transport of transports.values()) await transport.close()
    http.closeAllConnections()
    await new Promise((resolve) => http.close(resolve))
  })
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    requests,
    calls: (tool) => requests.filter((r) => r.rpc === 'tools/call' && r.tool === tool),
    sessions: sessions.ids,
    releaseLists: () => { release() },
    release: releaseHeld,
    log: async (session, text) => {
      const server = sessions.servers.get(session)
      if (server === undefined) throw new Error(`no session ${session}`)
      await server.server.sendLoggingMessage({ level: 'info', data: text })
    }
  }
}
