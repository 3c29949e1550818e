// docs/mcp-quickstart.md, "Put keygate in front of an MCP server", as a reader would run it: the
// page's issuers file and route file, with the page's names (the IdP's issuer, the public URL, the
// MCP server's address) pointed at a real OpenID Provider (oidc-provider, test/helpers/oidc-provider.ts),
// keygate's own port and a real MCP server (the SDK's McpServer, test/helpers/mcp-server.ts: its
// `whoami` is one of the tools the route's default lets pass, `write-note` one of its write-*).
// The MCP TypeScript SDK's client with OAuth is given the MCP URL alone and goes through the
// page's steps 1 to 5: the 401 and the resource's metadata, a token for the resource, calls with
// notes:read, the 403 insufficient_scope of a write tool and the step-up; a denied tool and
// another API's token are refused, and none of the refused reaches the server.
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js'
import t from 'tap'
import { docSnippet } from '../helpers/docs.js'
import { startMcpServer } from '../helpers/mcp-server.js'
import { TestOAuthProvider, connectMcp, mcpResourceAtGateway } from '../helpers/mcp-oauth-client.js'
import { startTestIdp } from '../helpers/oidc-provider.js'
import { routeFile, routesFromYaml } from '../helpers/routes.js'
import { startTestGateway } from '../helpers/stack.js'

const PAGE = 'docs/mcp-quickstart.md'
const ISSUERS = docSnippet(PAGE, '1. The identity provider', 'yaml')
const ROUTES = docSnippet(PAGE, '2. The route file', 'yaml')
/** the page's names for what this test starts */
const PAGE_ISSUER = 'https://login.example.com/realms/corp'
const PAGE_ORIGIN = 'https://mcp.example.com'
const PAGE_UPSTREAM = 'http://127.0.0.1:3001'

interface ToolText { content: Array<{ type: string, text: string }> }
const text = (result: unknown): string => (result as ToolText).content[0]?.text ?? ''

t.test('docs/mcp-quickstart.md: its files, a real IdP and MCP server, the SDK\'s OAuth client from the URL alone', async (t) => {
  for (const [name, block, value] of [['issuer', ISSUERS, PAGE_ISSUER], ['public URL', ROUTES, PAGE_ORIGIN], ['MCP server', ROUTES, PAGE_UPSTREAM]]) {
    t.ok(block?.includes(value as string), `the page's ${name} is ${value}`)
  }
  const idp = await startTestIdp(t, { registration: true })
  const mcp = await startMcpServer(t)
  const { port, base, resource, metadataUrl } = await mcpResourceAtGateway(idp, ['notes:read', 'notes:write'])
  const issuers = routeFile(t, ISSUERS.replaceAll(PAGE_ISSUER, idp.issuer).replaceAll(PAGE_ORIGIN, base), 'issuers.yaml')
  await startTestGateway(t, {
    store: 'redis',
    port,
    upstreamUrl: mcp.url,
    routes: () => routesFromYaml(ROUTES.replaceAll(PAGE_ORIGIN, base).replaceAll(PAGE_UPSTREAM, mcp.url), mcp.url),
    config: { identityProviders: { file: issuers.path, oidc: undefined } }
  })

  let allow: string[] | undefined = ['notes:read']
  const provider = new TestOAuthProvider(async (url) => await idp.authorize(url, 'alice', allow === undefined ? {} : { allow }))
  const connection = await connectMcp(resource, provider)
  t.teardown(async () => { await connection.client.close() })

  t.test('steps 1 to 4: 401 naming the metadata, the metadata, a token for the resource with notes:read, calls as corp:alice', async (t) => {
    t.equal(connection.redirects, 1, 'one trip to the IdP, then connected')
    t.match(provider.exchanges[0], { method: 'POST', url: resource, status: 401 })
    t.match(provider.exchanges[0]?.challenge, `resource_metadata="${metadataUrl}"`)
    const metadata = await (await fetch(metadataUrl)).json() as { authorization_servers: string[], scopes_supported: string[] }
    t.same(metadata.authorization_servers, [idp.issuer])
    t.same(metadata.scopes_supported, ['notes:read', 'notes:write'], 'the route\'s scopes and its tools\'')
    t.equal(provider.authorizations[0]?.resource, resource, 'resource= the resource\'s id')
    t.equal(provider.authorizations[0]?.scope, 'notes:read notes:write', 'asked for what the metadata lists')
    t.match(provider.accessTokenClaims(), { aud: resource, scope: 'notes:read', sub: 'alice' }, 'the user allowed reading only')
    const { tools } = await connection.client.listTools()
    t.same(tools.map((tool) => tool.name).sort(), ['whoami'], 'the list shows only what notes:read may call')
    const identity = JSON.parse(text(await connection.client.callTool({ name: 'whoami' }))) as Record<string, string | null>
    t.equal(identity['x-gateway-user'], 'corp:alice', 'the server sees the issuer\'s name and the subject')
    t.equal(mcp.calls('whoami')[0]?.headers.authorization, undefined, 'never the token')
  })

  t.test('step 5: write-note needs notes:write: 403 insufficient_scope before the server, the step-up, the retry passes', async (t) => {
    allow = undefined // the user now allows what is asked
    const from = provider.exchanges.length
    let written: unknown
    try {
      written = await connection.client.callTool({ name: 'write-note' })
    } catch (error) {
      if (!(error instanceof UnauthorizedError)) throw error
      // the SDK sent the user to the IdP: the host finishes with the code, and calls again
      await connection.transport.finishAuth(provider.lastCode())
      written = await connection.client.callTool({ name: 'write-note' })
    }
    const refused = provider.exchanges.slice(from).find((e) => e.url === resource && e.status === 403)
    t.match(refused?.challenge, 'error="insufficient_scope", scope="notes:read notes:write"', 'the challenge names the scopes to ask for')
    t.equal(provider.authorizations[1]?.scope, 'notes:read notes:write', 'the SDK asked the IdP for them')
    t.equal(provider.accessTokenClaims().scope, 'notes:read notes:write')
    t.equal(text(written), 'note 1 written')
    t.equal(mcp.calls('write-note').length, 1, 'the refused call never reached the server; the retry did')
    const { tools } = await connection.client.listTools()
    t.same(tools.map((tool) => tool.name).sort(), ['whoami', 'write-note'], 'stepped up, the list shows write-note too')
  })

  t.test('delete-note is denied whatever the token; another API\'s token is 401 invalid_token; neither forwarded', async (t) => {
    const before = mcp.requests.length
    const post = async (token: string, name: string): Promise<Response> => await fetch(resource, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18'
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name, arguments: {} } })
    })
    const token = (await provider.tokens())?.access_token ?? ''
    const denied = await post(token, 'delete-note')
    t.equal(denied.status, 403)
    t.match(await denied.json(), { jsonrpc: '2.0', id: 5, error: { data: { code: 'MCP_CALL_DENIED' } } })
    const other = await post(await idp.clientCredentialsToken(['api:read']), 'whoami')
    await other.body?.cancel()
    t.equal(other.status, 401)
    t.match(other.headers.get('www-authenticate'), 'error="invalid_token"')
    t.equal(mcp.requests.length, before, 'nothing reached the server')
  })
})
