// keygate's own API, for a client setting itself up: log in for a bearer token (POST
// /v1/auth/token) and register a key (POST /v1/api-keys). An answer other than 2xx is a
// KeygateResponseError carrying keygate's problem+json. With a DPoP key pair (dpop.ts) the token
// is bound to that key, and each call that sends it carries a proof by it.
import { checkBaseUrl, checkFetch, checkToken } from './checks.js'
import { type DpopKeyPair, withDpopProof } from './dpop.js'
import { KeygateResponseError } from './errors.js'
import { keyRegistration } from './registration.js'
import type { FetchFunction } from './request-types.js'
import type { KeyInput, PrivateKeyInput } from './types.js'

/** POSTs `body` as JSON, with `token` (as Bearer, or with a proof by `dpop` as DPoP) when given. */
async function postJson<T> (fetchImpl: FetchFunction, url: URL, body: unknown, token?: string, dpop?: DpopKeyPair): Promise<T> {
  const json = JSON.stringify(body)
  const post = async (headers: Record<string, string>): Promise<Response> =>
    await fetchImpl(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: json })
  const scheme = dpop === undefined ? 'Bearer' : 'DPoP'
  const authorization: Record<string, string> = token === undefined ? {} : { authorization: `${scheme} ${token}` }
  const res = dpop === undefined
    ? await post(authorization)
    : await withDpopProof(dpop, 'POST', url, token, async (proof) => await post({ ...authorization, dpop: proof }))
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

export interface LoginInput {
  baseUrl: string
  username: string
  password: string
  /** a DPoP key pair (generateDpopKey): the token is bound to it, and is useless without it */
  dpop?: DpopKeyPair | undefined
  fetch?: FetchFunction | undefined
}

/** What login resolves: the token, its type (DPoP when bound to a key pair, else Bearer) and its life in seconds. */
export interface LoginResult { token: string; tokenType: 'Bearer' | 'DPoP'; expiresIn: number }

/** POST /v1/auth/token: a token (valid for `expiresIn` seconds, 15 minutes by default), bound to `dpop` when given. */
export async function login ({ baseUrl, username, password, dpop, fetch: fetchImpl }: LoginInput): Promise<LoginResult> {
  const url = new URL('/v1/auth/token', checkBaseUrl(baseUrl))
  const answer = await postJson<LoginResult>(checkFetch(fetchImpl), url, { username, password }, undefined, dpop)
  const tokenType = answer.tokenType === 'DPoP' ? 'DPoP' : 'Bearer'
  // a proof sent to a keygate that does not bind tokens: its Bearer token would be taken from anyone who holds it
  if (dpop !== undefined && tokenType !== 'DPoP') {
    throw new Error('keygate answered a Bearer token to a login with a DPoP proof: this keygate does not bind tokens to keys (update it)')
  }
  return { token: answer.token, tokenType, expiresIn: answer.expiresIn }
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
  /** the DPoP key pair the token is bound to (the one given to login) */
  dpop?: DpopKeyPair | undefined
  fetch?: FetchFunction | undefined
}

/** POST /v1/api-keys for the public half of `privateKey`: `{ message, apiKey, name, scopes }`. */
export async function registerKey (
  { baseUrl, token, name, privateKey, publicKey, scopes, dpop, fetch: fetchImpl }: RegisterKeyInput
): Promise<{ message: string; apiKey: string; name: string; scopes: string[] }> {
  const url = new URL('/v1/api-keys', checkBaseUrl(baseUrl))
  const bearer = checkToken(token)
  const send = checkFetch(fetchImpl)
  return await postJson(send, url, await keyRegistration(name, privateKey, publicKey, { scopes }), bearer, dpop)
}
