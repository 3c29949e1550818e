// A real OpenID Provider for keygate's tests of identity providers' access tokens (issue 31):
// oidc-provider (panva's, v9) on a free loopback port, with keys the test generates. Its access
// tokens are JWTs (RFC 9068, typ at+jwt) because its one resource server is configured through
// Resource Indicators with accessTokenFormat 'jwt'; without that oidc-provider issues opaque ones.
// Two clients: a confidential one for the client credentials grant and a public (native) one
// for the authorization code flow with PKCE, which this helper drives by hand (fetch, a cookie
// jar, redirects followed one at a time) through its own interaction endpoints: login as the
// given subject, then consent to what was asked. Nothing prints: the dev-only defaults that
// oidc-provider warns about (in-memory adapter, dev interactions, TTLs, findAccount,
// renderError) are all replaced. rotateKey rebuilds the Provider with the new key set behind the
// same http server; stop and start close and reopen the listener on the same port.
//
// For the portal's login (a browser, or fetch as one): addClient registers another client (a
// keygate's callback URL is known only once it listens) by rebuilding the Provider as rotateKey
// does; the interaction pages answer a request that accepts text/html with a minimal accessible
// HTML form (login: "Username" and "Sign in"; consent: "Allow" and "Deny") posting to the same
// steps; and authorize drives an authorization request's URL to the redirect back, as a browser would.
//
// With `dpop` (issue 43), oidc-provider's DPoP feature: a token request with a proof (oauth4webapi's
// DPoP handle makes one) gets an access token bound to the proof's key.
//
// For standard OAuth clients (issue 41: the MCP SDK's client): addResource adds another resource
// indicator it mints JWT access tokens for (aud = that indicator; a keygate's resource is known
// only once it listens), with its own scopes; `registration` opens dynamic client registration
// (RFC 7591), as such clients register themselves; authorize's `allow` lets the user consent to
// only some of the scopes asked (the others rejected), so that a client meets a step-up later.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createHash, generateKeyPairSync, randomBytes, randomUUID, type KeyObject } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { exportJWK, type JWK } from 'jose'
import { errors, Provider, type Adapter, type AdapterPayload, type Configuration, type JWKS } from 'oidc-provider'

export type TestIdpAlgorithm = 'RS256' | 'ES256' | 'EdDSA'

export interface TestIdp {
  /** http://127.0.0.1:PORT, exactly as its tokens' iss and its discovery document say */
  issuer: string
  /** its JWKS endpoint (`${issuer}/jwks`), as its discovery document says */
  jwksUri: string
  /** the resource indicator of its one API, which its access tokens carry as aud: 'https://keygate.test/api' */
  audience: string
  /** the scopes its API defines (the defaults, or startTestIdp's `scopes`): a token carries only these */
  scopes: readonly string[]
  /** how long its access tokens live, in seconds (exp - iat) */
  accessTokenTtlSeconds: number
  /** the algorithm its access tokens (and ID tokens) are signed with */
  algorithm: TestIdpAlgorithm
  /** the kid of the key it signs with now */
  readonly currentKid: string
  /**
   * A JWT access token (client credentials grant, client `keygate-service`) with these scopes:
   * by default all of `scopes`; [] asks for none (the token then has no scope claim). Its sub is
   * the client's id. Throws when the token endpoint refuses or leaves out a requested scope.
   */
  clientCredentialsToken: (scopes?: string[]) => Promise<string>
  /**
   * A JWT access token through the authorization code flow with PKCE (S256), driven without a
   * browser (a fresh cookie jar each call): log in as `subject`, consent to `openid` and
   * `scopes` (by default all of `scopes`), exchange the code with the verifier. sub = `subject`.
   */
  authorizationCodeToken: (subject: string, scopes?: string[]) => Promise<{ accessToken: string, idToken?: string }>
  /**
   * Replace the signing key: new tokens are signed by a new key (new kid). `keepOld`: the keys
   * published until now stay in the JWKS (old tokens still verify), or the JWKS holds the new one only.
   */
  rotateKey: (options: { keepOld: boolean }) => Promise<void>
  /** stop answering: the listener closed and open connections dropped (connection refused) */
  stop: () => Promise<void>
  /** answer again, on the same port, with the same keys */
  start: () => Promise<void>
  /**
   * An IdP that hangs (issue 40): while on, a JWKS request is accepted and never answered (every
   * other endpoint answers); off: those held are dropped and the JWKS answers again.
   */
  hangJwks: (on: boolean) => void
  /**
   * Registers another client (a web client, with a secret or public with PKCE), e.g. keygate's
   * portal with its callback URL. Rebuilds the Provider behind the same server, losing nothing.
   */
  addClient: (client: TestIdpClient) => Promise<void>
  /**
   * From an authorization request's URL (as keygate's start redirects to) to the redirect back
   * to the client, as a browser with a fresh cookie jar: log in as `subject`, then allow (or, with
   * `deny`, decline: the IdP answers error=access_denied). The redirect's URL.
   */
  authorize: (authorizationUrl: string, subject: string, options?: TestIdpAuthorizeOptions) => Promise<string>
  /**
   * Another resource indicator (RFC 8707) it mints access tokens for: JWTs with aud = `indicator`,
   * carrying only `scopes` (by default the IdP's `scopes`). Rebuilds the Provider, losing nothing.
   */
  addResource: (indicator: string, scopes?: string[]) => Promise<void>
  /** the clients registered through dynamic client registration (RFC 7591), as they asked: their metadata */
  readonly registrations: ReadonlyArray<Record<string, unknown>>
  /** how many requests each path has served (e.g. '/token') */
  readonly requests: ReadonlyMap<string, number>
  /** how many requests the JWKS endpoint and the discovery endpoint have served */
  readonly jwksRequests: number
  readonly discoveryRequests: number
}

