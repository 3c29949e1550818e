// @keygate/client: sign requests for keygate from any Node.js project.
//
//   import { signRequest, createClient } from '@keygate/client'
//
// It builds the signing string with the very function the gateway verifies with, and checks
// targets with the gateway's own request-target rules (both in ./protocol), so a request it signs
// is one keygate accepts. Only node:crypto and global fetch: no gateway at runtime.
import { createHash, createPrivateKey, createPublicKey, createSign, KeyObject } from 'node:crypto'
import {
  API_KEY_PATTERN, apiKeyOfSpki, BODYLESS_METHODS, describeSigningString as describeWith, looksLikeSeconds, METHOD_TOKEN,
  MILLISECONDS_TIMESTAMP, requestTargetProblem, signingString, type SigningStringDetails
} from './protocol/index.js'

export { signingString, type SigningStringDetails }

function sha256Hex (parts: readonly Uint8Array[]): string {
  const hash = createHash('sha256')
  for (const part of parts) hash.update(part)
  return hash.digest('hex')
}

/** What a signing string is made of (see SigningStringDetails), as keygate describes it. */
export function describeSigningString (timestamp: string, method: string, target: string, body: Uint8Array | undefined): SigningStringDetails {
  return describeWith(timestamp, method, target, body, sha256Hex)
}

/**
 * The apiKey of a key: lowercase hex SHA-256 of its DER SubjectPublicKeyInfo. Given a private key,
 * that of its public half (what a client computes to check which key it holds).
 */
export function apiKeyOf (key: KeyObject): string {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key
  return apiKeyOfSpki(publicKey.export({ type: 'spki', format: 'der' }), sha256Hex)
}

/** The three headers of a signed business request (the bearer token goes in Authorization). */
export interface SignatureHeaders {
  'X-API-Key': string
  'X-API-Timestamp': string
  'X-API-Signature': string
}

export type RequestBody = string | Uint8Array
export type PrivateKeyInput = string | Buffer | KeyObject

export interface SignRequestInput {
  /** the HTTP method; sent and signed in upper case */
  method: string
  /** the origin-form request target exactly as it will be sent: "/path" or "/path?query" */
  target: string
  /** the exact body bytes (a string is sent as UTF-8); none for GET and HEAD */
  body?: RequestBody | null | undefined
  /** the apiKey POST /v1/api-keys returned */
  apiKey: string
  /** the RSA private key: PEM text (PKCS#8 or PKCS#1) or a KeyObject */
  privateKey: PrivateKeyInput
  /** milliseconds since the Unix epoch; default Date.now() */
  timestamp?: number | string | undefined
}

/** A mistake in what was given to the client: says which input and how to fix it. */
export class SigningInputError extends TypeError {
  override name = 'SigningInputError'
  constructor (readonly input: string, message: string) {
    super(`${input}: ${message}`)
  }
}

/** PEM text or a KeyObject -> an RSA private KeyObject, or a SigningInputError saying what it is instead. */
export function loadPrivateKey (privateKey: PrivateKeyInput): KeyObject {
  let key: KeyObject
  if (privateKey instanceof KeyObject) {
    key = privateKey
  } else if (typeof privateKey === 'string' || Buffer.isBuffer(privateKey)) {
    try {
      key = createPrivateKey({ key: privateKey, format: 'pem' })
    } catch (err) {
      throw new SigningInputError('privateKey', `not a readable PEM private key (${(err as Error).message}); ` +
        'give the "-----BEGIN PRIVATE KEY-----" text of an RSA key, e.g. from openssl genpkey or keygate keygen')
    }
  } else {
    throw new SigningInputError('privateKey', 'must be PEM text (string or Buffer) or a KeyObject')
  }
  if (key.type !== 'private') throw new SigningInputError('privateKey', `is a ${key.type} key; signing needs the private key`)
  if (key.asymmetricKeyType !== 'rsa') {
    throw new SigningInputError('privateKey', `is a ${key.asymmetricKeyType ?? 'unknown'} key; keygate verifies RSA (PKCS#1 v1.5, SHA-256) only`)
  }
  return key
}

function bodyBytes (body: RequestBody | null | undefined): Buffer {
  if (body === undefined || body === null) return Buffer.alloc(0)
  if (typeof body === 'string') return Buffer.from(body, 'utf8')
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  throw new SigningInputError('body', 'must be a string or bytes (Buffer, Uint8Array): the exact bytes that will be sent; serialise objects yourself, once')
}

function checkTimestamp (timestamp: number | string | undefined): string {
  if (timestamp === undefined) return String(Date.now())
  const text = typeof timestamp === 'number' && Number.isSafeInteger(timestamp) ? String(timestamp) : timestamp
  if (typeof text !== 'string' || !MILLISECONDS_TIMESTAMP.test(text)) {
    const seconds = looksLikeSeconds(String(text))
    throw new SigningInputError('timestamp', seconds
      ? `${String(text)} looks like seconds; give milliseconds since the Unix epoch (Date.now(), 13 digits)`
      : 'must be the integer number of milliseconds since the Unix epoch (Date.now())')
  }
  return text
}

