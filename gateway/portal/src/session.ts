// Who is logged in, and keygate's own bearer API. The token lives in this module only: never in
// localStorage, sessionStorage or a cookie, so nothing outlives the page and no other script or
// tab can read it; a reload logs out.
import { KeygateResponseError, login } from '@keygate/client'

interface Session { username: string; token: string }
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
  const { token } = await login({ baseUrl: baseUrl(), username, password })
  session = { username, token }
}

export function logOut (): void {
  session = undefined
}

/** The bearer token, for a signed request (which carries it too). */
export function token (): string {
  if (session === undefined) throw new Error('not logged in')
  return session.token
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
  const response = await fetch(new URL(path, baseUrl()), {
    method,
    headers: { authorization: `Bearer ${token()}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) })
  })
  if (!response.ok) {
    const error = await problemOf(response)
    if (response.status === 401 && (error.code === 'INVALID_TOKEN' || error.code === 'MISSING_TOKEN')) {
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
