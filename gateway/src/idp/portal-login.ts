// The developer portal's login through an identity provider (docs/identity-providers.md, "The
// portal's login"): OpenID Connect's authorization code flow with PKCE (S256), with keygate as
// the OpenID client (a backend for the page). The page only ever navigates to the IdP; keygate
// trades the code for tokens at the IdP's token endpoint, so the portal's CSP (connect-src 'self',
// form-action 'none') stays as it is and the page never sees the code or the ID token.
//
// start: a random state (256 bits), nonce and PKCE verifier, kept in the store under the state
//   for 10 minutes with the hash of a random binding value that goes to the browser in a cookie
//   (HttpOnly, SameSite=Lax, under <prefix>/oidc/): the callback must come back to the browser
//   that began (no login CSRF), and to any gateway on the store.
// callback: the state taken once (a replayed callback finds nothing), the cookie checked, RFC
//   9207's iss checked, the code traded with the verifier (and the client secret, when there is
//   one), the ID token verified (signature by the issuer's published keys, iss, aud, exp, nonce,
//   azp, at_hash), the access token verified as keygate verifies any of that IdP's (idp-tokens.ts),
//   then a one-time handoff (60 s, bound to the same cookie) holds the token for the page, which
//   the redirect names in its fragment: never sent to a server, never in a Referer.
// redeem: the page's POST takes the handoff once and gets the token: it keeps it in a module
//   variable only. A failure anywhere is a handoff too, holding the problem, so the page says why.
//
// Nothing here logs a token, a code, a verifier or a secret: errors carry what went wrong, never
// the values. The token endpoint's exchange and the ID token's checks are portal-login-tokens.ts.
import { createHash, randomBytes } from 'node:crypto'
import { GatewayError, isGatewayError, type ErrorCode } from '../errors.js'
import type { Store } from '../store/index.js'
import type { IdpVerifier, KeySource } from './idp-tokens.js'
import { discoverProvider, type ProviderMetadata } from './issuer-keys.js'
import type { IssuerConfig, PortalLoginConfig } from './issuers.js'
import { checkIdToken, describedBy, exchangeCode, loginFailed, OAUTH_ERROR, sameSecret, sha256 } from './portal-login-tokens.js'

/** a login's state lives this long: from the start to the callback, the user's time at the IdP */
export const LOGIN_STATE_TTL_MS = 10 * 60_000
/** the token waits this long for the page to take it */
export const HANDOFF_TTL_MS = 60_000
/** a failed discovery is tried again no sooner than this */
const DISCOVERY_RETRY_MS = 30_000
/** the values keygate makes (state, nonce, verifier, binding, handoff id): 32 random bytes, base64url */
export const RANDOM_VALUE = /^[A-Za-z0-9_-]{43}$/
/** where the page goes once logged in: one of its own views */
const THEN = /^#\/[A-Za-z0-9/_.~%=&?-]{0,256}$/
const STATE_KEY = 'portal-login:state:'
const HANDOFF_KEY = 'portal-login:handoff:'
const random = (): string => randomBytes(32).toString('base64url')
/** What start keeps under the state. */
interface LoginState {
  issuer: string
  verifier: string
  nonce: string
  redirectUri: string
  then: string
  /** sha256 of the binding cookie's value, base64url */
  binding: string
}

/** What the callback leaves for the page: the token, or why there is none. */
type Handoff =
  | { token: string; username: string; expiresAt: string; then: string; binding: string }
  | { problem: { code: ErrorCode; detail: string; status: number } }

export interface PortalSession {
  token: string
  username: string
  /** ISO 8601: the access token's exp */
  expiresAt: string
  /** the view the page goes to: the one asked for before the login, or #/keys */
  then: string
}

export interface PortalLoginOptions {
  issuers: readonly IssuerConfig[]
  store: Store
  /** the issuer's published keys (issuer-keys.ts): they verify its ID tokens as they do its access tokens */
  keysOf: (issuer: IssuerConfig) => KeySource
  /** keygate's verifier of IdP access tokens: the portal gets only a token keygate accepts */
  verifier: IdpVerifier
  fetch?: typeof globalThis.fetch
  now?: () => number
  /** a login that failed on keygate's side or the IdP's (5xx, or not a GatewayError): for the operator's log (no token, code or secret in it) */
  onError?: (err: unknown) => void
}

