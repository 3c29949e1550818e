// An MCP-aware route (docs/mcp.md): a real MCP server (the SDK's McpServer,
// test/helpers/mcp-server.ts, which records every request it receives) behind keygate, reached by
// the MCP SDK's own client with a keygate bearer token, and by raw requests that try the
// smuggling forms MCP gateways have been caught by. The allowed tool is called; the forbidden one
// is refused with 403 insufficient_scope and a JSON-RPC error carrying the request's id, which
// the SDK surfaces, and it never reaches the server; each hostile body is refused with its code
// before the upstream. A signed key narrowed to fewer scopes is judged by the same policy.
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import t from 'tap'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signBase64 } from '../helpers/keys.js'
import { mcpPostHeaders, startMcpServer } from '../helpers/mcp-server.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, sendSigned, startTestGateway } from '../helpers/stack.js'

interface RpcError { jsonrpc: string, id: string | number | null, error: { code: number, message: string, data: { code: string } } }

const ROUTES = `routes:
  - path: /mcp
    upstream: UPSTREAM
    auth: bearer
    scopes: [mcp:use]
    mcp:
      tools: { whoami: [mcp:read], "write-*": [notes:write] }
      methods: { "logging/*": [mcp:admin] }
      default: deny
      origins: [https://app.example.com]
  - path: /mcp-signed
    upstream: UPSTREAM
    auth: signed
    scopes: [mcp:use]
    mcp:
      tools: { whoami: [mcp:read], "write-*": [notes:write] }
`

