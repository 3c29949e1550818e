// An MCP server behind keygate, reached by the MCP TypeScript SDK's own client (issue 41): the
// SDK is given nothing but keygate's URL of the MCP server and an OAuth client provider (an MCP
// host's, test/helpers/mcp-oauth-client.ts), and does the rest itself, as it does against any
// MCP server: its first request meets keygate's 401, whose challenge names the resource's
// metadata (RFC 9728); the metadata names the authorization server (a real OpenID Provider,
// oidc-provider, test/helpers/oidc-provider.ts); the SDK registers itself there (RFC 7591),
// sends the user through the authorization code flow with PKCE and `resource=` the resource's id
// (RFC 8707), gets a token for that resource and retries. The user allows reading only; a route
// that also needs mcp:write then answers 403 insufficient_scope, and the SDK steps up by itself
// (its 1.32 transport handles the 403: a new authorization for the scope the challenge names).
// The upstream is a real MCP server (the SDK's McpServer, test/helpers/mcp-server.ts), which
// sees keygate's identity headers and never the client's token. keygate runs on Redis. The
// /mcp route is an MCP route (issue 42): its tools/list shows the SDK only the tools its token
// may call, and a forbidden tool is refused before the upstream (the SDK's step-up brings no
// write scope while the user allows reading only).
import t from 'tap'
import { startMcpServer } from '../helpers/mcp-server.js'
import { MCP_CLIENT_REDIRECT, TestOAuthProvider, connectMcp, mcpResourceAtGateway, type Exchange } from '../helpers/mcp-oauth-client.js'
import { issuersYaml, startTestIdp } from '../helpers/oidc-provider.js'
import { routeFile, routesFromYaml } from '../helpers/routes.js'
import { startTestGateway } from '../helpers/stack.js'

interface ToolText { content: Array<{ type: string, text: string }> }
const text = (result: unknown): string => (result as ToolText).content[0]?.text ?? ''