export interface PortalLogin {
  /** the issuers the portal offers, for its "Log in with ..." links */
  providers: () => Array<{ name: string; label: string }>
  /** the issuer `name` logs the portal in, or undefined */
  has: (name: string) => boolean
  /**
   * Begins a login: the authorization request's URL, and the binding value for the cookie.
   * `redirectUri`: where the IdP sends the browser back (the configured one wins). Throws
   * GatewayError (IDP_LOGIN_FAILED when the IdP's discovery fails).
   */
  start: (name: string, input: { redirectUri: string; then: string | undefined }) => Promise<{ location: string; binding: string; redirectUri: string }>
  /** a handoff holding `err` as a problem (IDP_LOGIN_FAILED when it is not a GatewayError), for the page to show */
  problem: (err: unknown) => Promise<string>
  /**
   * The IdP's redirect back: always a handoff id, holding the token (bound to the cookie) or the
   * problem. `binding`: the cookie's value, if the browser sent one.
   */
  callback: (query: Record<string, unknown>, binding: string | undefined) => Promise<string>
  /** the handoff, once, for the browser whose cookie it is bound to; GatewayError else */
  redeem: (handoff: string, binding: string | undefined) => Promise<PortalSession>
}

const stateInvalid = (detail: string): GatewayError => new GatewayError('LOGIN_STATE_INVALID', detail)

/** a query parameter given once, as a string; anything else (absent, repeated, an array) is undefined */
function single (query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name]
  return typeof value === 'string' ? value : undefined
}

/** What a login's steps use: the store, the issuers by name, their discovery, and the verifiers. */
interface Login {
  store: Store
  byName: ReadonlyMap<string, IssuerConfig>
  metadataOf: (issuer: IssuerConfig) => Promise<ProviderMetadata & { authorizationEndpoint: string; tokenEndpoint: string }>
  fetchImpl: typeof globalThis.fetch
  keysOf: (issuer: IssuerConfig) => KeySource
  now: () => number
  verifier: IdpVerifier
}

/** start: the state, nonce, PKCE verifier and binding made and kept; the authorization request's URL. */
async function startLogin ({ store, byName, metadataOf }: Login, name: string, input: { redirectUri: string; then: string | undefined }):
Promise<{ location: string; binding: string; redirectUri: string }> {
  const issuer = byName.get(name)
  if (issuer === undefined) throw new GatewayError('NOT_FOUND', `The portal logs in through no issuer named ${JSON.stringify(name.slice(0, 64))}`)
  const login = issuer.portalLogin as PortalLoginConfig
  const metadata = await metadataOf(issuer)
  const state = random()
  const nonce = random()
  const verifier = random()
  const binding = random()
  const redirectUri = login.redirectUri ?? input.redirectUri
  const then = input.then !== undefined && THEN.test(input.then) && !input.then.startsWith('#/login') ? input.then : '#/keys'
  const record: LoginState = { issuer: issuer.name, verifier, nonce, redirectUri, then, binding: sha256(binding).toString('base64url') }
  await store.putOnce(`${STATE_KEY}${state}`, JSON.stringify(record), LOGIN_STATE_TTL_MS)
  const location = new URL(metadata.authorizationEndpoint)
  // the configured parameters first: keygate's own, set after, cannot be replaced (issuers.ts refuses them anyway)
  for (const [key, value] of Object.entries(login.authorizationParams)) location.searchParams.set(key, value)
  const protocol: Record<string, string> = {
    response_type: 'code',
    client_id: login.clientId,
    redirect_uri: redirectUri,
    scope: ['openid', ...login.scopes].join(' '),
    state,
    nonce,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256'
  }
  for (const [key, value] of Object.entries(protocol)) location.searchParams.set(key, value)
  return { location: location.href, binding, redirectUri }
}

/**
 * The callback's checks, in order: the state (taken once), the browser's binding, the issuer
 * (RFC 9207's iss), the IdP's error or code, the code traded, the ID token, and the access token
 * as keygate verifies any of the IdP's. The handoff for the page, or a GatewayError.
 */
