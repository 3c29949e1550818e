// Lists show what may be called (docs/mcp.md, issue 42 point 3): a real MCP server (the SDK's
// McpServer with more tools, resources, templates and prompts, test/helpers/mcp-server.ts) behind
// keygate, answering as JSON and as an event stream; the SDK's own client lists through keygate
// and sees only what the policy lets its caller use (alice: the route's scope only; bob: more).
// A held tools/list proves the event stream passes event by event (its progress notification
// arrives while the list is still held); batches are filtered response by response; a hostile
// raw upstream's list answers that keygate cannot read are refused, never passed unfiltered.
import { createServer, request as httpRequest, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gzipSync } from 'node:zlib'
import { randomUUID } from 'node:crypto'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import t from 'tap'
import { send, type RawResponse } from '../helpers/http.js'
import { mcpPostHeaders, startMcpServer } from '../helpers/mcp-server.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, startTestGateway } from '../helpers/stack.js'

const POLICY = `    mcp:
      tools: { whoami: [], "write-*": [notes:write], "search-*": [notes:write], "admin-*": deny }
      resources: { "file:///public/*": [], "file:///private/*": [files:private], "file:///private/keys": deny }
      prompts: { summarise: [], "admin-*": [mcp:admin] }
      default: deny
`
const route = (path: string, upstream: string): string => `  - ${path}
    upstream: ${upstream}
    auth: bearer
    scopes: [mcp:use]
${POLICY}`

/** what each caller may see of the catalog (whoami and write-note, and CATALOG's) */
const SEES = {
  alice: { tools: ['whoami'], resources: ['file:///public/readme'], templates: ['file:///public/{name}'], prompts: ['summarise'] },
  bob: {
    tools: ['search-docs', 'whoami', 'write-note'],
    resources: ['file:///private/plan', 'file:///public/readme'],
    templates: ['file:///private/plans/{id}', 'file:///public/{name}'],
    prompts: ['admin-prompt', 'summarise']
  }
}

interface Rpc {
  jsonrpc: string
  id: string | number | null
  result?: Record<string, unknown>
  error?: { code: number, message: string, data?: { code: string } }
}
const names = (entries: unknown): string[] => (entries as Array<{ name: string }>).map((entry) => entry.name).sort()

/** The JSON-RPC messages of an event stream's text (LF-separated, as the SDK and keygate's rewriting write them). */
function events (text: string): Rpc[] {
  return text.split('\n\n').flatMap((event) => {
    const data = event.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trimStart()).join('\n')
    return data === '' ? [] : [JSON.parse(data) as Rpc]
  })
}

/** `/raw/sse-open` answers that its stream was closed (keygate cut it) */
let openStreamClosed: Promise<void> | undefined
/** the Accept-Encoding of the hostile upstream's last request */
let acceptEncoding: string | undefined

/** A hostile upstream: each path answers a list request (its id echoed) in one broken or tricky way. */
async function startHostile (t: { teardown: (fn: () => unknown) => void }): Promise<string> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const id = chunks.length === 0 ? 1 : (JSON.parse(Buffer.concat(chunks).toString()) as { id: number }).id
      acceptEncoding = req.headers['accept-encoding']
      answer(req.url ?? '', id, res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)) })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const json = (res: ServerResponse, text: string): void => { res.writeHead(200, { 'content-type': 'application/json' }).end(text) }
const sse = (res: ServerResponse, ...parts: string[]): void => {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  for (const part of parts) res.write(part)
  res.end()
}

