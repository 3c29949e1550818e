// An independent MCP server behind keygate (issue 42, point 9): the MCP project's reference
// server, @modelcontextprotocol/server-everything (test/helpers/mcp-everything.ts), in its
// Streamable HTTP mode, reached through a keygate MCP route by the MCP SDK's own client with
// OAuth (test/helpers/mcp-oauth-client.ts: discovery from keygate's 401, registration and the
// code flow at a real OpenID Provider, test/helpers/oidc-provider.ts). Between keygate and the
// server, a TCP relay keeps every byte keygate sent, so the test sees what reached the server.
// The client lists the server's tools and calls one; its long-running tool's progress
// notifications reach the client as the server streams them (SSE), before the result; a tool that
// asks the client to sample (a request from the server on the call's stream, the client's answer
// POSTed back) completes; the tool
// the route denies (get-env, which shows the server's environment) is refused by keygate with a
// JSON-RPC error the SDK surfaces, and not one byte naming it reaches the server.
import { connect, createServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import t from 'tap'
import { startEverything } from '../helpers/mcp-everything.js'
import { TestOAuthProvider, connectMcp, mcpResourceAtGateway } from '../helpers/mcp-oauth-client.js'
import { issuersYaml, startTestIdp } from '../helpers/oidc-provider.js'
import { routeFile, routesFromYaml } from '../helpers/routes.js'
import { startTestGateway } from '../helpers/stack.js'

interface ToolText { content: Array<{ type: string, text: string }> }
const text = (result: unknown): string => (result as ToolText).content[0]?.text ?? ''

/** A loopback TCP relay to `target` that keeps every byte sent through it towards the target. */
async function recordingRelay (t: { teardown: (fn: () => unknown) => void }, target: URL): Promise<{ url: string, sent: () => string }> {
  const chunks: Buffer[] = []
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname)
    sockets.add(client).add(upstream)
    client.on('data', (chunk: Buffer) => { chunks.push(chunk) })
    client.pipe(upstream).pipe(client)
    const drop = (): void => { client.destroy(); upstream.destroy() }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sent: () => Buffer.concat(chunks).toString('latin1') }
}

t.test('server-everything behind keygate: the SDK client with OAuth lists, calls, streams; a denied tool never reaches it', async (t) => {
  const idp = await startTestIdp(t, { registration: true })
  const everything = await startEverything(t)
  const relay = await recordingRelay(t, new URL(everything.url))
  const { port, resource } = await mcpResourceAtGateway(idp, ['mcp:read'])
  const issuers = routeFile(t, issuersYaml(idp), 'issuers.yaml')
  await startTestGateway(t, {
    store: 'memory',
    port,
    upstreamUrl: relay.url,
    config: { identityProviders: { file: issuers.path, oidc: undefined } },
    routes: (upstream) => routesFromYaml(`resources:
  - id: ${resource}
    name: server-everything
    issuers: [testidp]
routes:
  - path: /mcp
    upstream: ${upstream}
    auth: bearer
    resource: ${resource}
    scopes: [mcp:read]
    timeoutMs: 1500
    mcp:
      tools: { get-env: deny }
`, upstream)
  })
  // timeoutMs 1500: keygate holds the SDK client's GET stream (below) until then, and its close waits for it

  const provider = new TestOAuthProvider(async (url) => await idp.authorize(url, 'alice', { allow: ['mcp:read'] }))
  // an MCP host that can sample: the server may ask it for an LLM's answer, inside a tool call
  const { client } = await connectMcp(resource, provider, () => {
    const host = new Client({ name: 'keygate-test-host', version: '1.0.0' }, { capabilities: { sampling: {} } })
    host.setRequestHandler(CreateMessageRequestSchema, (request) => ({
      role: 'assistant', model: 'test-model', content: { type: 'text', text: `sampled: ${JSON.stringify(request.params.messages[0]?.content)}` }
    }))
    return host
  })
  t.teardown(async () => { await client.close() })
  t.equal(client.getServerVersion()?.name, 'mcp-servers/everything', 'the SDK client connected to server-everything through keygate, with OAuth')

  const { tools } = await client.listTools()
  const names = tools.map((tool) => tool.name)
  for (const name of ['echo', 'get-sum', 'trigger-long-running-operation']) t.ok(names.includes(name), `tools/list names ${name}`)

  t.equal(text(await client.callTool({ name: 'echo', arguments: { message: 'through keygate' } })), 'Echo: through keygate', 'an allowed tool, called')
  t.match(relay.sent(), /"name":"echo"/, 'the call reached the server')

  // progress notifications on the POST's SSE answer, each as the server sends it
  const events: string[] = []
  const result = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } }, undefined, {
    onprogress: (progress) => { events.push(`progress ${progress.progress}/${progress.total}`) }
  })
  events.push(text(result))
  t.same(events, ['progress 1/3', 'progress 2/3', 'progress 3/3', 'Long running operation completed. Duration: 0.3 seconds, Steps: 3.'],
    'the long-running tool\'s progress reached the client step by step, before its result')

  // the server's request (sampling/createMessage) on the tool call's SSE answer; the client's answer, a JSON-RPC response, POSTed back
  const sampled = text(await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'through keygate' } }))
  t.match(sampled, /LLM sampling result:[^]*sampled: .*Resource trigger-sampling-request context: through keygate/,
    'a server-to-client request and its answer went both ways through keygate, inside the tool call')
  t.match(relay.sent(), /\{"result":\{"model":"test-model",/, 'the host\'s answer reached the server as a response message')

  const before = relay.sent().length
  const refused = await client.callTool({ name: 'get-env', arguments: {} }).then(() => undefined, (error: unknown) => error)
  t.match(String(refused), /403|MCP_CALL_DENIED|denied/i, 'the denied tool: the SDK surfaces keygate\'s refusal')
  t.match(provider.exchanges.at(-1), { method: 'POST', url: resource, status: 403 }, 'keygate answered 403')
  t.equal(relay.sent().length, before, 'nothing of the refused call reached the server')
  t.notMatch(relay.sent(), /get-env/, 'no byte naming get-env ever did')

  t.equal(text(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } })), 'The sum of 2 and 3 is 5.', 'the session goes on after the refusal')

  // The GET stream (server-to-client messages outside a request): server-everything answers it at
  // once, 200 text/event-stream, and sends an event only when it has one. keygate passes an event
  // stream's headers on at once, not with its first chunk (docs/mcp.md, "Streams").
  t.test('a quiet GET stream opens through keygate at once', async (t) => {
    const headers = { authorization: `Bearer ${provider.tokens()?.access_token ?? ''}`, 'mcp-protocol-version': '2025-06-18' }
    const init = await fetch(resource, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }
      })
    })
    await init.text()
    const stream = new AbortController()
    const session = init.headers.get('mcp-session-id') ?? ''
    const answer = fetch(resource, { headers: { ...headers, accept: 'text/event-stream', 'mcp-session-id': session }, signal: stream.signal })
    // time is the behaviour here: the headers come at once directly (a few ms), so a wide margin below the route's 1500 ms
    const opened = await Promise.race([answer.then((res) => res.status), new Promise((resolve) => setTimeout(resolve, 750, 'nothing yet'))])
    stream.abort()
    await answer.catch(() => {})
    t.equal(opened, 200, 'the stream\'s 200 within 750 ms')
  })
})