async function completeLogin (login: Login, query: Record<string, unknown>, binding: string | undefined): Promise<Handoff> {
  const { store, byName, metadataOf, fetchImpl, keysOf, now, verifier } = login
  const stateValue = single(query, 'state')
  if (stateValue === undefined || !RANDOM_VALUE.test(stateValue)) {
    throw stateInvalid('The callback carries no state keygate made: start the login again from the portal')
  }
  const held = await store.takeOnce(`${STATE_KEY}${stateValue}`)
  if (held === null) {
    throw stateInvalid(`This login is unknown, already completed, or older than ${LOGIN_STATE_TTL_MS / 60_000} minutes: start it again from the portal`)
  }
  const state = JSON.parse(held) as LoginState
  if (binding === undefined || !RANDOM_VALUE.test(binding) || !sameSecret(sha256(binding).toString('base64url'), state.binding)) {
    throw stateInvalid('This browser did not begin this login (its login cookie is missing or another\'s): ' +
      'start the login again from the portal, in this browser')
  }
  const issuer = byName.get(state.issuer)
  if (issuer === undefined) throw stateInvalid(`The issuer ${state.issuer} no longer logs the portal in`)
  const metadata = await metadataOf(issuer)
  // RFC 9207: a response names its issuer, so one IdP's answer is never taken for another's
  const iss = single(query, 'iss')
  if (iss !== undefined ? iss !== issuer.issuer : metadata.issParameterSupported) {
    const named = iss === undefined ? 'does not name its issuer (iss), which' : `names the issuer ${JSON.stringify(iss.slice(0, 200))}, not`
    throw loginFailed(`The callback ${named} ${issuer.name} (${issuer.issuer})${iss === undefined ? ' says it always does' : ''}: refused`)
  }
  const error = single(query, 'error')
  if (error !== undefined) {
    throw loginFailed(`${issuer.name} answered ${OAUTH_ERROR.test(error) ? error : 'an error'}${describedBy(single(query, 'error_description'))}`)
  }
  const code = single(query, 'code')
  if (code === undefined || code === '' || code.length > 4096) throw loginFailed(`${issuer.name}'s callback carries no code`)
  const tokens = await exchangeCode(fetchImpl, issuer, metadata.tokenEndpoint, code, state)
  const { access_token: accessToken, id_token: idToken, token_type: tokenType } = tokens
  if (typeof accessToken !== 'string' || typeof idToken !== 'string') {
    throw loginFailed(`${issuer.name}'s token endpoint answered without ${typeof accessToken !== 'string' ? 'an access token' : 'an ID token'}`, 502)
  }
  if (typeof tokenType !== 'string' || tokenType.toLowerCase() !== 'bearer') {
    throw loginFailed(`${issuer.name}'s access token is of type ${JSON.stringify(tokenType)}, not Bearer`)
  }
  const claims = await checkIdToken(issuer, keysOf, now, idToken, state.nonce, accessToken)
  // the token the page gets is one keygate accepts on its API: checked as any of the IdP's
  if (verifier.issuerOf(accessToken) !== issuer) {
    throw loginFailed(`${issuer.name}'s access token is not a JWT it issued (an opaque token?): keygate can only accept a JWT access token. ` +
      'Ask the IdP for one meant for keygate (portalLogin.authorizationParams: resource or audience; see docs/identity-providers.md)')
  }
  let verified
  try {
    verified = await verifier.verify(accessToken, issuer)
  } catch (err) {
    if (isGatewayError(err) && err.code === 'INVALID_TOKEN') {
      throw loginFailed(`${issuer.name}'s access token is not one keygate accepts: ${err.message}. Ask the IdP for a token keygate's issuer ` +
        `configuration accepts (audiences: ${issuer.audiences.join(', ')}), e.g. with portalLogin.authorizationParams or scopes`)
    }
    throw err
  }
  if (issuer.subjectClaim === 'sub' && claims.sub !== verified.subject) {
    throw loginFailed(`${issuer.name}'s ID token and access token name different subjects: refused`)
  }
  return {
    token: accessToken,
    username: verified.username,
    expiresAt: new Date(verified.expiresAt * 1000).toISOString(),
    then: state.then,
    binding: state.binding
  }
}

