// MCP sessions belong to who opened them (issue 42, point 4; docs/mcp.md, "Sessions"). A real
// stateful MCP server (the SDK's McpServer, a session per initialize: test/helpers/mcp-server.ts)
// behind two keygates on one Redis (one prefix: what two gateway processes share), reached by the
// SDK's own client with keygate tokens. Alice opens a session and calls a tool; Bob, with a valid
// token of his own, replays her session id and is refused 404 (JSON-RPC "Session not found") by
// either gateway, and the MCP server never sees his request; Alice's session works through the
// other gateway too; her DELETE ends it, and then it is refused for her as well.
import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { mcpPostHeaders, startMcpServer } from '../helpers/mcp-server.js'
import { deletePrefix, startPrivateRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, startTestGateway } from '../helpers/stack.js'

interface ToolText { content: Array<{ type: string, text: string }> }
const text = (result: unknown): string => (result as ToolText).content[0]?.text ?? ''

const ROUTES = `routes:
  - prefix: /mcp
    upstream: UPSTREAM
    auth: bearer
    mcp:
      sessions:
        ttlSeconds: 3600
`
const INITIALIZE = {
  jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }
}

/** One JSON-RPC POST, as any HTTP client sends it. */
async function post (url: string, token: string, message: unknown, session?: string): Promise<Response> {
  return await fetch(url, {
    method: 'POST',
    headers: mcpPostHeaders(token, session === undefined ? {} : { 'mcp-session-id': session }),
    body: JSON.stringify(message)
  })
}

/** Users alice and bob, each with a token; alice opens a session with a raw initialize (its id). */
async function aliceOpensSession (url: string, gateway: Parameters<typeof addUser>[0]): Promise<{ alice: string, bob: string, session: string }> {
  await addUser(gateway, 'alice')
  await addUser(gateway, 'bob')
  const alice = await login(url, 'alice')
  const bob = await login(url, 'bob')
  const init = await post(`${url}/mcp`, alice, INITIALIZE)
  const session = init.headers.get('mcp-session-id') ?? ''
  await init.body?.cancel()
  return { alice, bob, session }
}

async function connect (url: string, token: string): Promise<{ client: Client, transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'keygate-session-test', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } })
  await client.connect(transport)
  return { client, transport }
}

// what an MCP client reads: a JSON-RPC error -32001 (the SDK's server answers an unknown session so), the catalog code in its data
const NOT_FOUND = { jsonrpc: '2.0', error: { code: -32001, message: /session not found/i, data: { code: 'MCP_SESSION_NOT_FOUND', status: 404 } } }

t.test('an MCP session is its opener\'s, on every gateway of one Redis; DELETE ends it', async (t) => {
  const mcp = await startMcpServer(t, { stateful: true })
  const redis = await testRedisUrl()
  const redisPrefix = uniquePrefix('mcp-sessions')
  t.teardown(async () => { await deletePrefix(redis, redisPrefix) })
  const routes = (url: string): ReturnType<typeof routesFromYaml> => routesFromYaml(ROUTES, url)
  const one = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: mcp.url, routes })
  const two = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: mcp.url, routes })
  await addUser(one, 'alice')
  await addUser(one, 'bob')
  const alice = await login(one.url, 'alice')
  const bob = await login(two.url, 'bob')

  const { client, transport } = await connect(`${one.url}/mcp`, alice)
  t.teardown(async () => { await client.close() })
  const session = transport.sessionId ?? ''
  t.ok(mcp.sessions.includes(session), 'the SDK client opened a session through keygate: the id the MCP server issued')
  t.same(JSON.parse(text(await client.callTool({ name: 'whoami', arguments: {} })))['x-gateway-user'], 'alice', 'and calls a tool in it')

  for (const [name, gateway] of [['the gateway it was opened on', one], ['another gateway on the same Redis', two]] as const) {
    const received = mcp.requests.length
    const res = await post(`${gateway.url}/mcp`, bob, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'write-note', arguments: {} } }, session)
    t.equal(res.status, 404, `Bob, riding Alice's session id on ${name}: 404`)
    t.match(res.headers.get('content-type'), /^application\/json/)
    t.match(await res.json(), NOT_FOUND, 'a JSON-RPC error an MCP client reads as "session not found"')
    t.equal(mcp.requests.length, received, 'and the MCP server never saw the request')
  }
  t.equal(mcp.calls('write-note').length, 0)

  const unknown = await post(`${two.url}/mcp`, alice, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, 'no-such-session')
  t.equal(unknown.status, 404, 'an id no upstream issued through keygate: 404, even for a valid user')
  for (const bad of ['a b', 'x'.repeat(257), 'caf\u00e9']) {
    const res = await post(`${two.url}/mcp`, alice, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, bad)
    t.equal(res.status, 404, `a malformed session id (${JSON.stringify(bad.slice(0, 8))}, ${bad.length} characters) is refused`)
  }

  // Alice's session through the other gateway: hers there too
  const other = await post(`${two.url}/mcp`, alice, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'whoami', arguments: {} } }, session)
  t.equal(other.status, 200, 'Alice\'s session works through the other gateway')
  t.match(await other.text(), /alice/)

  // Bob's own session is his
  const bobInit = await post(`${two.url}/mcp`, bob, INITIALIZE)
  t.equal(bobInit.status, 200, 'Bob opens a session of his own')
  const bobSession = bobInit.headers.get('mcp-session-id') ?? ''
  t.ok(mcp.sessions.includes(bobSession))
  await bobInit.body?.cancel()
  const aliceOnBobs = await post(`${one.url}/mcp`, alice, { jsonrpc: '2.0', id: 5, method: 'tools/list' }, bobSession)
  t.equal(aliceOnBobs.status, 404, 'which Alice cannot ride either')

  // Bob cannot end Alice's session
  const bobDelete = await fetch(`${two.url}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${bob}`, 'mcp-session-id': session } })
  t.equal(bobDelete.status, 404, 'Bob\'s DELETE of Alice\'s session: 404, never sent')
  t.notOk(mcp.requests.some((r) => r.method === 'DELETE'), 'no DELETE reached the MCP server')

  // Alice ends it (the SDK's terminateSession: DELETE with the id), on gateway one; refused for her then, on both
  await transport.terminateSession()
  t.ok(mcp.requests.some((r) => r.method === 'DELETE' && r.headers['mcp-session-id'] === session), 'Alice\'s DELETE reached the MCP server')
  for (const gateway of [one, two]) {
    const received = mcp.requests.length
    const after = await post(`${gateway.url}/mcp`, alice, { jsonrpc: '2.0', id: 6, method: 'tools/list' }, session)
    t.equal(after.status, 404, 'the ended session is refused for Alice as well')
    t.equal(mcp.requests.length, received, 'by keygate: the MCP server never saw it')
  }
})

