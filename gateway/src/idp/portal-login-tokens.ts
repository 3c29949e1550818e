// The portal's login at the identity provider's side of the callback: the code traded for tokens
// at the token endpoint (no redirect followed, bounded in time and size; the client secret, when
// there is one, by client_secret_basic), and the ID token checked (the issuer's published key,
// iss, aud, exp, iat, nonce, azp, at_hash). Every failure is IDP_LOGIN_FAILED saying what went
// wrong, never quoting a token, code or secret. The flow around them is portal-login.ts.
import { createHash, timingSafeEqual } from 'node:crypto'
import { decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose'
import { GatewayError, isGatewayError } from '../errors.js'
import { readBounded } from '../lib/read-bounded.js'
import type { KeySource } from './idp-tokens.js'
import { TOKEN_REQUEST_PARAMS, type IssuerConfig, type PortalLoginConfig } from './issuers.js'

/** the token endpoint's bounds */
export const TOKEN_ENDPOINT_TIMEOUT_MS = 10_000
export const TOKEN_ENDPOINT_MAX_BYTES = 64 * 1024
/** what an IdP's `error` may be (RFC 6749 §4.1.2.1: %x20-21 / %x23-5B / %x5D-7E) */
export const OAUTH_ERROR = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,64}$/
/** an error_description, as much of it as keygate repeats: the same characters, at most 300 */
const OAUTH_DESCRIPTION = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,300}$/
/** an IdP's error_description, when it is one keygate can repeat (": ..."), or nothing */
export const describedBy = (value: unknown): string =>
  typeof value === 'string' && OAUTH_DESCRIPTION.test(value.slice(0, 300)) ? `: ${value.slice(0, 300)}` : ''

/** hashes a secret (the binding cookie's value), or both sides of a comparison */
export const sha256 = (value: string): Buffer => createHash('sha256').update(value).digest()
/** constant time, whatever the lengths (both sides hashed first) */
export const sameSecret = (a: string, b: string): boolean => timingSafeEqual(sha256(a), sha256(b))

/** IDP_LOGIN_FAILED: the IdP or keygate's exchange with it failed (`status`: 502 when it is on the IdP's side) */
export const loginFailed = (detail: string, status?: number): GatewayError =>
  new GatewayError('IDP_LOGIN_FAILED', detail, status === undefined ? {} : { status })

/** The hash OIDC Core §3.1.3.6 takes at_hash with: that of the ID token's alg (EdDSA on Ed25519: SHA-512). */
function atHashOf (accessToken: string, alg: string): string | undefined {
  const bits = alg === 'EdDSA' || alg.endsWith('512') ? 512 : alg.endsWith('384') ? 384 : alg.endsWith('256') ? 256 : undefined
  if (bits === undefined) return undefined
  const digest = createHash(`sha${bits}`).update(accessToken).digest()
  return digest.subarray(0, digest.length / 2).toString('base64url')
}

/** The client's credentials for client_secret_basic: each part form-encoded first (RFC 6749 §2.3.1). */
function basicAuthorization (login: PortalLoginConfig, secret: string): string {
  const encode = (value: string): string => new URLSearchParams({ v: value }).toString().slice(2)
  return `Basic ${Buffer.from(`${encode(login.clientId)}:${encode(secret)}`).toString('base64')}`
}

