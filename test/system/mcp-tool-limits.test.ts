// Per-tool limits, usage and metrics on MCP routes (issue 42, point 7; docs/mcp.md, "Per-tool
// limits, usage and traces"). A real MCP server (the SDK's McpServer, stateless:
// test/helpers/mcp-server.ts) behind two keygates on one Redis prefix (what two gateway processes
// share). A tool's own rate limit (mcp.toolRateLimits) counts the calls through both gateways in
// one counter; the call over it is refused 429, as a JSON-RPC error with the RateLimit fields,
// and never reaches the server; a batch of calls costs one request per call. The metrics (each
// gateway's /metrics listener) count each message by method and tool, a tool the policy does not
// name as `other`; usage over time
// (flushed by hand) gives a key's calls per tool, as the portal reads them; a user's read-out of
// her limits lists the tool's.
import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { mcpPostHeaders, startMcpServer } from '../helpers/mcp-server.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, type GatewayHandle } from '../helpers/stack.js'
import { startMetricsServer } from '../../gateway/src/http/metrics-server.js'

const ROUTES = `routes:
  - name: mcp
    path: /mcp
    upstream: UPSTREAM
    auth: bearer
    mcp:
      tools:
        "write-*": []
      toolRateLimits:
        write-note:
          - { by: user, limit: 2, window: 1h }
  - name: signed-mcp
    path: /signed/mcp
    upstream: UPSTREAM
    auth: signed
    mcp:
      tools:
        whoami: []
`
const FLUSH_BY_HAND = { enabled: true, flushMs: 60_000, maxSeries: 50_000 }

const call = (id: number, name: string): object => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } })

async function post (url: string, token: string, message: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return await fetch(`${url}/mcp`, { method: 'POST', headers: mcpPostHeaders(token, headers), body: JSON.stringify(message) })
}

async function connect (t: { teardown: (fn: () => unknown) => void }, url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'keygate-tool-limits-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }))
  t.teardown(async () => { await client.close() })
  return client
}

const mcp = await startMcpServer(t)
const redis = await testRedisUrl()
const redisPrefix = uniquePrefix('mcp-tool-limits')
t.teardown(async () => { await deletePrefix(redis, redisPrefix) })
const start = async (): Promise<GatewayHandle> => await startTestGateway(t, {
  store: 'redis', redisPrefix, upstreamUrl: mcp.url, routes: (url) => routesFromYaml(ROUTES, url), config: { usageAnalytics: FLUSH_BY_HAND }
})
const one = await start()
const two = await start()
for (const name of ['alice', 'bob']) await addUser(one, name)
const alice = await login(one.url, 'alice')
const bob = await login(two.url, 'bob')

t.test('a tool\'s rate limit counts its calls through every gateway on one Redis; over it, 429 before the server, as JSON-RPC', async (t) => {
  const viaOne = await connect(t, one.url, alice)
  const viaTwo = await connect(t, two.url, alice)
  t.match(await viaOne.callTool({ name: 'write-note', arguments: {} }), { content: [{ text: /^note \d+ written$/ }] }, 'the first call, through one')
  t.match(await viaTwo.callTool({ name: 'write-note', arguments: {} }), { content: [{ text: /^note \d+ written$/ }] }, 'the second, through the other')
  await t.rejects(viaTwo.callTool({ name: 'write-note', arguments: {} }), /429/, 'the SDK client surfaces the refusal of the third')
  const calls = mcp.calls('write-note').length

  const res = await post(one.url, alice, call(9, 'write-note'))
  t.equal(res.status, 429, 'the fourth, through the first gateway: refused too (one counter on Redis)')
  t.match(res.headers.get('content-type'), /^application\/json/)
  t.ok(Number(res.headers.get('retry-after')) > 0, 'with Retry-After')
  t.match(res.headers.get('ratelimit-policy'), /^"tool-user-1h";q=2;w=3600$/, 'RateLimit-Policy names the tool\'s limit')
  t.match(res.headers.get('ratelimit'), /^"tool-user-1h";r=0;t=\d+$/)
  t.match(await res.json(), {
    jsonrpc: '2.0', id: 9, error: { code: -32001, data: { code: 'RATE_LIMITED', status: 429, policy: 'tool-user-1h', by: 'user', limit: 2 } }
  }, 'a JSON-RPC error with the request\'s id; the problem in its data')
  t.equal(mcp.calls('write-note').length, calls, 'the refused calls never reached the MCP server')

  t.equal((await post(one.url, alice, call(10, 'whoami'))).status, 200, 'a tool without limits of its own still passes for alice')
  const standing = await send(two.url, '/v1/usage', { headers: { authorization: `Bearer ${alice}` } })
  t.match(standing.json(), {
    user: 'alice', items: [{ routes: ['mcp'], tools: ['write-note'], policy: 'tool-user-1h', by: 'user', limit: 2, used: 2, remaining: 0 }]
  },
  'alice\'s read-out of her limits (the portal\'s table) lists the tool\'s, used up')
  t.equal((await post(two.url, bob, call(11, 'write-note'))).status, 200, 'and the limited tool for bob: it counts per user')
  // a batch (protocol 2025-03-26, no MCP-Protocol-Version): each call costs one; bob has one left
  const before = mcp.calls('write-note').length
  const batch = await fetch(`${one.url}/mcp`, {
    method: 'POST',
    headers: { ...mcpPostHeaders(bob), 'mcp-protocol-version': '2025-03-26' },
    body: JSON.stringify([call(12, 'write-note'), call(13, 'write-note')])
  })
  t.equal(batch.status, 429, 'a batch of two calls, with one left: refused whole')
  await batch.body?.cancel()
  t.equal(mcp.calls('write-note').length, before, 'and not forwarded')
  t.equal((await post(one.url, bob, call(14, 'write-note'))).status, 200, 'the refused batch counted nothing: bob\'s last call passes')
})