t.test('the MCP SDK\'s client finds its way in from keygate\'s URL alone, and steps up on 403', async (t) => {
  const idp = await startTestIdp(t, { registration: true })
  const mcp = await startMcpServer(t)
  // the resource's id names keygate's own URL: its port is chosen first
  const { port, base, resource, metadataUrl } = await mcpResourceAtGateway(idp, ['mcp:read', 'mcp:write'])
  // the IdP's other API stays trusted by the issuer: its tokens are for another resource
  const issuers = routeFile(t, issuersYaml(idp), 'issuers.yaml')
  const routes = `resources:
  - id: ${resource}
    name: Test MCP server
    issuers: [testidp]
routes:
  - prefix: /mcp
    upstream: UPSTREAM
    auth: bearer
    resource: ${resource}
    scopes: [mcp:read]
    mcp:
      tools: { whoami: [mcp:read], "write-*": [mcp:write] }
  - prefix: /mcp/admin
    upstream: UPSTREAM
    auth: bearer
    resource: ${resource}
    scopes: [mcp:read, mcp:write]
`
  await startTestGateway(t, {
    store: 'redis',
    port,
    upstreamUrl: mcp.url,
    routes: (url) => routesFromYaml(routes, url),
    config: { identityProviders: { file: issuers.path, oidc: undefined } }
  })

  // the user at the IdP: alice, who first allows reading only
  let allow: string[] | undefined = ['mcp:read']
  const provider = new TestOAuthProvider(async (url) => await idp.authorize(url, 'alice', allow === undefined ? {} : { allow }))
  const seen = (from: number, test: (e: Exchange) => boolean): Exchange | undefined => provider.exchanges.slice(from).find(test)

  const connection = await connectMcp(resource, provider)
  t.teardown(async () => { await connection.client.close() })

  t.test('the first request: 401 pointing at the metadata; discovery, registration, code + PKCE with resource=; the retry connects', async (t) => {
    t.equal(connection.redirects, 1, 'one trip to the IdP, then connected')
    const first = provider.exchanges[0]
    t.match(first, { method: 'POST', url: resource, status: 401 }, 'the SDK\'s first request (initialize), refused')
    t.match(first?.challenge, `resource_metadata="${metadataUrl}"`, 'the challenge names the resource\'s metadata')
    t.match(seen(1, (e) => e.url === metadataUrl), { status: 200 }, 'the SDK read the metadata keygate pointed at')
    const metadata = await (await fetch(metadataUrl)).json() as { resource: string, authorization_servers: string[], scopes_supported: string[] }
    t.equal(metadata.resource, resource)
    t.same(metadata.authorization_servers, [idp.issuer])
    t.ok(seen(1, (e) => e.url.startsWith(`${idp.issuer}/.well-known/`) && e.status === 200),
      'the SDK read the IdP\'s metadata, from the authorization server the metadata named')
    t.match(seen(1, (e) => e.url === `${idp.issuer}/reg`), { method: 'POST', status: 201 }, 'it registered itself (RFC 7591)')
    t.equal(idp.registrations.length, 1)
    t.same(idp.registrations[0]?.redirect_uris, [MCP_CLIENT_REDIRECT])

    const [authorization] = provider.authorizations
    t.equal(authorization?.resource, resource, 'resource= the resource\'s id (RFC 8707)')
    t.equal(authorization?.codeChallengeMethod, 'S256', 'PKCE')
    t.equal(authorization?.scope, metadata.scopes_supported.join(' '), 'the scopes the metadata says the resource supports')
    t.same(metadata.scopes_supported, ['mcp:read', 'mcp:write'])
    t.ok(authorization?.code, 'the user allowed: a code came back')
    const claims = provider.accessTokenClaims()
    t.equal(claims.aud, resource, 'a token for this resource')
    t.equal(claims.scope, 'mcp:read', 'with what the user allowed')
    t.equal(claims.sub, 'alice')
    const token = provider.exchanges.findIndex((e) => e.url === `${idp.issuer}/token`)
    t.match(seen(token, (e) => e.url === resource), { method: 'POST', status: 200 }, 'the retry, with the token: initialized')
  })

  t.test('tools through keygate: only its own listed; the upstream sees keygate\'s identity, never the token', async (t) => {
    const { tools } = await connection.client.listTools()
    t.same(tools.map((tool) => tool.name), ['whoami'], 'write-note (mcp:write) is not shown to a token with mcp:read')
    const identity = JSON.parse(text(await connection.client.callTool({ name: 'whoami' }))) as Record<string, string | null>
    t.equal(identity['x-gateway-user'], 'testidp:alice', 'the issuer\'s name and the subject')
    t.equal(identity['x-gateway-scopes'], 'mcp:read')
    const [call] = mcp.calls('whoami')
    t.equal(call?.url, '/mcp', 'forwarded as it came')
    t.equal(call?.headers['x-gateway-user'], 'testidp:alice')
    t.same(mcp.requests.filter((r) => r.headers.authorization !== undefined), [], 'no request carried the client\'s token upstream')
    t.same(mcp.requests.filter((r) => r.headers['x-gateway-user'] !== 'testidp:alice'), [], 'nothing reached the upstream unauthenticated')
  })

  t.test('a tool the list hides: refused (the user allows no write scope), and it never reaches the upstream', async (t) => {
    await t.rejects(connection.client.callTool({ name: 'write-note' }), 'the SDK tries to step up, the user allows reading only: refused')
    t.equal(provider.authorizations.at(-1)?.scope, 'mcp:read mcp:write', 'the step-up asked for the scope the challenge named')
    t.equal(mcp.calls('write-note').length, 0, 'write-note never reached the upstream')
  })

  t.test('a tool behind mcp:write: 403 insufficient_scope, the SDK steps up by itself, the retry succeeds', async (t) => {
    allow = undefined // the user now allows all that is asked
    const from = provider.exchanges.length
    const admin = await connectMcp(`${base}/mcp/admin`, provider)
    t.teardown(async () => { await admin.client.close() })
    t.equal(admin.redirects, 1, 'one more trip to the IdP')
    const refused = seen(from, (e) => e.url === `${base}/mcp/admin`)
    t.match(refused, { method: 'POST', status: 403 }, 'the token without mcp:write, refused')
    t.match(refused?.challenge, 'error="insufficient_scope"')
    t.match(refused?.challenge, 'scope="mcp:read mcp:write"', 'the scopes the request needs')
    t.match(refused?.challenge, `resource_metadata="${metadataUrl}"`)
    const stepUp = provider.authorizations.at(-1)
    t.equal(stepUp?.scope, 'mcp:read mcp:write', 'the SDK asked for the scope the challenge named')
    t.equal(stepUp?.resource, resource, 'for the same resource')
    t.equal(idp.registrations.length, 1, 'with the client it registered before')
    t.equal(provider.accessTokenClaims().scope, 'mcp:read mcp:write', 'a token with mcp:write')
    t.equal(text(await admin.client.callTool({ name: 'write-note' })), 'note 1 written')
    const [write] = mcp.calls('write-note')
    t.equal(write?.url, '/mcp/admin')
    t.equal(write?.headers['x-gateway-scopes'], 'mcp:read mcp:write')
    t.equal(write?.headers.authorization, undefined)
    t.same(mcp.requests.filter((r) => r.url.startsWith('/mcp/admin') && r.headers['x-gateway-scopes'] !== 'mcp:read mcp:write'), [],
      'the refused request was not forwarded')
    const again = JSON.parse(text(await connection.client.callTool({ name: 'whoami' }))) as Record<string, string | null>
    t.equal(again['x-gateway-scopes'], 'mcp:read mcp:write', 'the first connection goes on, with the new token')
  })

  t.test('a token the same IdP minted for another resource: 401 invalid_token with the challenge, nothing forwarded', async (t) => {
    const other = await idp.clientCredentialsToken(['api:read'])
    const before = mcp.requests.length
    const response = await fetch(resource, {
      method: 'POST',
      headers: { authorization: `Bearer ${other}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
    })
    await response.body?.cancel()
    t.equal(response.status, 401)
    t.match(response.headers.get('www-authenticate'), 'error="invalid_token"')
    t.match(response.headers.get('www-authenticate'), `resource_metadata="${metadataUrl}"`)
    t.equal(mcp.requests.length, before, 'not forwarded')
  })
})
