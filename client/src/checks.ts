// The checks of what a caller gives the client, each made before anything is signed or sent, each
// a SigningInputError naming the input and how to fix it: the request (method, target, body,
// timestamp, as keygate's own rules would judge them), the body rules of the route, the scheme,
// algorithm and content type, the apiKey, token, key name, scopes, baseUrl and fetch.
import { type Bytes, isArrayBuffer, isUint8Array, ownBytes, utf8 } from './bytes.js'
import { SigningInputError } from './errors.js'
import { defaultAlgorithm, type PreparedPrivateKey } from './keys.js'
import type { SignatureScheme } from './message-signing.js'
import {
  ALGORITHMS_OF_KEY_TYPE, API_KEY_PATTERN, BODY_OPTIONAL_METHODS, BODYLESS_METHODS, looksLikeSeconds, type MessageSignatureAlgorithm, METHOD_TOKEN,
  MILLISECONDS_TIMESTAMP, requestTargetProblem, SEED_BODY_BOUNDARIES, type SeedBodyBoundary, seedBodyProblem, signedBodyMethodProblem
} from './protocol/index.js'
import type { FetchFunction, RequestBody, SignRequestInput } from './request-types.js'

export function bodyBytes (body: RequestBody | null | undefined): Bytes {
  if (body === undefined || body === null) return new Uint8Array(0)
  if (typeof body === 'string') return utf8(body)
  if (isUint8Array(body)) return ownBytes(body)
  if (isArrayBuffer(body)) return new Uint8Array(body)
  throw new SigningInputError('body', 'must be a string or bytes (Uint8Array, Buffer, ArrayBuffer): the exact bytes that will be sent; ' +
    'serialise objects yourself, once')
}

