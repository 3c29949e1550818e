// Who is logged in, and keygate's own bearer API. The token lives in this module only: never in
// localStorage, sessionStorage or a cookie, so nothing outlives the page and no other script or
// tab can read it; a reload logs out. It comes from a password login (POST /v1/auth/token) or,
// through an identity provider, from the one-time handoff keygate's callback names in the URL's
// fragment (POST <prefix>/oidc/session: the login cookie goes with it, same origin).
//
// A password login is DPoP-bound (RFC 9449): the page makes a key pair for each login, its private
// half a non-extractable WebCrypto key held in this module's memory (nothing can export it, not
// even this page's scripts), logs in with a proof by it, and signs a proof for every request the
// token goes with. keygate binds the token to that key (cnf.jkt), so a token taken out of the page
// (from its requests, a log, an extension) is refused without a proof only this page can make.
// An identity provider's token is that provider's, unbound: sent as Bearer.
import { generateDpopKey, KeygateResponseError, login, withDpopProof, type DpopKeyPair } from '@keygate/client'

interface Session { username: string; token: string; dpop: DpopKeyPair | undefined }
let session: Session | undefined

/** Called when keygate says the token is no more (expired, or the user changed): the page asks to log in again. */
let onExpired: (reason: string) => void = () => {}

export const baseUrl = (): string => location.origin

export function currentUser (): string | undefined {
  return session?.username
}

export function loggedIn (): boolean {
  return session !== undefined
}

export function whenExpired (handler: (reason: string) => void): void {
  onExpired = handler
}

export async function logIn (username: string, password: string): Promise<void> {
  const dpop = await generateDpopKey()
  const { token } = await login({ baseUrl: baseUrl(), username, password, dpop })
  session = { username, token, dpop }
}

/** An identity provider the portal logs in through: its link's text and where the link goes. */
export interface LoginProvider { name: string; label: string }

/** The identity providers keygate offers for the login (none: the password form alone). */
export async function loginProviders (): Promise<LoginProvider[]> {
  const response = await fetch(new URL('oidc/providers', location.href))
  if (!response.ok) return []
  const providers = await response.json() as unknown
  return Array.isArray(providers)
    ? providers.filter((p): p is LoginProvider => typeof p?.name === 'string' && typeof p?.label === 'string')
    : []
}

/** A view of the page to go to after a login: one of its own (#/...), never the login again. */
export function pageView (then: unknown, fallback: string): string {
  return typeof then === 'string' && /^#\/[A-Za-z0-9/_.~%=&?-]{0,256}$/.test(then) && !then.startsWith('#/login') ? then : fallback
}

/**
 * Takes the token keygate's callback left for this page (once; the cookie proves it is this
 * browser's), and keeps it here. The view to go to next; a KeygateResponseError with the
 * problem's code and detail when the login did not succeed.
 */
export async function logInWithHandoff (handoff: string): Promise<{ username: string; then: string }> {
  const response = await fetch(new URL('oidc/session', location.href), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ handoff })
  })
  if (!response.ok) throw await problemOf(response)
  const answer = await response.json() as { token: string; username: string; then?: string }
  session = { username: answer.username, token: answer.token, dpop: undefined }
  return { username: answer.username, then: pageView(answer.then, '#/keys') }
}

export function logOut (): void {
  session = undefined
}

/** The token, for a registration (which sends it with its proof: dpopKey). */
export function token (): string {
  if (session === undefined) throw new Error('not logged in')
  return session.token
}

/** The DPoP key pair the token is bound to; undefined for an identity provider's token. */
export function dpopKey (): DpopKeyPair | undefined {
  return session?.dpop
}

/**
 * `fetch` with the token: "DPoP <token>" and a new proof for this very request (sent again once
 * with the server's nonce when it asks for one), or "Bearer <token>" for an unbound one.
 */
export async function fetchWithToken (url: URL, init: RequestInit & { headers?: Record<string, string> }): Promise<Response> {
  if (session === undefined) throw new Error('not logged in')
  const { token: held, dpop } = session
  const headers = init.headers ?? {}
  if (dpop === undefined) return await fetch(url, { ...init, headers: { ...headers, authorization: `Bearer ${held}` } })
  return await withDpopProof(dpop, init.method ?? 'GET', url, held,
    async (proof) => await fetch(url, { ...init, headers: { ...headers, authorization: `DPoP ${held}`, dpop: proof } }))
}

/** A problem+json answer as an error: KeygateResponseError, as @keygate/client's own calls reject with. */
async function problemOf (response: Response): Promise<KeygateResponseError> {
  const text = await response.text()
  let problem: Record<string, unknown>
  try {
    problem = JSON.parse(text) as Record<string, unknown>
  } catch {
    problem = { detail: text }
  }
  return new KeygateResponseError(response.status, problem)
}

/** One call of keygate's bearer API (/v1/api-keys, /v1/usage, /v1/routes): its JSON, or a KeygateResponseError. */
export async function api<T> (method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetchWithToken(new URL(path, baseUrl()), {
    method,
    headers: body !== undefined ? { 'content-type': 'application/json' } : {},
    ...(body !== undefined && { body: JSON.stringify(body) })
  })
  if (!response.ok) {
    const error = await problemOf(response)
    if (response.status === 401 && (error.code === 'INVALID_TOKEN' || error.code === 'MISSING_TOKEN' || error.code === 'DPOP_REQUIRED')) {
      session = undefined
      onExpired(`${error.message}. Log in again.`)
    }
    throw error
  }
  return (response.status === 204 ? undefined : await response.json()) as T
}

/** A message for an error of any kind: keygate's code and detail, or what went wrong. */
export function describeError (err: unknown): string {
  if (err instanceof KeygateResponseError) return err.message
  if (err instanceof Error) return err.message
  return String(err)
}