function answer (url: string, id: number, res: ServerResponse): void {
  const head = `{"jsonrpc":"2.0","id":${id},"result":`
  const progress = 'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n'
  switch (url) {
    case '/raw/good':
      // chunked (no Content-Length), with entries to drop and members to keep
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
      res.write(`${head}{"tools":[{"name":"whoami","inputSchema":{"type":"object"},"x":1},{"name":"admin-reset"},`)
      res.end('{"Name":"whoami","name":"admin-x"},5,{"name":7},{"name":"write-note"}],"nextCursor":"c2","_meta":{"m":1}}}')
      return
    case '/raw/dup': return json(res, `${head}{"tools":[{"name":"whoami"}],"tools":[{"name":"admin-reset"}]}}`)
    case '/raw/case': return json(res, `${head}{"tools":[],"Tools":[{"name":"admin-reset"}]}}`)
    case '/raw/no-list': return json(res, `${head}{"items":[{"name":"admin-reset"}]}}`)
    case '/raw/truncated': return json(res, `${head}{"tools":[{"name":"admin-reset"}]`)
    case '/raw/text': res.writeHead(200, { 'content-type': 'text/plain' }).end('admin-reset'); return
    // compressed although keygate asked for identity
    case '/raw/gzip':
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
      res.end(gzipSync(`${head}{"tools":[{"name":"admin-reset"}]}}`))
      return
    case '/raw/big': return json(res, `${head}{"tools":[{"name":"admin-reset","pad":"${'x'.repeat(5 * 1024 * 1024)}"}]}}`)
    case '/raw/sse-dup': return sse(res, progress, `data: ${head}{"tools":[{"name":"whoami"}],"tools":[{"name":"admin-reset"}]}}\n\n`)
    case '/raw/sse-open':
      // a bad event, then the stream kept open: keygate ends the client's stream and closes this one
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(`${progress}data: not json\n\n`)
      openStreamClosed = new Promise((resolve) => res.on('close', resolve))
      return
    // a byte order mark, CR line ends, the data over two lines, an id and a comment kept
    case '/raw/sse-tricky': return sse(res, '\ufeff: hello\r', `id: e1\rdata: ${head}{"tools":\rdata: [{"name":"whoami"},{"name":"admin-reset"}]}}\r\r`)
    // no blank line at the end: still read, never passed unread
    case '/raw/sse-unended': return sse(res, progress, `data: ${head}{"tools":[{"name":"admin-reset"},{"name":"whoami"}]}}`)
    // a GET stream replaying a list's response (as a resumed stream does)
    case '/raw/stream': return sse(res, 'event: endpoint\ndata: /messages?sessionId=1\n\n',
      'id: 7\ndata: {"jsonrpc":"2.0","id":3,"result":{"prompts":[{"name":"admin-prompt"},{"name":"summarise"}]}}\n\n')
    // a GET stream without its media type (the SDK's client reads a GET's body as events whatever its Content-Type says)
    case '/raw/stream-untyped':
    case '/raw/stream-twice': {
      const replay = 'id: 7\ndata: {"jsonrpc":"2.0","id":3,"result":{"prompts":[{"name":"admin-prompt"},{"name":"summarise"}]}}\n\n'
      res.writeHead(200, url.endsWith('twice') ? [['content-type', 'text/event-stream'], ['content-type', 'text/event-stream']] : {})
      res.end(replay)
      return
    }
    default: res.writeHead(404).end()
  }
}

/**
 * A stateful SDK server (one transport per session) whose tools/list and `slow` tool each wait for
 * the test, as a server that reads its catalog from elsewhere does: `listReached` resolves once a
 * tools/list is waiting, `callReached` once a call of `slow` is.
 */
async function startSlowServer (t: { teardown: (fn: () => unknown) => void }): Promise<{
  url: string, listReached: Promise<void>, callReached: Promise<void>, release: () => void
}> {
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  let reached: () => void = () => {}
  const listReached = new Promise<void>((resolve) => { reached = resolve })
  let called: () => void = () => {}
  const callReached = new Promise<void>((resolve) => { called = resolve })
  const transports = new Map<string, StreamableHTTPServerTransport>()
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString()) as unknown
      const id = req.headers['mcp-session-id']
      let transport = typeof id === 'string' ? transports.get(id) : undefined
      if (transport === undefined) {
        const made = transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(), onsessioninitialized: (session) => { transports.set(session, made) }
        })
        const mcp = new McpServer({ name: 'slow', version: '1.0.0' })
        mcp.registerTool('slow', { description: 'answers once released' }, async () => {
          called()
          await gate
          return { content: [{ type: 'text', text: 'slow' }] }
        })
        mcp.server.setRequestHandler(ListToolsRequestSchema, async () => {
          reached()
          await gate
          return { tools: ['whoami', 'admin-reset'].map((name) => ({ name, inputSchema: { type: 'object' as const } })) }
        })
        void mcp.connect(made).then(async () => { await made.handleRequest(req, res, body) })
        return
      }
      void transport.handleRequest(req, res, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    release()
    for (const transport of transports.values()) await transport.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, listReached, callReached, release: () => { release() } }
}