export interface TestIdpClient {
  id: string
  /** absent: a public client (token_endpoint_auth_method none), PKCE only */
  secret?: string
  redirectUris: string[]
}

export interface TestIdpAuthorizeOptions {
  /** decline: the IdP answers error=access_denied */
  deny?: boolean
  /** consent to only these of the resource scopes asked; the others are rejected (absent: all asked) */
  allow?: string[]
}

export interface TestIdpOptions {
  algorithm?: TestIdpAlgorithm
  /** access tokens' lifetime, both grants; 600 by default */
  accessTokenTtlSeconds?: number
  /** the scopes its API defines; ['api:read', 'api:write'] by default */
  scopes?: string[]
  /** open dynamic client registration (RFC 7591) at `${issuer}/reg`, as its discovery document says */
  registration?: boolean
  /**
   * DPoP (RFC 9449, issue 43): its token endpoint takes a client's DPoP proof and binds the access
   * token it issues to the proof's key (`cnf.jkt`, token_type DPoP); without a proof, a bearer token
   */
  dpop?: boolean
}

export const TEST_IDP_AUDIENCE = 'https://keygate.test/api'
export const TEST_IDP_SERVICE_CLIENT = { id: 'keygate-service', secret: 'keygate-service-secret' } as const
export const TEST_IDP_USER_CLIENT = { id: 'keygate-cli', redirectUri: 'http://127.0.0.1/callback' } as const
const DEFAULT_SCOPES = ['api:read', 'api:write']
const JWKS_PATH = '/jwks'
const DISCOVERY_PATH = '/.well-known/openid-configuration'
const REGISTRATION_PATH = '/reg'
const INTERACTION = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login|confirm|abort))?$/

/** A private signing JWK for `algorithm` with a fresh kid. */
async function signingKey (algorithm: TestIdpAlgorithm): Promise<JWK> {
  let privateKey: KeyObject
  switch (algorithm) {
    case 'RS256': privateKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey; break
    case 'ES256': privateKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey; break
    case 'EdDSA': privateKey = generateKeyPairSync('ed25519').privateKey; break
  }
  return { ...await exportJWK(privateKey), kid: `test-idp-${randomUUID()}`, alg: algorithm, use: 'sig' }
}

/**
 * oidc-provider's storage (sessions, interactions, grants, codes, tokens) in a Map shared by every
 * Provider built behind one server, so a rotation loses nothing. Expiry is not enforced: a test's
 * IdP lives seconds.
 */