export function createPortalLogin (options: PortalLoginOptions): PortalLogin {
  const { store, keysOf, verifier } = options
  const fetchImpl = options.fetch ?? globalThis.fetch
  const now = options.now ?? Date.now
  const byName = new Map(options.issuers.filter((issuer) => issuer.portalLogin !== undefined).map((issuer) => [issuer.name, issuer]))

  /** each issuer's discovery, kept once it succeeds; a failure is tried again at most once per DISCOVERY_RETRY_MS */
  const discovered = new Map<string, { at: number; failed: boolean; metadata: Promise<ProviderMetadata> }>()
  const metadataOf = async (issuer: IssuerConfig): Promise<ProviderMetadata & { authorizationEndpoint: string; tokenEndpoint: string }> => {
    let entry = discovered.get(issuer.name)
    if (entry === undefined || (entry.failed && now() - entry.at >= DISCOVERY_RETRY_MS)) {
      const made = { at: now(), failed: false, metadata: discoverProvider(issuer, fetchImpl) }
      made.metadata.catch(() => { made.failed = true })
      discovered.set(issuer.name, made)
      entry = made
    }
    let metadata: ProviderMetadata
    try {
      metadata = await entry.metadata
    } catch (err) {
      throw loginFailed(`keygate cannot reach ${issuer.name}'s discovery document: ${(err as Error).message}`, 502)
    }
    if (metadata.loginProblem !== undefined || metadata.authorizationEndpoint === undefined || metadata.tokenEndpoint === undefined) {
      throw loginFailed(`${issuer.name}'s discovery document does not serve the portal's login: ${metadata.loginProblem ?? 'no endpoints'}`, 502)
    }
    return { ...metadata, authorizationEndpoint: metadata.authorizationEndpoint, tokenEndpoint: metadata.tokenEndpoint }
  }

  const problemHandoff = async (err: unknown): Promise<string> => {
    if (!isGatewayError(err) || err.statusCode >= 500) options.onError?.(err)
    const error = isGatewayError(err) ? err : loginFailed('The login could not be completed: keygate failed (its log says why)', 502)
    const id = random()
    const handoff: Handoff = { problem: { code: error.code, detail: error.message, status: error.statusCode } }
    await store.putOnce(`${HANDOFF_KEY}${id}`, JSON.stringify(handoff), HANDOFF_TTL_MS)
    return id
  }

  const login: Login = { store, byName, metadataOf, fetchImpl, keysOf, now, verifier }
  return {
    providers () {
      return [...byName.values()].map((issuer) => ({ name: issuer.name, label: (issuer.portalLogin as PortalLoginConfig).label }))
    },
    has (name) {
      return byName.has(name)
    },
    start: async (name, input) => await startLogin(login, name, input),
    problem: problemHandoff,
    async callback (query, binding) {
      let handoff: Handoff
      try {
        handoff = await completeLogin(login, query, binding)
      } catch (err) {
        return await problemHandoff(err)
      }
      const id = random()
      await store.putOnce(`${HANDOFF_KEY}${id}`, JSON.stringify(handoff), HANDOFF_TTL_MS)
      return id
    },
    async redeem (id, binding) {
      const held = RANDOM_VALUE.test(id) ? await store.takeOnce(`${HANDOFF_KEY}${id}`) : null
      if (held === null) throw stateInvalid(`This login's handoff is unknown, already taken, or older than ${HANDOFF_TTL_MS / 1000} s: log in again`)
      const handoff = JSON.parse(held) as Handoff
      if ('problem' in handoff) {
        const { code, detail, status } = handoff.problem
        throw new GatewayError(code, detail, { status })
      }
      if (binding === undefined || !RANDOM_VALUE.test(binding) || !sameSecret(sha256(binding).toString('base64url'), handoff.binding)) {
        throw stateInvalid('This browser did not complete this login (its login cookie is missing or another\'s): log in again')
      }
      return { token: handoff.token, username: handoff.username, expiresAt: handoff.expiresAt, then: handoff.then }
    }
  }
}
