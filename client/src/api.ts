// keygate's own API, for a client setting itself up: log in for a bearer token (POST
// /v1/auth/token) and register a key (POST /v1/api-keys). An answer other than 2xx is a
// KeygateResponseError carrying keygate's problem+json.
import { checkBaseUrl, checkFetch, checkToken } from './checks.js'
import { KeygateResponseError } from './errors.js'
import { keyRegistration } from './registration.js'
import type { FetchFunction } from './request-types.js'
import type { KeyInput, PrivateKeyInput } from './types.js'

async function postJson<T> (fetchImpl: FetchFunction, url: URL, body: unknown, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetchImpl(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  const text = await res.text()
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = { detail: text }
  }
  if (!res.ok) throw new KeygateResponseError(res.status, parsed as Record<string, unknown>)
  return parsed as T
}

export interface LoginInput { baseUrl: string; username: string; password: string; fetch?: FetchFunction | undefined }

/** POST /v1/auth/token: a bearer token (valid for `expiresIn` seconds, 15 minutes by default). */
export async function login ({ baseUrl, username, password, fetch: fetchImpl }: LoginInput): Promise<{ token: string; expiresIn: number }> {
  const url = new URL('/v1/auth/token', checkBaseUrl(baseUrl))
  const { token, expiresIn } = await postJson<{ token: string; expiresIn: number }>(checkFetch(fetchImpl), url, { username, password })
  return { token, expiresIn }
}

export interface RegisterKeyInput {
  baseUrl: string
  /** the bearer token from `login` */
  token: string
  /** the key's name, unique among the user's keys */
  name: string
  privateKey: PrivateKeyInput
  /** only with a non-extractable CryptoKey: its public half (see keyRegistration) */
  publicKey?: KeyInput | undefined
  /** some of the user's scopes, for a key that may do less than its user; default: all of them */
  scopes?: string[] | undefined
  fetch?: FetchFunction | undefined
}

/** POST /v1/api-keys for the public half of `privateKey`: `{ message, apiKey, name, scopes }`. */
export async function registerKey (
  { baseUrl, token, name, privateKey, publicKey, scopes, fetch: fetchImpl }: RegisterKeyInput
): Promise<{ message: string; apiKey: string; name: string; scopes: string[] }> {
  const url = new URL('/v1/api-keys', checkBaseUrl(baseUrl))
  const bearer = checkToken(token)
  const send = checkFetch(fetchImpl)
  return await postJson(send, url, await keyRegistration(name, privateKey, publicKey, { scopes }), { authorization: `Bearer ${bearer}` })
}
