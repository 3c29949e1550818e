// The MCP TypeScript SDK's client, with an OAuth client provider of its own, as an MCP host
// application holds one (issue 41): in memory, a public client (PKCE, no secret) that registers
// itself by dynamic client registration, whose "browser" is a function the test gives (the test
// IdP's authorize, driven by fetch). The SDK does the OAuth: discovery from the 401, the metadata,
// the registration, the authorization request, the token request. This provider only keeps what
// the SDK hands it, and records it: each authorization URL the SDK sent the user to (its
// resource, scope, PKCE parameters), the tokens it saved, the client it registered; and, through
// the fetch it gives the SDK's transport, every HTTP exchange the SDK had (status, WWW-Authenticate).
//
// connectMcp is the SDK's documented dance for a redirect flow: connect; on UnauthorizedError
// (the SDK sent the user to the authorization URL), finishAuth with the code the redirect carried,
// then connect again with a new transport.
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { UnauthorizedError, type OAuthClientProvider, type OAuthDiscoveryState } from '@modelcontextprotocol/sdk/client/auth.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import type { TestIdp } from './oidc-provider.js'
import { freePort } from './redis.js'

/** where the IdP sends the user back: a loopback URL, as a native MCP host listens on */
export const MCP_CLIENT_REDIRECT = 'http://127.0.0.1/mcp-client/callback'

/** The user at the IdP: from an authorization URL to the URL the IdP redirects back to. */
export type Browser = (authorizationUrl: string) => Promise<string>

export interface Authorization {
  /** the whole URL the SDK sent the user to */
  url: URL
  resource: string | null
  scope: string | null
  codeChallengeMethod: string | null
  /** the code the redirect back carried (null when the IdP answered with an error) */
  code: string | null
  /** the redirect back's error (access_denied, ...), null with a code */
  error: string | null
}

export interface Exchange {
  method: string
  url: string
  status: number
  /** the answer's WWW-Authenticate, null when none */
  challenge: string | null
}

export class TestOAuthProvider implements OAuthClientProvider {
  /** every HTTP request the SDK made through `fetch` (MCP, discovery, registration, token), in order */
  readonly exchanges: Exchange[] = []
  /** every authorization the SDK started, in order */
  readonly authorizations: Authorization[] = []
  /** every token response the SDK saved, in order */
  readonly savedTokens: OAuthTokens[] = []
  private client: OAuthClientInformationMixed | undefined
  private current: OAuthTokens | undefined
  private verifier: string | undefined
  private discovery: OAuthDiscoveryState | undefined

  private readonly browser: Browser
  private readonly name: string

  constructor (browser: Browser, name = 'keygate test MCP host') {
    this.browser = browser
    this.name = name
  }

  /** the fetch the SDK's transport is given: the global one, recording each exchange */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await fetch(input, init)
    const url = input instanceof Request ? input.url : input.toString()
    this.exchanges.push({ method: init?.method ?? 'GET', url, status: response.status, challenge: response.headers.get('www-authenticate') })
    return response
  }

  get redirectUrl (): string { return MCP_CLIENT_REDIRECT }

  get clientMetadata (): OAuthClientMetadata {
    // application_type native: a loopback http redirect URI (RFC 8252), as a desktop MCP host has;
    // grant_types without refresh_token: a step-up is a new authorization, never a refresh
    const metadata = {
      client_name: this.name,
      redirect_uris: [MCP_CLIENT_REDIRECT],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native'
    }
    return metadata
  }

  clientInformation (): OAuthClientInformationMixed | undefined { return this.client }
  saveClientInformation (information: OAuthClientInformationMixed): void { this.client = information }
  tokens (): OAuthTokens | undefined { return this.current }
  saveTokens (tokens: OAuthTokens): void {
    this.current = tokens
    this.savedTokens.push(tokens)
  }

  saveCodeVerifier (verifier: string): void { this.verifier = verifier }
  codeVerifier (): string {
    if (this.verifier === undefined) throw new Error('no code verifier saved')
    return this.verifier
  }

  saveDiscoveryState (state: OAuthDiscoveryState): void { this.discovery = state }
  discoveryState (): OAuthDiscoveryState | undefined { return this.discovery }

  invalidateCredentials (scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'client') this.client = undefined
    if (scope === 'all' || scope === 'tokens') this.current = undefined
    if (scope === 'all' || scope === 'verifier') this.verifier = undefined
    if (scope === 'all' || scope === 'discovery') this.discovery = undefined
  }

  /** The SDK sends the user to the IdP: the test's browser goes, and the redirect back is kept. */
  async redirectToAuthorization (url: URL): Promise<void> {
    const back = new URL(await this.browser(url.toString()))
    this.authorizations.push({
      url,
      resource: url.searchParams.get('resource'),
      scope: url.searchParams.get('scope'),
      codeChallengeMethod: url.searchParams.get('code_challenge_method'),
      code: back.searchParams.get('code'),
      error: back.searchParams.get('error')
    })
  }

  /** the code of the last authorization (what an MCP host's redirect handler receives) */
  lastCode (): string {
    const code = this.authorizations.at(-1)?.code
    if (code === undefined || code === null) throw new Error(`the last authorization brought no code: ${this.authorizations.at(-1)?.error ?? 'none started'}`)
    return code
  }

  /** the claims of the access token the SDK holds now (a JWT from the test IdP) */
  accessTokenClaims (): Record<string, unknown> {
    const token = this.current?.access_token
    if (token === undefined) throw new Error('no access token saved')
    return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>
  }
}

export interface McpConnection {
  client: Client
  transport: StreamableHTTPClientTransport
  /** how many times connect threw UnauthorizedError (the SDK went to the IdP) before it connected */
  redirects: number
}

/**
 * An MCP client connected to `url` (nothing else known): connect, and while the SDK answers
 * UnauthorizedError (it sent the user to the IdP), finish with the redirect's code and connect
 * again on a new transport, as the SDK's OAuth example does. At most two rounds. `makeClient`: a
 * client of the test's own (capabilities, request handlers), made anew for each round.
 */
export async function connectMcp (url: string, provider: TestOAuthProvider,
  makeClient = (): Client => new Client({ name: 'keygate-test-host', version: '1.0.0' })): Promise<McpConnection> {
  for (let redirects = 0; redirects <= 2; redirects++) {
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: provider.fetch })
    const client = makeClient()
    try {
      await client.connect(transport)
      return { client, transport, redirects }
    } catch (error) {
      await client.close().catch(() => {})
      if (!(error instanceof UnauthorizedError)) throw error
      await transport.finishAuth(provider.lastCode())
    }
  }
  throw new Error(`${url}: still unauthorized after two authorizations`)
}

/** A protected resource at keygate's own URL: keygate's port chosen first, the resource `<base>/mcp`, known to the IdP with `scopes`. */
export async function mcpResourceAtGateway (idp: Pick<TestIdp, 'addResource'>, scopes: string[]):
Promise<{ port: number, base: string, resource: string, metadataUrl: string }> {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const resource = `${base}/mcp`
  await idp.addResource(resource, scopes)
  return { port, base, resource, metadataUrl: `${base}/.well-known/oauth-protected-resource/mcp` }
}