/** The code for tokens, at the token endpoint: no redirect followed, bounded in time and size. */
export async function exchangeCode (fetchImpl: typeof globalThis.fetch, issuer: IssuerConfig, tokenEndpoint: string, code: string,
  state: { redirectUri: string; verifier: string }): Promise<Record<string, unknown>> {
  const login = issuer.portalLogin as PortalLoginConfig
  const secret = login.clientSecret()
  const body = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: state.redirectUri, code_verifier: state.verifier })
  if (secret === undefined) body.set('client_id', login.clientId)
  for (const name of TOKEN_REQUEST_PARAMS) {
    const value = login.authorizationParams[name]
    if (value !== undefined) body.set(name, value)
  }
  let response: Response
  try {
    response = await fetchImpl(tokenEndpoint, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(TOKEN_ENDPOINT_TIMEOUT_MS),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
        ...(secret !== undefined && { authorization: basicAuthorization(login, secret) })
      },
      body
    })
  } catch (err) {
    const cause = (err as Error).cause
    throw loginFailed(`${issuer.name}'s token endpoint ${tokenEndpoint} could not be reached: ${(err as Error).name === 'TimeoutError'
      ? `no answer within ${TOKEN_ENDPOINT_TIMEOUT_MS} ms`
      : cause instanceof Error ? cause.message : (err as Error).message}`, 502)
  }
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => undefined)
    throw loginFailed(`${issuer.name}'s token endpoint answered ${response.status}, a redirect: keygate follows none; check its discovery document`, 502)
  }
  const bytes = await readBounded(response, TOKEN_ENDPOINT_MAX_BYTES).catch(() => undefined)
  const text = bytes === undefined ? undefined : Buffer.from(bytes).toString('utf8')
  if (text === undefined) throw loginFailed(`${issuer.name}'s token endpoint answered over ${TOKEN_ENDPOINT_MAX_BYTES} bytes, or cut its answer short`, 502)
  let answer: unknown
  try {
    answer = JSON.parse(text)
  } catch {
    throw loginFailed(`${issuer.name}'s token endpoint answered ${response.status} with what is not JSON`, 502)
  }
  const fields = (answer !== null && typeof answer === 'object' && !Array.isArray(answer) ? answer : {}) as Record<string, unknown>
  if (response.status !== 200) {
    const error = typeof fields.error === 'string' && OAUTH_ERROR.test(fields.error) ? fields.error : undefined
    const description = describedBy(fields.error_description)
    if (error === undefined) throw loginFailed(`${issuer.name}'s token endpoint answered ${response.status}`, 502)
    const secretHint = login.clientSecretEnv === undefined
      ? ', and whether the IdP expects a client secret (clientSecretEnv)'
      : ` and ${login.clientSecretEnv}`
    const hint = error === 'invalid_client' ? ` (check portalLogin.clientId${secretHint})` : ''
    throw loginFailed(`${issuer.name}'s token endpoint refused the code: ${error}${description}${hint}`)
  }
  return fields
}

/** The ID token: the issuer's published key, iss, aud (this client), exp, iat, nonce, azp, at_hash. */
export async function checkIdToken (issuer: IssuerConfig, keysOf: (issuer: IssuerConfig) => KeySource, now: () => number, idToken: string,
  nonce: string, accessToken: string): Promise<JWTPayload> {
  const login = issuer.portalLogin as PortalLoginConfig
  const bad = (why: string, cause?: unknown): GatewayError =>
    new GatewayError('IDP_LOGIN_FAILED', `${issuer.name}'s ID token ${why}`, cause === undefined ? {} : { cause })
  if (idToken.length > issuer.maxTokenBytes * 2) throw bad(`is over ${issuer.maxTokenBytes * 2} bytes`)
  let alg: unknown
  let kid: unknown
  try {
    ({ alg, kid } = decodeProtectedHeader(idToken))
  } catch (err) {
    throw bad('is malformed', err)
  }
  if (typeof alg !== 'string' || !(issuer.algorithms as readonly string[]).includes(alg)) {
    throw bad(`is signed with ${JSON.stringify(alg)}, not one of the algorithms this issuer may use (${issuer.algorithms.join(', ')})`)
  }
  let payload: JWTPayload
  try {
    const key = await keysOf(issuer).keyFor(typeof kid === 'string' ? kid : undefined, alg)
    ;({ payload } = await jwtVerify(idToken, key, {
      issuer: issuer.issuer,
      audience: login.clientId,
      algorithms: [alg],
      clockTolerance: issuer.clockSkewSeconds,
      currentDate: new Date(now()),
      requiredClaims: ['exp', 'iat', 'sub', 'nonce']
    }))
  } catch (err) {
    if (isGatewayError(err)) throw bad(`could not be checked: ${err.message}`, err)
    if (err instanceof joseErrors.JWTExpired) throw bad('has expired', err)
    if (err instanceof joseErrors.JWTClaimValidationFailed) {
      throw bad(err.claim === 'aud'
        ? `is not for keygate's portal: its audience is not ${JSON.stringify(login.clientId)} (portalLogin.clientId)`
        : `fails its ${err.claim} check (${err.reason})`, err)
    }
    if (err instanceof joseErrors.JWSSignatureVerificationFailed) throw bad('does not verify with the issuer\'s published key', err)
    throw bad(`does not verify: ${(err as Error).message}`, err)
  }
  if (typeof payload.nonce !== 'string' || !sameSecret(payload.nonce, nonce)) throw bad('carries another nonce than this login\'s: refused (a replay?)')
  const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud]
  if (payload.azp !== undefined ? payload.azp !== login.clientId : audiences.length > 1) {
    throw bad(`names another authorized party (azp) than ${JSON.stringify(login.clientId)}`)
  }
  if (payload.at_hash !== undefined) {
    const expected = atHashOf(accessToken, alg)
    if (expected !== undefined && (typeof payload.at_hash !== 'string' || !sameSecret(payload.at_hash, expected))) {
      throw bad('does not match the access token it came with (at_hash)')
    }
  }
  return payload
}