t.test('an MCP route: per-tool scopes, one strict reading, the Origin', async (t) => {
  const mcp = await startMcpServer(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: mcp.url, routes: (url) => routesFromYaml(ROUTES, url) })
  await addUser(gw, 'alice')
  await gw.app.keygate.users.setScopes('alice', ['mcp:use', 'mcp:read'])
  const token = await login(gw.url, 'alice')
  const endpoint = `${gw.url}/mcp`

  const client = new Client({ name: 'keygate-test-host', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers: { authorization: `Bearer ${token}` } } }))
  t.teardown(async () => { await client.close() })

  t.test('the SDK client: lists tools, calls an allowed one, is refused a forbidden one that never reaches the server', async (t) => {
    const tools = await client.listTools()
    t.same(tools.tools.map((tool) => tool.name), ['whoami'], 'tools/list shows only what alice may call (write-note needs notes:write)')
    const result = await client.callTool({ name: 'whoami', arguments: {} }) as { content: Array<{ text: string }> }
    t.match(JSON.parse(result.content[0]?.text ?? '{}'), { 'x-gateway-user': 'alice' }, 'whoami reached the server as alice')
    await t.rejects(client.callTool({ name: 'write-note', arguments: {} }), /403|insufficient|notes:write/i, 'the SDK surfaces the refusal')
    t.equal(mcp.calls('write-note').length, 0, 'write-note never reached the server')
    t.equal(mcp.calls('whoami').length, 1)
  })

  const before = (): number => mcp.requests.length
  const post = async (body: string, headers: Record<string, string> = {}): Promise<RawResponse> => await send(gw.url, '/mcp', {
    method: 'POST',
    headers: mcpPostHeaders(token, headers),
    body
  })
  const call = (name: string, id: number | string): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } })

  t.test('a forbidden tool, raw: 403, insufficient_scope naming the scopes to ask for, a JSON-RPC error with the id', async (t) => {
    const start = before()
    const res = await post(call('write-note', 'req-7'))
    t.equal(res.status, 403)
    t.match(res.headers['content-type'], /^application\/json/)
    t.match(res.headers['www-authenticate'], /error="insufficient_scope", scope="mcp:use notes:write"/)
    const body = res.json<RpcError>()
    t.match(body, { jsonrpc: '2.0', id: 'req-7', error: { code: -32001, data: { code: 'INSUFFICIENT_SCOPE' } } })
    t.match(body.error.message, /tool "write-note" requires/)
    t.equal(mcp.requests.length, start, 'nothing reached the server')
  })

  t.test('the allowed tool, raw: the server answers, with the exact bytes sent', async (t) => {
    const sent = '{ "jsonrpc" : "2.0", "id" : 9, "method" : "tools/call", "params" : { "name" : "whoami", "arguments" : { } } }'
    const res = await post(sent)
    t.equal(res.status, 200, res.text)
    t.match(res.json(), { jsonrpc: '2.0', id: 9, result: { content: [{ type: 'text' }] } })
  })

  t.test('each smuggling form is refused with its code before the upstream', async (t) => {
    const cases: Array<[string, () => Promise<RawResponse>, number, string, number, string | number | null]> = [
      ['"name" and "Name"', async () => await post('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","Name":"write-note"}}'),
        400, 'MCP_INVALID_MESSAGE', -32600, 3],
      ['duplicate "name"', async () => await post('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"whoami","name":"write-note"}}'),
        400, 'MCP_PARSE_ERROR', -32700, null],
      ['duplicate "name" spelt with an escape',
        async () => await post('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"whoami","n\\u0061me":"write-note"}}'),
        400, 'MCP_PARSE_ERROR', -32700, null],
      ['a batch under 2025-06-18', async () => await post(`[${call('whoami', 1)},${call('write-note', 2)}]`), 400, 'MCP_BATCH_NOT_ALLOWED', -32600, null],
      ['a batch under 2025-03-26 hiding a forbidden call',
        async () => await post(`[${call('whoami', 1)},${call('write-note', 2)}]`, { 'mcp-protocol-version': '2025-03-26' }),
        403, 'INSUFFICIENT_SCOPE', -32001, null],
      ['a batch without MCP-Protocol-Version (2025-03-26) hiding a denied call', async () => await send(gw.url, '/mcp', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: `[${call('whoami', 1)},${call('drop_tables', 2)}]`
      }), 403, 'MCP_CALL_DENIED', -32001, null],
      ['an unlisted tool (default: deny)', async () => await post(call('drop_tables', 11)), 403, 'MCP_CALL_DENIED', -32001, 11],
      ['a method glob', async () => await post('{"jsonrpc":"2.0","id":12,"method":"logging/setLevel","params":{"level":"debug"}}'),
        403, 'INSUFFICIENT_SCOPE', -32001, 12],
      ['text/plain', async () => await post(call('whoami', 5), { 'content-type': 'text/plain' }), 415, 'UNSUPPORTED_MEDIA_TYPE', -32600, null],
      ['an Origin not allowed', async () => await post(call('whoami', 6), { origin: 'https://evil.example' }), 403, 'ORIGIN_NOT_ALLOWED', -32001, null],
      ['a byte order mark', async () => await post(`\ufeff${call('whoami', 8)}`), 400, 'MCP_PARSE_ERROR', -32700, null],
      ['over the route\'s body limit',
        async () => await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(1024 * 1024) } })),
        413, 'PAYLOAD_TOO_LARGE', -32600, null]
    ]
    for (const [why, request, status, code, rpcCode, id] of cases) {
      const start = before()
      const res = await request()
      t.equal(res.status, status, `${why}: ${status}`)
      t.match(res.headers['content-type'], /^application\/json/, `${why}: a JSON-RPC error`)
      t.match(res.json(), { jsonrpc: '2.0', id, error: { code: rpcCode, data: { code } } }, `${why}: ${code}`)
      t.equal(mcp.requests.length, start, `${why}: nothing reached the server`)
    }
  })

  t.test('an allowed Origin passes; a request without one passes (not a browser)', async (t) => {
    t.equal((await post(call('whoami', 20), { origin: 'https://app.example.com' })).status, 200)
    t.equal((await post(call('whoami', 21))).status, 200)
  })

  t.test('a signed key narrowed to mcp:use is judged by the same policy: its own scopes, not its user\'s', async (t) => {
    const keys = rsaKeyPair()
    const registered = await send(gw.url, '/v1/api-keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: 'narrow', publicKey: keys.publicPem, signature: signBase64(keys.privateKey, 'narrow'), scopes: ['mcp:use'] })
    })
    t.equal(registered.status, 201, registered.text)
    const signedCall = async (id: number): Promise<RawResponse> => await sendSigned(gw.url, {
      keys,
      token,
      method: 'POST',
      target: '/mcp-signed',
      body: call('whoami', id),
      headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' }
    })
    const refused = await signedCall(30)
    t.equal(refused.status, 403)
    t.match(refused.json(), { id: 30, error: { data: { code: 'INSUFFICIENT_SCOPE' } } }, 'alice has mcp:read; the key was registered without it')
    t.match(refused.json<RpcError>().error.message, /this API key was registered without mcp:read/)
  })
})