export function checkTimestamp (timestamp: number | string | undefined): string {
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

export function checkMethod (method: unknown): string {
  if (typeof method !== 'string' || !METHOD_TOKEN.test(method)) throw new SigningInputError('method', 'must be an HTTP method such as GET or POST')
  return method.toUpperCase()
}

export function checkTarget (target: unknown): string {
  if (typeof target !== 'string' || !target.startsWith('/')) {
    throw new SigningInputError('target', 'must be the origin-form request target, "/path" or "/path?query" (no scheme or host): ' +
      'what the request line will carry')
  }
  const problem = requestTargetProblem(target)
  if (problem !== undefined) throw new SigningInputError('target', `keygate would refuse it: ${problem}`)
  return target
}

export function checkApiKey (apiKey: unknown): string {
  if (typeof apiKey !== 'string' || !API_KEY_PATTERN.test(apiKey)) {
    throw new SigningInputError('apiKey', 'must be the 64 lowercase hex characters POST /v1/api-keys returned (await apiKeyOf(privateKey) computes it)')
  }
  return apiKey
}

export function checkToken (token: unknown): string {
  if (typeof token !== 'string' || token === '') throw new SigningInputError('token', 'must be the bearer token from POST /v1/auth/token (see login)')
  return token
}

export interface CheckedRequest { method: string; target: string; body: Bytes; timestamp: string }

export function checkRequest (input: Pick<SignRequestInput, 'method' | 'target' | 'body' | 'timestamp'>): CheckedRequest {
  const method = checkMethod(input.method)
  const target = checkTarget(input.target)
  const body = bodyBytes(input.body)
  if (BODYLESS_METHODS.has(method) && body.length > 0) throw new SigningInputError('body', `a ${method} request carries no body (keygate refuses one)`)
  return { method, target, body, timestamp: checkTimestamp(input.timestamp) }
}

/** What keygate's body rules for signed requests need of the caller: the route's settings, when it changed them. */
export interface BodyRules { seedBodyBoundary: SeedBodyBoundary; bodyOnMethods: readonly string[] }

export function checkBodyRules (input: { seedBodyBoundary?: unknown; bodyOnMethods?: unknown }): BodyRules {
  const { seedBodyBoundary = 'enforced', bodyOnMethods = [] } = input
  if (!(SEED_BODY_BOUNDARIES as readonly unknown[]).includes(seedBodyBoundary)) {
    throw new SigningInputError('seedBodyBoundary', 'must be "enforced" (the default) or "unchecked" (only for a route with seedBodyBoundary: unchecked)')
  }
  if (!Array.isArray(bodyOnMethods) || !bodyOnMethods.every((m) => (BODY_OPTIONAL_METHODS as readonly unknown[]).includes(m))) {
    throw new SigningInputError('bodyOnMethods', `must be a list of ${BODY_OPTIONAL_METHODS.join(' and ')}: the route's bodyOnMethods`)
  }
  return { seedBodyBoundary: seedBodyBoundary as SeedBodyBoundary, bodyOnMethods: bodyOnMethods as string[] }
}

/**
 * The refusals keygate makes of a signed request's body, made before signing: a body on a method
 * that carries none (unless the route takes one), and with the seed scheme a body that starts
 * with a byte a target may hold (its signature would also authorize other requests).
 */
export function checkSignedBody (request: CheckedRequest, scheme: SignatureScheme, rules: BodyRules): void {
  if (request.body.length === 0) return
  const methodProblem = signedBodyMethodProblem(request.method, rules.bodyOnMethods)
  if (methodProblem !== undefined) throw new SigningInputError('body', `keygate would refuse it (VALIDATION_FAILED): ${methodProblem}`)
  if (scheme !== 'seed' || rules.seedBodyBoundary === 'unchecked') return
  const problem = seedBodyProblem(request.body)
  if (problem !== undefined) throw new SigningInputError('body', `keygate would refuse it (AMBIGUOUS_SIGNED_BODY): ${problem}. Here: scheme: 'rfc9421'`)
}

export function checkScheme (scheme: unknown): SignatureScheme {
  if (scheme === undefined) return 'seed'
  if (scheme !== 'seed' && scheme !== 'rfc9421') {
    throw new SigningInputError('scheme', 'must be "seed" (X-API-* headers) or "rfc9421" (HTTP Message Signatures)')
  }
  return scheme
}

/** The RFC 9421 algorithm for this key: the one asked for (RSA: rsa-v1_5-sha256 or rsa-pss-sha512), else the key type's. */
export function algorithmFor (key: PreparedPrivateKey, asked: MessageSignatureAlgorithm | undefined): MessageSignatureAlgorithm {
  if (asked !== undefined && !ALGORITHMS_OF_KEY_TYPE[key.type].includes(asked)) {
    throw new SigningInputError('algorithm',
      `${asked} needs another type of key: this ${key.type} key signs with ${ALGORITHMS_OF_KEY_TYPE[key.type].join(' or ')}`)
  }
  return asked ?? defaultAlgorithm(key.type)
}

export function checkContentType (contentType: unknown): string {
  if (contentType === undefined) return 'application/json'
  if (typeof contentType !== 'string' || contentType.trim() === '') throw new SigningInputError('contentType', 'must be a media type, e.g. application/json')
  return contentType
}

export function checkName (name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) throw new SigningInputError('name', 'must be a non-empty string')
  return name
}

/** A list of strings, or a SigningInputError: keygate checks each scope itself and names a bad one. */
export function checkScopes (scopes: unknown): string[] {
  if (!Array.isArray(scopes) || !scopes.every((scope) => typeof scope === 'string')) {
    throw new SigningInputError('scopes', 'must be a list of scope strings, e.g. ["clients:read"]')
  }
  return [...scopes as string[]]
}

export function checkBaseUrl (baseUrl: unknown): string {
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

export function checkFetch (fetchImpl: unknown): FetchFunction {
  const chosen = fetchImpl ?? (globalThis as { fetch?: unknown }).fetch
  if (typeof chosen !== 'function') {
    throw new SigningInputError('fetch', fetchImpl === undefined ? 'this runtime has no global fetch: pass one as fetch' : 'must be a fetch function')
  }
  return chosen as FetchFunction
}