t.test('the embedded store: the same rules in one gateway, and a session on a route that is not MCP is the upstream\'s own business', async (t) => {
  const mcp = await startMcpServer(t, { stateful: true })
  const gateway = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: mcp.url,
    routes: (url) => routesFromYaml(`${ROUTES}  - prefix: /plain
    upstream: UPSTREAM
    auth: bearer
`, url)
  })
  const { alice, bob, session } = await aliceOpensSession(gateway.url, gateway)
  t.ok(mcp.sessions.includes(session), 'Alice opened a session')
  t.equal((await post(`${gateway.url}/mcp`, bob, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session)).status, 404, 'Bob is refused it')
  const own = await post(`${gateway.url}/mcp`, alice, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)
  t.equal(own.status, 202, 'Alice is not')
  // without `mcp:` keygate does not look at sessions (the route is not MCP): the upstream answers for itself
  const plain = await post(`${gateway.url}/plain`, bob, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, session)
  t.equal(plain.status, 200, 'on a route without mcp:, keygate binds nothing (the MCP server itself answers)')
  await plain.body?.cancel()
})

t.test('Redis away: a request in a session is refused 503, and a session opened meanwhile is not handed out', async (t) => {
  const mcp = await startMcpServer(t, { stateful: true })
  const redis = await startPrivateRedis(t)
  t.teardown(() => { redis.resume() })
  const gateway = await startTestGateway(t, { store: 'redis', redis: redis.url, upstreamUrl: mcp.url, routes: (url) => routesFromYaml(ROUTES, url) })
  const { alice, bob, session } = await aliceOpensSession(gateway.url, gateway)
  t.equal((await post(`${gateway.url}/mcp`, alice, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status, 202, 'a session in use')
  // bob's token is checked once before the pause, so that his user is known to the gateway then
  t.equal((await post(`${gateway.url}/mcp`, bob, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, session)).status, 404, 'and not Bob\'s')

  redis.pause()
  const received = mcp.requests.length
  const inSession = await post(`${gateway.url}/mcp`, alice, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, session)
  t.equal(inSession.status, 503, 'a request in the session: 503, the owner cannot be checked')
  t.match(await inSession.json(), { error: { data: { code: 'STORE_UNAVAILABLE' } } })
  t.equal(mcp.requests.length, received, 'and it was not forwarded')
  const opened = await post(`${gateway.url}/mcp`, alice, INITIALIZE)
  t.equal(opened.status, 503, 'an initialize the upstream answered with a new session: 503, its binding could not be stored')
  t.equal(opened.headers.get('mcp-session-id'), null, 'the new id is not handed out')
  t.equal(mcp.sessions.length, 2, '(the upstream did open it)')
  await opened.body?.cancel()
  redis.resume()
  // the binding's write may still land once Redis runs what it queued: it names Alice, so it gives nobody else anything
  t.equal((await post(`${gateway.url}/mcp`, bob, { jsonrpc: '2.0', method: 'notifications/initialized' }, mcp.sessions[1])).status, 404,
    'Redis back: the id never handed out is refused to another user')
  const back = await post(`${gateway.url}/mcp`, alice, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, session)
  t.equal(back.status, 200, 'and the session opened before works again')
  await back.body?.cancel()
})