function checkMethod (method: unknown): string {
  if (typeof method !== 'string' || !METHOD_TOKEN.test(method)) throw new SigningInputError('method', 'must be an HTTP method such as GET or POST')
  return method.toUpperCase()
}

function checkTarget (target: unknown): string {
  if (typeof target !== 'string' || !target.startsWith('/')) {
    throw new SigningInputError('target', 'must be the origin-form request target, "/path" or "/path?query" (no scheme or host): ' +
      'what the request line will carry')
  }
  const problem = requestTargetProblem(target)
  if (problem !== undefined) throw new SigningInputError('target', `keygate would refuse it: ${problem}`)
  return target
}

interface CheckedRequest { method: string; target: string; body: Buffer; timestamp: string }

function checkRequest (input: Pick<SignRequestInput, 'method' | 'target' | 'body' | 'timestamp'>): CheckedRequest {
  const method = checkMethod(input.method)
  const target = checkTarget(input.target)
  const body = bodyBytes(input.body)
  if (BODYLESS_METHODS.has(method) && body.length > 0) throw new SigningInputError('body', `a ${method} request carries no body (keygate refuses one)`)
  return { method, target, body, timestamp: checkTimestamp(input.timestamp) }
}

function sign (key: KeyObject, parts: readonly Uint8Array[]): string {
  const signer = createSign('sha256')
  for (const part of parts) signer.update(part)
  return signer.sign(key).toString('base64')
}

function signChecked (request: CheckedRequest, apiKey: unknown, key: KeyObject): SignatureHeaders {
  if (typeof apiKey !== 'string' || !API_KEY_PATTERN.test(apiKey)) {
    throw new SigningInputError('apiKey', 'must be the 64 lowercase hex characters POST /v1/api-keys returned (apiKeyOf(privateKey) computes it)')
  }
  return {
    'X-API-Key': apiKey,
    'X-API-Timestamp': request.timestamp,
    'X-API-Signature': sign(key, signingString(request.timestamp, request.method, request.target, request.body))
  }
}

/**
 * The X-API-Key, X-API-Timestamp and X-API-Signature headers of one business request. Send the
 * method in upper case, the target and the body exactly as given here.
 */
export function signRequest (input: SignRequestInput): SignatureHeaders {
  const request = checkRequest(input)
  return signChecked(request, input.apiKey, loadPrivateKey(input.privateKey))
}

/**
 * What you signed, described as keygate describes what it verified in an INVALID_SIGNATURE
 * answer: compare the two with `signatureMismatches`.
 */
export function describeRequest (input: Pick<SignRequestInput, 'method' | 'target' | 'body'> & { timestamp: number | string }): SigningStringDetails {
  const request = checkRequest(input)
  return describeSigningString(request.timestamp, request.method, request.target, request.body)
}

const COMPARED = ['timestamp', 'method', 'target', 'bodyLength', 'bodySha256', 'signingStringLength', 'signingStringSha256'] as const

/** The members of keygate's INVALID_SIGNATURE answer that differ from what you signed (empty: another key signed). */
export function signatureMismatches (mine: SigningStringDetails, problem: Record<string, unknown>): Array<(typeof COMPARED)[number]> {
  return COMPARED.filter((member) => problem[member] !== mine[member])
}

/** The registration `signature`: base64 RSA-SHA256 over the exact UTF-8 bytes of the key name. */
export function signKeyName (name: string, privateKey: PrivateKeyInput): string {
  if (typeof name !== 'string' || name.length === 0) throw new SigningInputError('name', 'must be a non-empty string')
  return sign(loadPrivateKey(privateKey), [Buffer.from(name, 'utf8')])
}

export interface KeyRegistrationBody { name: string; publicKey: string; signature: string }

/** The whole POST /v1/api-keys body for a private key: its public half as SPKI PEM, and the name signed. */
export function keyRegistration (name: string, privateKey: PrivateKeyInput): KeyRegistrationBody {
  const key = loadPrivateKey(privateKey)
  return {
    name,
    publicKey: createPublicKey(key).export({ type: 'spki', format: 'pem' }).toString(),
    signature: signKeyName(name, key)
  }
}

/** keygate answered with an error: its status and problem+json body. */
export class KeygateResponseError extends Error {
  override name = 'KeygateResponseError'
  readonly code: string | undefined
  constructor (readonly status: number, readonly problem: Record<string, unknown>) {
    const code = typeof problem.code === 'string' ? problem.code : undefined
    super(`${status}${code === undefined ? '' : ` ${code}`}: ${typeof problem.detail === 'string' ? problem.detail : JSON.stringify(problem)}`)
    this.code = code
  }
}

type Fetch = typeof globalThis.fetch