t.test('MCP lists show only what the caller may use', async (t) => {
  const mcpJson = await startMcpServer(t, { catalog: true })
  const mcpSse = await startMcpServer(t, { catalog: true, sse: true })
  const held = await startMcpServer(t, { catalog: true, sse: true, holdLists: true })
  const hostile = await startHostile(t)
  const slow = await startSlowServer(t)
  const routes = `routes:
${route('path: /mcp', mcpJson.url)}${route('path: /mcp-sse', mcpSse.url)}${route('path: /mcp-held', held.url)}${route('prefix: /raw', hostile)}${
  route('path: /mcp-slow', slow.url).replace('whoami: []', 'whoami: [], slow: []')}`
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: mcpJson.url, routes: () => routesFromYaml(routes, mcpJson.url) })
  await addUser(gw, 'alice')
  await addUser(gw, 'bob')
  await gw.app.keygate.users.setScopes('alice', ['mcp:use'])
  await gw.app.keygate.users.setScopes('bob', ['mcp:use', 'notes:write', 'files:private', 'mcp:admin'])
  const tokens = { alice: await login(gw.url, 'alice'), bob: await login(gw.url, 'bob') }

  const connect = async (path: string, user: 'alice' | 'bob'): Promise<Client> => {
    const client = new Client({ name: 'keygate-test-host', version: '1.0.0' })
    const requestInit = { headers: { authorization: `Bearer ${tokens[user]}` } }
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}${path}`), { requestInit }))
    t.teardown(async () => { await client.close() })
    return client
  }
  const post = async (path: string, user: 'alice' | 'bob', body: string, headers: Record<string, string> = {}): Promise<RawResponse> =>
    await send(gw.url, path, { method: 'POST', headers: mcpPostHeaders(tokens[user], headers), body })
  const list = (method: string, id: number | string): string => JSON.stringify({ jsonrpc: '2.0', id, method })

  for (const [path, form] of [['/mcp', 'application/json'], ['/mcp-sse', 'text/event-stream']] as const) {
    t.test(`${form} answers: the SDK client sees only what each caller may use`, async (t) => {
      for (const user of ['alice', 'bob'] as const) {
        const client = await connect(path, user)
        const sees = SEES[user]
        t.same(names((await client.listTools()).tools), sees.tools, `${user}'s tools`)
        t.same((await client.listResources()).resources.map((r) => r.uri).sort(), sees.resources, `${user}'s resources`)
        t.same((await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate).sort(), sees.templates, `${user}'s templates`)
        t.same(names((await client.listPrompts()).prompts), sees.prompts, `${user}'s prompts`)
      }
      const raw = await post(path, 'alice', list('tools/list', 5))
      t.equal(raw.status, 200)
      t.match(raw.headers['content-type'], form)
      if (form === 'application/json') t.equal(Number(raw.headers['content-length']), raw.body.length, 'Content-Length is the rewritten body\'s')
      else t.equal(raw.headers['content-length'], undefined, 'a stream: no Content-Length')
      const [message] = form === 'application/json' ? [raw.json<Rpc>()] : events(raw.text)
      t.same(names(message?.result?.tools), ['whoami'])
      t.notMatch(raw.text, 'admin-reset', 'a denied tool is never shown')
    })
  }

  t.test('a tool the list hides is refused when called; one it shows is answered', async (t) => {
    const client = await connect('/mcp', 'alice')
    await t.rejects(client.callTool({ name: 'write-note', arguments: {} }), /403|notes:write/)
    t.equal(mcpJson.calls('write-note').length, 0)
    t.ok(await client.callTool({ name: 'whoami', arguments: {} }))
  })

  t.test('resources/read: a URI a server reads otherwise than its text (dot segments, needless or hiding escapes, capitals) is refused', async (t) => {
    for (const uri of ['file:///public/../private/plan', 'file:///public/%2E%2e/private/plan', 'file:///public/./readme', 'file:///public/..',
      'file:///%70rivate/plan', 'file:///public/..%2fprivate/plan', 'file:///public/..%5Cprivate/plan', 'file:///public/%252e%252e/private/plan',
      'FILE:///private/plan', 'File:///public/readme', 'https://EXAMPLE.com/private/plan']) {
      const before = mcpJson.requests.length
      const res = await post('/mcp', 'alice', JSON.stringify({ jsonrpc: '2.0', id: 31, method: 'resources/read', params: { uri } }))
      t.equal(res.status, 400, `${uri}: 400`)
      t.match(res.json(), { jsonrpc: '2.0', id: 31, error: { data: { code: 'MCP_INVALID_MESSAGE' } } }, `${uri}: a JSON-RPC error`)
      t.equal(mcpJson.requests.length, before, `${uri}: nothing reached the upstream`)
    }
    const read = await post('/mcp', 'alice', JSON.stringify({ jsonrpc: '2.0', id: 32, method: 'resources/read', params: { uri: 'file:///public/readme' } }))
    t.equal(read.status, 200, 'a public file is read')
  })

  t.test('batches (protocol 2025-03-26): each list response filtered by its request\'s id and method', async (t) => {
    const batch = `[${list('tools/list', 1)},${list('prompts/list', 'p')},${list('resources/templates/list', 3)},{"jsonrpc":"2.0","id":4,"method":"ping"}]`
    for (const path of ['/mcp', '/mcp-sse']) {
      const res = await post(path, 'alice', batch, { 'mcp-protocol-version': '2025-03-26' })
      t.equal(res.status, 200, res.text)
      const answers = path === '/mcp' ? res.json<Rpc[]>() : events(res.text)
      const byId = new Map(answers.map((a) => [a.id, a]))
      t.same(names(byId.get(1)?.result?.tools), ['whoami'], `${path}: tools`)
      t.same(names(byId.get('p')?.result?.prompts), ['summarise'], `${path}: prompts`)
      t.same((byId.get(3)?.result?.resourceTemplates as Array<{ uriTemplate: string }>).map((r) => r.uriTemplate), ['file:///public/{name}'])
      t.same(byId.get(4)?.result, {}, `${path}: the ping's answer as it came`)
    }
  })

  t.test('an event stream passes event by event: the notification before a held list arrives while the list is held', async (t) => {
    const { hostname, port } = new URL(gw.url)
    const body = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: { _meta: { progressToken: 'p1' } } })
    let text = ''
    let ended = false
    const done = new Promise<void>((resolve, reject) => {
      let sawProgress = false
      const req = httpRequest({ host: hostname, port, method: 'POST', path: '/mcp-held', headers: mcpPostHeaders(tokens.alice), agent: false }, (res) => {
        t.match(res.headers['content-type'], 'text/event-stream')
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          text += chunk
          if (!sawProgress && text.includes('notifications/progress')) {
            sawProgress = true
            t.notOk(ended, 'the stream is still open: the list is held at the server')
            t.notMatch(text, '"tools"', 'the list has not come yet')
            held.releaseLists()
          }
        })
        res.on('end', () => { ended = true; resolve() })
        res.on('error', reject)
      })
      req.on('error', reject)
      req.end(body)
    })
    await done
    const [progress, result] = events(text)
    t.match(progress, { method: 'notifications/progress', params: { progressToken: 'p1' } })
    t.equal(result?.id, 9)
    t.same(names(result?.result?.tools), ['whoami'], 'the list, filtered, after it')
  })

  t.test('a list request\'s id reused by a call in the same session: the list\'s response, sent on the call\'s stream, is filtered there too', {
    todo: 'keygate filters only the answer of the POST that asked for a list (docs/mcp.md, Lists: Limits)'
  }, async (t) => {
    const init = await post('/mcp-slow', 'alice', JSON.stringify({
      jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } }
    }))
    const session = { 'mcp-session-id': String(init.headers['mcp-session-id']) }
    t.equal(init.status, 200, init.text)
    // the list request waits at the server; a call with its id, in the same session, takes its place in the server's id -> stream map
    const listing = post('/mcp-slow', 'alice', list('tools/list', 9), session)
    await slow.listReached
    const slowCall = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'slow', arguments: {} } })
    const calling = post('/mcp-slow', 'alice', slowCall, session)
    await slow.callReached
    slow.release()
    const call = await calling
    t.notMatch(call.text, 'admin-reset', 'the call\'s answer shows no tool alice may not use')
    void listing.catch(() => {})
  })

  t.test('a hostile upstream: what keygate cannot read as the list is refused, never passed', async (t) => {
    const good = await post('/raw/good', 'alice', list('tools/list', 21))
    t.equal(good.status, 200, good.text)
    t.equal(Number(good.headers['content-length']), good.body.length)
    t.same(good.json(), {
      jsonrpc: '2.0', id: 21, result: { tools: [{ name: 'whoami', inputSchema: { type: 'object' }, x: 1 }], nextCursor: 'c2', _meta: { m: 1 } }
    }, 'only the allowed entry; nextCursor and the other members kept')
    for (const path of ['/raw/dup', '/raw/case', '/raw/no-list', '/raw/truncated', '/raw/text', '/raw/big', '/raw/gzip']) {
      const res = await post(path, 'alice', list('tools/list', 22), { 'accept-encoding': 'gzip, br' })
      t.equal(acceptEncoding, 'identity', `${path}: keygate asked for an uncompressed answer`)
      t.equal(res.status, 502, `${path}: 502`)
      t.match(res.json(), { jsonrpc: '2.0', id: 22, error: { code: -32001, data: { code: 'MCP_LIST_UNFILTERABLE' } } },
        `${path}: a JSON-RPC error with the list's id`)
      t.notMatch(res.text, 'admin-reset', `${path}: nothing of the list passed`)
    }
    const dup = await post('/raw/sse-dup', 'alice', list('tools/list', 23))
    const [progress, refused] = events(dup.text)
    t.match(progress, { method: 'notifications/progress' }, 'the events before it passed')
    t.match(refused, { id: 23, error: { data: { code: 'MCP_LIST_UNFILTERABLE' } } }, 'the list\'s event replaced by an error')
    t.notMatch(dup.text, 'admin-reset')
    const open = await post('/raw/sse-open', 'alice', list('tools/list', 26))
    t.match(events(open.text)[1], { id: 26, error: { data: { code: 'MCP_LIST_UNFILTERABLE' } } }, 'a stream kept open: the client\'s ends after the error')
    await openStreamClosed
    t.pass('and the upstream\'s stream was closed')
    const tricky = await post('/raw/sse-tricky', 'alice', list('tools/list', 24))
    t.equal(tricky.text, ': hello\nid: e1\ndata: {"jsonrpc":"2.0","id":24,"result":{"tools":[{"name":"whoami"}]}}\n\n',
      'read past the byte order mark and CR line ends, the two data lines as one; the comment and the event\'s id kept')
    const unended = await post('/raw/sse-unended', 'alice', list('tools/list', 25))
    t.same(names(events(unended.text)[1]?.result?.tools), ['whoami'], 'an event without its blank line is still filtered')
    t.notMatch(unended.text, 'admin-reset')
    const headers = { authorization: `Bearer ${tokens.alice}`, accept: 'text/event-stream', 'last-event-id': '6' }
    const stream = await send(gw.url, '/raw/stream', { headers })
    t.equal(stream.status, 200)
    t.ok(stream.text.startsWith('event: endpoint\ndata: /messages?sessionId=1\n\n'), 'an event of another type passes unread')
    t.same(names(events(stream.text.slice(stream.text.indexOf('id: 7')))[0]?.result?.prompts), ['summarise'],
      'a GET stream replaying a list: filtered by its shape')
    for (const path of ['/raw/stream-untyped', '/raw/stream-twice']) {
      const untyped = await send(gw.url, path, { headers })
      t.notMatch(untyped.text, 'admin-prompt', `${path}: a GET's answer keygate does not read as an event stream is not passed`)
      t.equal(untyped.status, 502, `${path}: 502`)
    }
  })
})