function memoryAdapter (): (model: string) => Adapter {
  const store = new Map<string, AdapterPayload>()
  return (model: string): Adapter => {
    const key = (id: string): string => `${model}:${id}`
    return {
      async upsert (id, payload) { store.set(key(id), payload) },
      async find (id) { return store.get(key(id)) },
      async findByUid (uid) { return [...store.entries()].find(([k, p]) => k.startsWith(`${model}:`) && p.uid === uid)?.[1] },
      async findByUserCode (userCode) { return [...store.entries()].find(([k, p]) => k.startsWith(`${model}:`) && p.userCode === userCode)?.[1] },
      async consume (id) { const payload = store.get(key(id)); if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000) },
      async destroy (id) { store.delete(key(id)) },
      async revokeByGrantId (grantId) { for (const [k, p] of store) if (p.grantId === grantId) store.delete(k) }
    }
  }
}

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** The interaction page a browser gets: a login form (Username, Sign in) or a consent form (Allow, Deny). */
function interactionPage (uid: string, prompt: string, clientId: string): string {
  const action = (step: string): string => `/interaction/${encodeURIComponent(uid)}/${step}`
  const body = prompt === 'login'
    ? `<h1>Sign in to the test IdP</h1>
<form method="post" action="${action('login')}">
<label for="login">Username</label>
<input id="login" name="login" autocomplete="username" required autofocus>
<button type="submit">Sign in</button>
</form>`
    : `<h1>Allow ${escapeHtml(clientId)}?</h1>
<p>${escapeHtml(clientId)} asks to act for you.</p>
<form method="post" action="${action('confirm')}"><button type="submit" autofocus>Allow</button></form>
<form method="post" action="${action('abort')}"><button type="submit">Deny</button></form>`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test IdP</title></head>
<body><main>
${body}
</main></body></html>`
}

async function readForm (req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return new URLSearchParams(Buffer.concat(chunks).toString())
}

/** A browser's cookies, as far as oidc-provider's flow needs them (names are unique along it). */
class CookieJar {
  private readonly cookies = new Map<string, string>()
  header (): string { return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ') }
  take (response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';')
      const at = pair.indexOf('=')
      const name = pair.slice(0, at).trim()
      const value = pair.slice(at + 1).trim()
      const expired = attributes.some((a) => /^\s*expires=/i.test(a) && Date.parse(a.split('=')[1] ?? '') <= Date.now())
      if (value === '' || expired) this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
  }
}

export async function startTestIdp (t: { teardown: (fn: () => unknown) => void }, options: TestIdpOptions = {}): Promise<TestIdp> {
  const algorithm = options.algorithm ?? 'RS256'
  const ttl = options.accessTokenTtlSeconds ?? 600
  const scopes = [...(options.scopes ?? DEFAULT_SCOPES)]
  const adapter = memoryAdapter()
  const cookieKeys = [randomBytes(32).toString('base64url')]
  let keys: JWK[] = [await signingKey(algorithm)]
  let jwksRequests = 0
  let discoveryRequests = 0
  const requests = new Map<string, number>()
  const extraClients: TestIdpClient[] = []
  const resources = new Map<string, string[]>([[TEST_IDP_AUDIENCE, scopes]])
  const registrations: Array<Record<string, unknown>> = []
  let jwksHangs = false
  const hung = new Set<ServerResponse>()

  let provider: Provider | undefined
  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (path === JWKS_PATH) jwksRequests++
    if (path === DISCOVERY_PATH) discoveryRequests++
    if (path === REGISTRATION_PATH && req.method === 'POST') recordRegistration(req)
    requests.set(path ?? '/', (requests.get(path ?? '/') ?? 0) + 1)
    if (path === JWKS_PATH && jwksHangs) {
      hung.add(res)
      return
    }
    const interaction = INTERACTION.exec(path ?? '')
    if (interaction !== null && provider !== undefined) {
      interact(provider, req, res, interaction[2]).catch((error: unknown) => {
        res.statusCode = 500
        res.end(String(error))
      })
      return
    }
    if (handle === undefined) { res.statusCode = 503; res.end(); return }
    handle(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const issuer = `http://127.0.0.1:${port}`

  /** a registration request's metadata, read beside oidc-provider (which reads the same stream) */
  function recordRegistration (req: IncomingMessage): void {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      try { registrations.push(JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>) } catch { registrations.push({}) }
    })
  }

  function build (): void {
    const kid = keys[0]?.kid as string
    const resourceScopes = [...new Set([...resources.values()].flat())]
    const configuration: Configuration = {
      adapter,
      clients: [{
        client_id: TEST_IDP_SERVICE_CLIENT.id,
        client_secret: TEST_IDP_SERVICE_CLIENT.secret,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic'
      }, {
        client_id: TEST_IDP_USER_CLIENT.id,
        application_type: 'native',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [TEST_IDP_USER_CLIENT.redirectUri],
        token_endpoint_auth_method: 'none'
      }, ...extraClients.map((client) => ({
        client_id: client.id,
        ...(client.secret !== undefined && { client_secret: client.secret }),
        application_type: 'web' as const,
        grant_types: ['authorization_code'],
        response_types: ['code' as const],
        redirect_uris: client.redirectUris,
        token_endpoint_auth_method: client.secret === undefined ? 'none' as const : 'client_secret_basic' as const
      }))],
      // every client's default would be RS256, which an ES256 or EdDSA key set cannot sign
      clientDefaults: { id_token_signed_response_alg: algorithm },
      // a registering client's `scope` must name only these
      ...(options.registration === true && { scopes: ['openid', 'offline_access', ...resourceScopes] }),
      jwks: { keys } as JWKS,
      cookies: { keys: cookieKeys },
      findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
      interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
      renderError: async (ctx, out) => { ctx.type = 'json'; ctx.body = out },
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        registration: { enabled: options.registration === true },
        dPoP: { enabled: options.dpop === true },
        resourceIndicators: {
          enabled: true,
          defaultResource: async () => TEST_IDP_AUDIENCE,
          useGrantedResource: async () => true,
          getResourceServerInfo: async (_ctx, resourceIndicator) => {
            const its = resources.get(resourceIndicator)
            if (its === undefined) throw new errors.InvalidTarget()
            return {
              scope: its.join(' '),
              audience: resourceIndicator,
              accessTokenTTL: ttl,
              accessTokenFormat: 'jwt',
              jwt: { sign: { alg: algorithm, kid } }
            }
          }
        }
      },
      ttl: {
        AccessToken: ttl,
        ClientCredentials: ttl,
        AuthorizationCode: 60,
        IdToken: 3600,
        Interaction: 600,
        Session: 3600,
        Grant: 3600
      }
    }
    provider = new Provider(issuer, configuration)
    handle = provider.callback()
  }
  build()

  async function interact (provider: Provider, req: IncomingMessage, res: ServerResponse, step: string | undefined): Promise<void> {
    const details = await provider.interactionDetails(req, res)
    if (req.method === 'GET' && step === undefined) {
      if ((req.headers.accept ?? '').includes('text/html')) {
        res.setHeader('content-type', 'text/html; charset=utf-8')
        res.end(interactionPage(details.uid, details.prompt.name, String(details.params.client_id ?? '')))
        return
      }
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ uid: details.uid, prompt: details.prompt.name }))
      return
    }
    if (req.method !== 'POST') { res.statusCode = 405; res.end(); return }
    const form = await readForm(req)
    if (step === 'abort') {
      await provider.interactionFinished(req, res, { error: 'access_denied', error_description: 'The user declined' }, { mergeWithLastSubmission: false })
      return
    }
    if (step === 'login' && details.prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId: form.get('login') ?? '' } }, { mergeWithLastSubmission: false })
      return
    }
    if (step === 'confirm' && details.prompt.name === 'consent') {
      const { prompt: { details: missing }, params, session } = details
      const grant = details.grantId !== undefined
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: session?.accountId, clientId: params.client_id as string })
      if (grant === undefined) throw new Error(`no grant ${details.grantId}`)
      const missingOIDCScope = missing.missingOIDCScope as string[] | undefined
      const missingOIDCClaims = missing.missingOIDCClaims as string[] | undefined
      const missingResourceScopes = missing.missingResourceScopes as Record<string, string[]> | undefined
      // `allow` (authorize's option): the user consents to only these resource scopes, rejecting the others
      const allow = form.has('allow') ? new Set((form.get('allow') ?? '').split(' ')) : undefined
      const allowed = (scope: string): boolean => allow === undefined || allow.has(scope) || !resourceScopeNames().has(scope)
      if (missingOIDCScope !== undefined) grant.addOIDCScope(missingOIDCScope.filter(allowed).join(' '))
      const rejectedOIDC = (missingOIDCScope ?? []).filter((scope) => !allowed(scope))
      if (rejectedOIDC.length > 0) grant.rejectOIDCScope(rejectedOIDC.join(' '))
      if (missingOIDCClaims !== undefined) grant.addOIDCClaims(missingOIDCClaims)
      for (const [indicator, scope] of Object.entries(missingResourceScopes ?? {})) {
        const granted = scope.filter(allowed)
        const rejected = scope.filter((one) => !allowed(one))
        if (granted.length > 0) grant.addResourceScope(indicator, granted.join(' '))
        if (rejected.length > 0) grant.rejectResourceScope(indicator, rejected.join(' '))
      }
      const grantId = await grant.save()
      await provider.interactionFinished(req, res, { consent: details.grantId === undefined ? { grantId } : {} }, { mergeWithLastSubmission: true })
      return
    }
    res.statusCode = 400
    res.end(`interaction ${details.uid} is at ${details.prompt.name}, not ${step}`)
  }

  const resourceScopeNames = (): Set<string> => new Set([...resources.values()].flat())

  function requested (asked: string[] | undefined): string[] {
    return asked ?? scopes
  }

  interface TokenResponse { access_token: string, id_token?: string, scope?: string }
  async function tokenRequest (body: URLSearchParams, headers: Record<string, string> = {}): Promise<TokenResponse> {
    const response = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body
    })
    const answer = await response.json() as { access_token?: string, id_token?: string, scope?: string, error?: string, error_description?: string }
    if (!response.ok || answer.access_token === undefined) {
      throw new Error(`test IdP's token endpoint: ${response.status} ${answer.error ?? ''} ${answer.error_description ?? ''}`)
    }
    return answer as TokenResponse
  }

  function checkScopes (asked: string[], granted: string | undefined): void {
    const got = new Set((granted ?? '').split(' '))
    const missing = asked.filter((s) => s !== 'openid' && !got.has(s))
    if (missing.length > 0) throw new Error(`test IdP left out ${missing.join(', ')}: its API defines ${scopes.join(', ')}`)
  }

  async function clientCredentialsToken (asked?: string[]): Promise<string> {
    const want = requested(asked)
    const body = new URLSearchParams({ grant_type: 'client_credentials', resource: TEST_IDP_AUDIENCE })
    if (want.length > 0) body.set('scope', want.join(' '))
    const basic = Buffer.from(`${TEST_IDP_SERVICE_CLIENT.id}:${TEST_IDP_SERVICE_CLIENT.secret}`).toString('base64')
    const answer = await tokenRequest(body, { authorization: `Basic ${basic}` })
    checkScopes(want, answer.scope)
    return answer.access_token
  }

  async function authorizationCodeToken (subject: string, asked?: string[]): Promise<{ accessToken: string, idToken?: string }> {
    const want = requested(asked)
    const jar = new CookieJar()
    const verifier = randomBytes(32).toString('base64url')
    const challenge = createHash('sha256').update(verifier).digest('base64url')
    const state = randomBytes(8).toString('base64url')
    const auth = new URL('/auth', issuer)
    auth.search = new URLSearchParams({
      client_id: TEST_IDP_USER_CLIENT.id,
      redirect_uri: TEST_IDP_USER_CLIENT.redirectUri,
      response_type: 'code',
      scope: ['openid', ...want].join(' '),
      resource: TEST_IDP_AUDIENCE,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state
    }).toString()

    /** one request as a browser sends it; the Location it answers with (303 or 302) */
    async function step (url: string, form?: Record<string, string>): Promise<string> {
      const response = await fetch(url, {
        method: form === undefined ? 'GET' : 'POST',
        redirect: 'manual',
        headers: { cookie: jar.header(), ...(form !== undefined && { 'content-type': 'application/x-www-form-urlencoded' }) },
        ...(form !== undefined && { body: new URLSearchParams(form) })
      })
      jar.take(response)
      const location = response.headers.get('location')
      if (location === null) throw new Error(`test IdP: ${url} answered ${response.status} without a redirect: ${await response.text()}`)
      await response.body?.cancel()
      return new URL(location, url).toString()
    }

    let next = await step(auth.toString())
    for (let hops = 0; hops < 10 && !next.startsWith(TEST_IDP_USER_CLIENT.redirectUri); hops++) {
      const interaction = INTERACTION.exec(new URL(next).pathname)
      if (interaction !== null) {
        const response = await fetch(next, { headers: { cookie: jar.header() } })
        const { prompt } = await response.json() as { prompt: string }
        next = prompt === 'login'
          ? await step(`${next}/login`, { login: subject })
          : await step(`${next}/confirm`, {})
      } else {
        next = await step(next)
      }
    }
    const callback = new URL(next)
    if (!next.startsWith(TEST_IDP_USER_CLIENT.redirectUri)) throw new Error(`test IdP: the flow did not reach the redirect URI: ${next}`)
    const code = callback.searchParams.get('code')
    if (code === null || callback.searchParams.get('state') !== state) {
      throw new Error(`test IdP: the redirect carries no code for this state: ${callback.search}`)
    }
    const answer = await tokenRequest(new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: TEST_IDP_USER_CLIENT.id,
      code,
      redirect_uri: TEST_IDP_USER_CLIENT.redirectUri,
      code_verifier: verifier,
      resource: TEST_IDP_AUDIENCE
    }))
    checkScopes(want, answer.scope)
    return { accessToken: answer.access_token, ...(answer.id_token !== undefined && { idToken: answer.id_token }) }
  }

  async function authorize (authorizationUrl: string, subject: string, options: TestIdpAuthorizeOptions = {}): Promise<string> {
    const jar = new CookieJar()
    let next = authorizationUrl
    for (let hops = 0; hops < 12 && new URL(next).origin === issuer; hops++) {
      const interaction = INTERACTION.exec(new URL(next).pathname)
      let response: Response
      if (interaction !== null && interaction[2] === undefined) {
        const page = await fetch(next, { headers: { cookie: jar.header() } })
        const { prompt } = await page.json() as { prompt: string }
        const to = prompt === 'login' ? 'login' : options.deny === true ? 'abort' : 'confirm'
        response = await fetch(`${next}/${to}`, {
          method: 'POST',
          redirect: 'manual',
          headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(prompt === 'login'
            ? { login: subject }
            : options.allow !== undefined ? { allow: options.allow.join(' ') } : {})
        })
      } else {
        response = await fetch(next, { redirect: 'manual', headers: { cookie: jar.header() } })
      }
      jar.take(response)
      const location = response.headers.get('location')
      await response.body?.cancel()
      if (location === null) throw new Error(`test IdP: ${next} answered ${response.status} without a redirect`)
      next = new URL(location, next).toString()
    }
    if (new URL(next).origin === issuer) throw new Error(`test IdP: the flow did not leave the IdP: ${next}`)
    return next
  }

  let listening = true
  async function stop (): Promise<void> {
    if (!listening) return
    listening = false
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    for (const res of hung) res.destroy()
    server.closeAllConnections()
    await closed
  }
  async function start (): Promise<void> {
    if (listening) return
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => { server.off('error', reject); resolve() })
    })
    listening = true
  }
  t.teardown(stop)

  return {
    issuer,
    jwksUri: `${issuer}${JWKS_PATH}`,
    audience: TEST_IDP_AUDIENCE,
    scopes,
    accessTokenTtlSeconds: ttl,
    algorithm,
    get currentKid () { return keys[0]?.kid as string },
    clientCredentialsToken,
    authorizationCodeToken,
    async rotateKey ({ keepOld }) {
      const fresh = await signingKey(algorithm)
      keys = keepOld ? [fresh, ...keys] : [fresh]
      build()
    },
    async addClient (client) {
      extraClients.push(client)
      build()
    },
    authorize,
    async addResource (indicator, resourceScopes) {
      resources.set(indicator, [...(resourceScopes ?? scopes)])
      build()
    },
    registrations,
    requests,
    stop,
    start,
    hangJwks (on) {
      jwksHangs = on
      if (on) return
      for (const res of hung) res.destroy()
      hung.clear()
    },
    get jwksRequests () { return jwksRequests },
    get discoveryRequests () { return discoveryRequests }
  }
}

/**
 * An issuers file naming `idp` alone (YAML, for routeFile): its RFC 9068 access tokens (at+jwt)
 * for `audiences` (default: the IdP's own API), under `name`.
 */
export function issuersYaml (idp: Pick<TestIdp, 'issuer' | 'audience'>,
  { name = 'testidp', audiences = [idp.audience] }: { name?: string, audiences?: string[] } = {}): string {
  return `issuers:
  - name: ${name}
    issuer: ${idp.issuer}
    audiences: [${audiences.join(', ')}]
    accessTokenType: at+jwt
`
}