function checkBaseUrl (baseUrl: unknown): string {
  let url: URL
  try {
    url = new URL(String(baseUrl))
  } catch {
    throw new SigningInputError('baseUrl', `${JSON.stringify(baseUrl)} is not a URL; give keygate's origin, e.g. http://127.0.0.1:8080`)
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.pathname !== '/' || url.search !== '' || url.hash !== '' ||
    url.username !== '' || url.password !== '') {
    throw new SigningInputError('baseUrl', 'must be keygate\'s http(s) origin only (scheme, host, port): ' +
      'the path goes in each request\'s target, where it is signed')
  }
  return url.origin
}

async function postJson<T> (fetchImpl: Fetch, url: string, body: unknown, headers: Record<string, string> = {}): Promise<T> {
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

export interface LoginInput { baseUrl: string; username: string; password: string; fetch?: Fetch }

/** POST /v1/auth/token: a bearer token (valid for `expiresIn` seconds, 15 minutes by default). */
export async function login ({ baseUrl, username, password, fetch: fetchImpl = globalThis.fetch }: LoginInput): Promise<{ token: string; expiresIn: number }> {
  const { token, expiresIn } = await postJson<{ token: string; expiresIn: number }>(fetchImpl, `${checkBaseUrl(baseUrl)}/v1/auth/token`, { username, password })
  return { token, expiresIn }
}

export interface RegisterKeyInput { baseUrl: string; token: string; name: string; privateKey: PrivateKeyInput; fetch?: Fetch }

/** POST /v1/api-keys for the public half of `privateKey`: `{ message, apiKey, name }`. */
export async function registerKey (
  { baseUrl, token, name, privateKey, fetch: fetchImpl = globalThis.fetch }: RegisterKeyInput
): Promise<{ message: string; apiKey: string; name: string }> {
  return await postJson(fetchImpl, `${checkBaseUrl(baseUrl)}/v1/api-keys`, keyRegistration(name, privateKey), { authorization: `Bearer ${token}` })
}

export interface ClientOptions {
  /** keygate's origin, e.g. http://127.0.0.1:8080 */
  baseUrl: string
  /** the bearer token from POST /v1/auth/token (see `login`) */
  token: string
  privateKey: PrivateKeyInput
  /** default: the apiKey of privateKey's public half, which is what registration returned */
  apiKey?: string
  /** default: the global fetch */
  fetch?: Fetch
}

export interface SignedResponseInfo {
  /** the bytes that were signed: timestamp + METHOD + target + body */
  signingString: Buffer
  /** every header sent, the Authorization value included */
  headers: Record<string, string>
}

export interface KeygateClient {
  readonly apiKey: string
  /**
   * Signs and sends one business request. The body is sent as given (a string as UTF-8), with
   * `Content-Type: application/json` unless `init.headers` names another. Any status resolves.
   */
  fetch: (method: string, target: string, body?: RequestBody | null, init?: Omit<RequestInit, 'method' | 'body'>) => Promise<Response>
  /** as `fetch`, and also what was signed and sent (what the CLI's -v prints) */
  send: (
    method: string,
    target: string,
    body?: RequestBody | null,
    init?: Omit<RequestInit, 'method' | 'body'>
  ) => Promise<{ response: Response } & SignedResponseInfo>
}

export function createClient (options: ClientOptions): KeygateClient {
  const origin = checkBaseUrl(options.baseUrl)
  if (typeof options.token !== 'string' || options.token === '') throw new SigningInputError('token', 'must be the bearer token from POST /v1/auth/token')
  const key = loadPrivateKey(options.privateKey)
  const apiKey = options.apiKey ?? apiKeyOf(key)
  const fetchImpl = options.fetch ?? globalThis.fetch

  const send: KeygateClient['send'] = async (method, target, body, init = {}) => {
    if ((init as RequestInit).body !== undefined) throw new SigningInputError('init.body', 'pass the body as the third argument, so that it is signed')
    const request = checkRequest({ method, target, body })
    // fetch's URL parser re-encodes some characters (a ' in a query) and drops an empty "?":
    // what it would send must be exactly what is signed.
    const url = new URL(request.target, origin)
    if (url.pathname + url.search !== request.target) {
      throw new SigningInputError('target', `fetch would send ${JSON.stringify(url.pathname + url.search)} for ${JSON.stringify(request.target)}; ` +
        'send and sign that form instead')
    }
    const headers = new Headers(init.headers)
    if (request.body.length > 0 && !headers.has('content-type')) headers.set('content-type', 'application/json')
    headers.set('authorization', `Bearer ${options.token}`)
    for (const [name, value] of Object.entries(signChecked(request, apiKey, key))) headers.set(name, value)
    const response = await fetchImpl(url, { ...init, method: request.method, headers, ...(request.body.length > 0 && { body: request.body }) })
    return {
      response,
      signingString: Buffer.concat(signingString(request.timestamp, request.method, request.target, request.body)),
      headers: Object.fromEntries(headers.entries())
    }
  }
  return {
    apiKey,
    send,
    fetch: async (method, target, body, init) => (await send(method, target, body, init)).response
  }
}