t.test('metrics by JSON-RPC method and tool: names the policy lists, its globs, and `other` for any other', async (t) => {
  for (const [id, name] of [[20, 'write-todo'], [21, 'launch-the-missiles-1'], [22, 'launch-the-missiles-2']] as const) {
    const res = await post(one.url, alice, call(id, name))
    t.equal(res.status, 200, `${name}: forwarded (the route's default lets it through; the server answers it unknown)`)
    await res.body?.cancel()
  }
  const unknown = await post(one.url, alice, { jsonrpc: '2.0', id: 23, method: 'x-vendor/anything', params: {} })
  await unknown.body?.cancel()
  // each gateway's /metrics listener, as Prometheus scrapes it
  let scraped = ''
  for (const gateway of [one, two]) {
    const listener = await startMetricsServer(gateway.app.keygate.metrics.scrape, { port: 0, host: '127.0.0.1' })
    t.teardown(listener.close)
    const res = await send(listener.url, '/metrics')
    t.equal(res.status, 200)
    scraped += res.text
  }
  const count = (labels: string): number => [...scraped.matchAll(new RegExp(`^keygate_mcp_messages_total\\{${labels}\\} (\\d+)$`, 'gm'))]
    .reduce((sum, match) => sum + Number(match[1]), 0)
  t.equal(count('route="mcp",method="tools/call",tool="write-note",status="429"'), 4, 'the refused calls, both gateways added up (the batch\'s two)')
  t.ok(count('route="mcp",method="tools/call",tool="write-note",status="200"') >= 4, 'the calls that passed')
  t.equal(count('route="mcp",method="tools/call",tool="write-\\*",status="200"'), 1, 'a name a glob takes: the glob')
  t.equal(count('route="mcp",method="tools/call",tool="other",status="200"'), 3, 'names the policy does not list (whoami among them): one label, other')
  t.equal(count('route="mcp",method="other",tool="",status="200"'), 1, 'a method outside the MCP specification: other')
  t.ok(count('route="mcp",method="initialize",tool="",status="200"') >= 2, 'the SDK clients\' initialize')
  t.notMatch(scraped, /launch-the-missiles|x-vendor/, 'no name a client chose is a label')
})

t.test('usage over time by tool: a key\'s calls per tool, as the portal reads them', async (t) => {
  const keys = rsaKeyPair()
  const registered = await registerKey(one.url, alice, keys)
  t.equal(registered.status, 201)
  const signedCall = async (gateway: GatewayHandle, id: number, name: string): Promise<number> => {
    const res = await sendSigned(gateway.url, {
      keys,
      token: alice,
      method: 'POST',
      target: '/signed/mcp',
      body: JSON.stringify(call(id, name)),
      headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' }
    })
    return res.status
  }
  t.equal(await signedCall(one, 30, 'whoami'), 200)
  t.equal(await signedCall(two, 31, 'whoami'), 200)
  t.equal(await signedCall(two, 32, 'launch-the-missiles'), 200)
  for (const gateway of [one, two]) await gateway.app.keygate.usage?.flush()
  const res = await send(one.url, `/v1/api-keys/${encodeURIComponent(keys.apiKey)}/usage/series?since=1d`, { headers: { authorization: `Bearer ${alice}` } })
  t.equal(res.status, 200)
  t.same(res.json<{ mcpCalls: unknown[] }>().mcpCalls, [
    { route: 'signed-mcp', method: 'tools/call', tool: 'whoami', requests: 2, refusals: 0 },
    { route: 'signed-mcp', method: 'tools/call', tool: 'other', requests: 1, refusals: 0 }
  ], 'the key\'s calls per tool over the day, both gateways added up; an unlisted tool as other')
})
