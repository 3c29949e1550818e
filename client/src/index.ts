// @keygate/client: sign requests for keygate from Node.js (20+), Deno, Bun and browsers.
//
//   import { signRequest, createClient } from '@keygate/client'
//
// It signs with either scheme keygate verifies: the seed's X-API-* headers (the default) or RFC 9421
// HTTP Message Signatures (scheme: 'rfc9421'), with RSA, Ed25519 or EC P-256 keys. It builds the
// signing string and the signature base with the very functions the gateway verifies with, and
// checks targets with the gateway's own request-target rules (all in ./protocol), so a request it
// signs is one keygate accepts. Only what every runtime has: WebCrypto (globalThis.crypto.subtle), fetch,
// TextEncoder, btoa and atob. No dependencies, no node: imports, no Buffer.
//
// And for the services behind keygate in decision mode: checkForwardedDigest, the body against the
// Content-Digest keygate verified the signature of but was not shown the body of.
import { type Bytes, concatBytes, isArrayBuffer, isUint8Array, ownBytes, sha256Hex, subtle, toBase64, utf8 } from './bytes.js'
import { derOfRawEcdsa, pem } from './der.js'
import { KeygateResponseError, SigningInputError } from './errors.js'
import {
  defaultAlgorithm, importSigningKey, type PreparedPrivateKey, prepareKey, preparePrivateKey, publicHalfReadable, publicSpki, signRaw, verifies,
  type WebCryptoKey
} from './keys.js'
import {
  checkAlgorithm, checkCoveredTarget, checkExpiresIn, checkLabel, type CoveredTarget, describeBase, type MessageSignatureOptions, prepareMessageSignature,
  type SignatureBaseDetails, signatureBaseMismatches, signatureField, type SignatureScheme
} from './message-signing.js'
import {
  ALGORITHMS_OF_KEY_TYPE, API_KEY_PATTERN, apiKeyOfSpki, BODY_OPTIONAL_METHODS, BODYLESS_METHODS, describeSigningString as describeWith, type KeyType,
  looksLikeSeconds, type MessageSignatureAlgorithm, METHOD_TOKEN, MILLISECONDS_TIMESTAMP, requestTargetProblem, SEED_BODY_BOUNDARIES, type SeedBodyBoundary,
  seedBodyProblem, signedBodyMethodProblem, signingString, type SigningStringDetails
} from './protocol/index.js'
import type { CryptoKeyLike, KeyInput, KeyObjectLike, PrivateKeyInput } from './types.js'

export { KeygateResponseError, SigningInputError, signingString, type CryptoKeyLike, type KeyInput, type KeyObjectLike, type PrivateKeyInput }
export { signatureBaseMismatches }
export {
  checkForwardedDigest, FORWARDED_DIGEST_HEADER, type ForwardedDigestCheck, type ForwardedDigestProblem, type ForwardedHeaders
} from './forwarded-digest.js'
export type { ContentDigestAlgorithm } from './protocol/index.js'
export type { CoveredTarget, KeyType, MessageSignatureAlgorithm, MessageSignatureOptions, SignatureBaseDetails, SignatureScheme }
export type { SigningStringDetails }

/** What a signing string is made of (see SigningStringDetails), as keygate describes it. */
export async function describeSigningString (timestamp: string, method: string, target: string, body: Uint8Array | undefined): Promise<SigningStringDetails> {
  return await describeWith(timestamp, method, target, body, sha256Hex)
}

/**
 * The apiKey of a key: lowercase hex SHA-256 of its DER SubjectPublicKeyInfo. Given a private key,
 * that of its public half (what a client computes to check which key it holds).
 */
export async function apiKeyOf (key: KeyInput): Promise<string> {
  return await apiKeyOfSpki(await publicSpki(prepareKey(key, 'key'), 'key'), sha256Hex)
}

/**
 * The private key as a WebCrypto CryptoKey (not extractable) for its type's default algorithm
 * (RSASSA-PKCS1-v1_5 with SHA-256, Ed25519, or ECDSA P-256), to check a key early or import it
 * once for many `signRequest` calls. A CryptoKey given is returned as it is.
 */
export async function importPrivateKey (privateKey: PrivateKeyInput): Promise<CryptoKeyLike> {
  return await importSigningKey(preparePrivateKey(privateKey))
}

/** Which type of key this is: "rsa", "ed25519" or "p256" (what keygen --type makes). */
export function keyTypeOf (key: KeyInput): KeyType {
  return prepareKey(key, 'key').type
}

/** The three headers of a signed business request (the bearer token goes in Authorization). */
export interface SignatureHeaders {
  'X-API-Key': string
  'X-API-Timestamp': string
  'X-API-Signature': string
}

/** The exact bytes to send: a string is sent as UTF-8. */
export type RequestBody = string | Uint8Array | ArrayBuffer

export interface SignRequestInput {
  /** the HTTP method; sent and signed in upper case */
  method: string
  /** the origin-form request target exactly as it will be sent: "/path" or "/path?query" */
  target: string
  /** the exact body bytes (a string is sent as UTF-8); none for GET and HEAD */
  body?: RequestBody | null | undefined
  /** the apiKey POST /v1/api-keys returned */
  apiKey: string
  /** the private key (RSA, Ed25519 or EC P-256): PEM text (PKCS#8, PKCS#1, SEC1), a CryptoKey or a KeyObject */
  privateKey: PrivateKeyInput
  /** seed scheme: milliseconds since the Unix epoch; default Date.now() */
  timestamp?: number | string | undefined
  /** "seed", the default: X-API-Key, X-API-Timestamp, X-API-Signature; for RFC 9421 see MessageSignatureInput */
  scheme?: 'seed' | undefined
  /**
   * seed scheme: "enforced" (default) refuses a body that starts with a byte a target may hold, as
   * keygate does (AMBIGUOUS_SIGNED_BODY); "unchecked" only for a route with seedBodyBoundary: unchecked
   */
  seedBodyBoundary?: SeedBodyBoundary | undefined
  /** DELETE and OPTIONS requests that may carry a body (the route's bodyOnMethods); default none, as keygate's signed routes */
  bodyOnMethods?: readonly string[] | undefined
}

/** The seed scheme's body rule: as keygate's routes by default, or off for a route that opted out. */
export type { SeedBodyBoundary }

/**
 * RFC 9421: what signRequest needs besides the request. `baseUrl` (keygate's origin as the client
 * addresses it, e.g. https://api.example.com) is needed to cover @target-uri, the default; with
 * `components: 'path'` it is not.
 */
export interface MessageSignatureInput extends Omit<SignRequestInput, 'scheme' | 'timestamp'>, MessageSignatureOptions {
  scheme: 'rfc9421'
  baseUrl?: string | undefined
  /** the Content-Type sent with a body, which is covered; default application/json */
  contentType?: string | undefined
}

/**
 * The headers of an RFC 9421 signed request (the bearer token goes in Authorization). A request
 * with a body also sends Content-Digest and Content-Type, both covered by the signature.
 */
export interface MessageSignatureHeaders {
  'Signature-Input': string
  Signature: string
  'Content-Digest'?: string
  'Content-Type'?: string
}

function bodyBytes (body: RequestBody | null | undefined): Bytes {
  if (body === undefined || body === null) return new Uint8Array(0)
  if (typeof body === 'string') return utf8(body)
  if (isUint8Array(body)) return ownBytes(body)
  if (isArrayBuffer(body)) return new Uint8Array(body)
  throw new SigningInputError('body', 'must be a string or bytes (Uint8Array, Buffer, ArrayBuffer): the exact bytes that will be sent; ' +
    'serialise objects yourself, once')
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

function checkApiKey (apiKey: unknown): string {
  if (typeof apiKey !== 'string' || !API_KEY_PATTERN.test(apiKey)) {
    throw new SigningInputError('apiKey', 'must be the 64 lowercase hex characters POST /v1/api-keys returned (await apiKeyOf(privateKey) computes it)')
  }
  return apiKey
}

function checkToken (token: unknown): string {
  if (typeof token !== 'string' || token === '') throw new SigningInputError('token', 'must be the bearer token from POST /v1/auth/token (see login)')
  return token
}

interface CheckedRequest { method: string; target: string; body: Bytes; timestamp: string }

function checkRequest (input: Pick<SignRequestInput, 'method' | 'target' | 'body' | 'timestamp'>): CheckedRequest {
  const method = checkMethod(input.method)
  const target = checkTarget(input.target)
  const body = bodyBytes(input.body)
  if (BODYLESS_METHODS.has(method) && body.length > 0) throw new SigningInputError('body', `a ${method} request carries no body (keygate refuses one)`)
  return { method, target, body, timestamp: checkTimestamp(input.timestamp) }
}

/** What keygate's body rules for signed requests need of the caller: the route's settings, when it changed them. */
interface BodyRules { seedBodyBoundary: SeedBodyBoundary; bodyOnMethods: readonly string[] }

function checkBodyRules (input: { seedBodyBoundary?: unknown; bodyOnMethods?: unknown }): BodyRules {
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
function checkSignedBody (request: CheckedRequest, scheme: SignatureScheme, rules: BodyRules): void {
  if (request.body.length === 0) return
  const methodProblem = signedBodyMethodProblem(request.method, rules.bodyOnMethods)
  if (methodProblem !== undefined) throw new SigningInputError('body', `keygate would refuse it (VALIDATION_FAILED): ${methodProblem}`)
  if (scheme !== 'seed' || rules.seedBodyBoundary === 'unchecked') return
  const problem = seedBodyProblem(request.body)
  if (problem !== undefined) throw new SigningInputError('body', `keygate would refuse it (AMBIGUOUS_SIGNED_BODY): ${problem}. Here: scheme: 'rfc9421'`)
}

/** The signing string as one run of bytes: WebCrypto signs one buffer. */
function signingBytes (request: CheckedRequest): Bytes {
  return concatBytes(signingString(request.timestamp, request.method, request.target, request.body))
}

/**
 * The seed scheme's signature (and the registration proof), base64: RSA PKCS#1 v1.5 SHA-256, the
 * raw Ed25519 signature, or for P-256 the DER ECDSA signature of the SHA-256 (what openssl dgst
 * -sha256 -sign makes; WebCrypto's raw r || s is converted).
 */
async function seedSignature (key: WebCryptoKey, type: KeyType, bytes: Bytes): Promise<string> {
  const raw = await signRaw(key, defaultAlgorithm(type), bytes)
  return toBase64(type === 'p256' ? derOfRawEcdsa(raw) : raw)
}

async function signatureHeaders (
  request: CheckedRequest, apiKey: string, key: WebCryptoKey, type: KeyType, bytes: Bytes
): Promise<SignatureHeaders> {
  return { 'X-API-Key': apiKey, 'X-API-Timestamp': request.timestamp, 'X-API-Signature': await seedSignature(key, type, bytes) }
}

function checkScheme (scheme: unknown): SignatureScheme {
  if (scheme === undefined) return 'seed'
  if (scheme !== 'seed' && scheme !== 'rfc9421') {
    throw new SigningInputError('scheme', 'must be "seed" (X-API-* headers) or "rfc9421" (HTTP Message Signatures)')
  }
  return scheme
}

/** The RFC 9421 algorithm for this key: the one asked for (RSA: rsa-v1_5-sha256 or rsa-pss-sha512), else the key type's. */
function algorithmFor (key: PreparedPrivateKey, asked: MessageSignatureAlgorithm | undefined): MessageSignatureAlgorithm {
  if (asked !== undefined && !ALGORITHMS_OF_KEY_TYPE[key.type].includes(asked)) {
    throw new SigningInputError('algorithm',
      `${asked} needs another type of key: this ${key.type} key signs with ${ALGORITHMS_OF_KEY_TYPE[key.type].join(' or ')}`)
  }
  return asked ?? defaultAlgorithm(key.type)
}

function checkContentType (contentType: unknown): string {
  if (contentType === undefined) return 'application/json'
  if (typeof contentType !== 'string' || contentType.trim() === '') throw new SigningInputError('contentType', 'must be a media type, e.g. application/json')
  return contentType
}

/**
 * The headers that sign one business request. Seed scheme (the default): X-API-Key,
 * X-API-Timestamp and X-API-Signature. `scheme: 'rfc9421'`: Signature-Input and Signature (and
 * Content-Digest and Content-Type with a body). Send the method in upper case, the target and
 * the body exactly as given here. A PEM or KeyObject key is imported on each call: for many
 * requests, use createClient, or importPrivateKey once.
 */
export async function signRequest (input: SignRequestInput): Promise<SignatureHeaders>
export async function signRequest (input: MessageSignatureInput): Promise<MessageSignatureHeaders>
export async function signRequest (input: SignRequestInput | MessageSignatureInput): Promise<SignatureHeaders | MessageSignatureHeaders> {
  const scheme = checkScheme(input.scheme)
  if (scheme === 'rfc9421') return await signMessage(input as MessageSignatureInput)
  const request = checkRequest(input as SignRequestInput)
  checkSignedBody(request, 'seed', checkBodyRules(input))
  const key = preparePrivateKey(input.privateKey)
  const apiKey = checkApiKey(input.apiKey)
  return await signatureHeaders(request, apiKey, await importSigningKey(key), key.type, signingBytes(request))
}

async function signMessage (input: MessageSignatureInput): Promise<MessageSignatureHeaders> {
  const request = checkRequest({ method: input.method, target: input.target, body: input.body })
  checkSignedBody(request, 'rfc9421', checkBodyRules(input))
  const key = preparePrivateKey(input.privateKey)
  const apiKey = checkApiKey(input.apiKey)
  const algorithm = algorithmFor(key, checkAlgorithm(input.algorithm))
  const contentType = request.body.length > 0 ? checkContentType(input.contentType) : undefined
  const origin = input.baseUrl === undefined ? undefined : checkBaseUrl(input.baseUrl)
  const prepared = await prepareMessageSignature({ ...request, origin, contentType }, apiKey, algorithm, input)
  const signature = await signRaw(await importSigningKey(key, algorithm), algorithm, utf8(prepared.base))
  return {
    'Signature-Input': prepared.signatureInput,
    Signature: signatureField(prepared.label, signature),
    ...(prepared.contentDigest !== undefined && { 'Content-Digest': prepared.contentDigest }),
    ...(contentType !== undefined && { 'Content-Type': contentType })
  }
}

/**
 * The RFC 9421 signature base of a request, as keygate describes the one it verified in an
 * INVALID_SIGNATURE answer (`signatureBase` lines, `signatureBaseSha256`): give the same `created`,
 * `expiresIn` and `nonce` as the signature (they are in its Signature-Input), and the `algorithm` it used;
 * compare with `signatureBaseMismatches`.
 */
export async function describeSignatureBase (
  input: Omit<MessageSignatureInput, 'privateKey' | 'scheme' | 'algorithm' | 'created'> & { algorithm: MessageSignatureAlgorithm; created: number }
): Promise<SignatureBaseDetails & { signatureInput: string }> {
  const request = checkRequest({ method: input.method, target: input.target, body: input.body })
  const algorithm = checkAlgorithm(input.algorithm) as MessageSignatureAlgorithm
  const contentType = request.body.length > 0 ? checkContentType(input.contentType) : undefined
  const origin = input.baseUrl === undefined ? undefined : checkBaseUrl(input.baseUrl)
  const prepared = await prepareMessageSignature({ ...request, origin, contentType }, checkApiKey(input.apiKey), algorithm, input)
  return { ...await describeBase(prepared.base), signatureInput: prepared.signatureInput }
}

/**
 * What you signed, described as keygate describes what it verified in an INVALID_SIGNATURE
 * answer: compare the two with `signatureMismatches`.
 */
export async function describeRequest (
  input: Pick<SignRequestInput, 'method' | 'target' | 'body'> & { timestamp: number | string }
): Promise<SigningStringDetails> {
  const request = checkRequest(input)
  return await describeSigningString(request.timestamp, request.method, request.target, request.body)
}

const COMPARED = ['timestamp', 'method', 'target', 'bodyLength', 'bodySha256', 'signingStringLength', 'signingStringSha256'] as const

/** The members of keygate's INVALID_SIGNATURE answer that differ from what you signed (empty: another key signed). */
export function signatureMismatches (mine: SigningStringDetails, problem: Record<string, unknown>): Array<(typeof COMPARED)[number]> {
  return COMPARED.filter((member) => problem[member] !== mine[member])
}

function checkName (name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) throw new SigningInputError('name', 'must be a non-empty string')
  return name
}

/**
 * The registration `signature` over the exact UTF-8 bytes of the key name, base64: RSA-SHA256,
 * the raw Ed25519 signature, or the DER ECDSA P-256 signature of its SHA-256.
 */
export async function signKeyName (name: string, privateKey: PrivateKeyInput): Promise<string> {
  const bytes = utf8(checkName(name))
  const key = preparePrivateKey(privateKey)
  return await seedSignature(await importSigningKey(key), key.type, bytes)
}

export interface KeyRegistrationBody {
  name: string
  publicKey: string
  signature: string
  /** what the key may do: some of the user's scopes (absent: all of them); not covered by the signature */
  scopes?: string[]
}

/** A list of strings, or a SigningInputError: keygate checks each scope itself and names a bad one. */
function checkScopes (scopes: unknown): string[] {
  if (!Array.isArray(scopes) || !scopes.every((scope) => typeof scope === 'string')) {
    throw new SigningInputError('scopes', 'must be a list of scope strings, e.g. ["clients:read"]')
  }
  return [...scopes as string[]]
}

/**
 * The whole POST /v1/api-keys body for a private key: its public half as SPKI PEM, and the name
 * signed. `publicKey` is needed only with a non-extractable CryptoKey, whose public half cannot be
 * read (give keyPair.publicKey); when given, it must be the private key's other half. `scopes`
 * narrows the key to some of the user's scopes.
 */
export async function keyRegistration (
  name: string, privateKey: PrivateKeyInput, publicKey?: KeyInput, options: { scopes?: string[] | undefined } = {}
): Promise<KeyRegistrationBody> {
  const scopes = options.scopes === undefined ? undefined : checkScopes(options.scopes)
  const nameBytes = utf8(checkName(name))
  const key = preparePrivateKey(privateKey)
  const givenPublic = publicKey === undefined ? undefined : prepareKey(publicKey, 'publicKey')
  if (givenPublic === undefined && !publicHalfReadable(key)) {
    throw new SigningInputError('publicKey', 'privateKey is a non-extractable CryptoKey, whose public half cannot be read: ' +
      'give publicKey too (keyPair.publicKey)')
  }
  if (givenPublic !== undefined && givenPublic.type !== key.type) {
    throw new SigningInputError('publicKey', `is not the public half of privateKey: it is ${givenPublic.type}, privateKey ${key.type}`)
  }
  const raw = await signRaw(await importSigningKey(key), defaultAlgorithm(key.type), nameBytes)
  const spki = await publicSpki(givenPublic ?? key, givenPublic === undefined ? 'privateKey' : 'publicKey')
  if (givenPublic !== undefined && !await verifies(key.type, spki, raw, nameBytes)) {
    throw new SigningInputError('publicKey', 'is not the public half of privateKey: its signature does not verify with it')
  }
  const signature = toBase64(key.type === 'p256' ? derOfRawEcdsa(raw) : raw)
  return { name, publicKey: pem('PUBLIC KEY', spki), signature, ...(scopes !== undefined && { scopes }) }
}

/** What fetch the client calls: the global one by default, or any function like it. */
export type FetchFunction = (input: URL, init: RequestInit) => Promise<Response>

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

function checkFetch (fetchImpl: unknown): FetchFunction {
  const chosen = fetchImpl ?? (globalThis as { fetch?: unknown }).fetch
  if (typeof chosen !== 'function') {
    throw new SigningInputError('fetch', fetchImpl === undefined ? 'this runtime has no global fetch: pass one as fetch' : 'must be a fetch function')
  }
  return chosen as FetchFunction
}

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

export interface ClientOptions {
  /** keygate's origin, e.g. http://127.0.0.1:8080 */
  baseUrl: string
  /** the bearer token from POST /v1/auth/token (see `login`) */
  token: string
  /** imported once, on the first request */
  privateKey: PrivateKeyInput
  /**
   * default: the apiKey of privateKey's public half, which is what registration returned.
   * Required with a non-extractable CryptoKey, whose public half cannot be read.
   */
  apiKey?: string | undefined
  /** default: the global fetch */
  fetch?: FetchFunction | undefined
  /** "seed" (default: X-API-* headers) or "rfc9421" (HTTP Message Signatures, covering @target-uri of baseUrl by default) */
  scheme?: SignatureScheme | undefined
  /** rfc9421: the signature's label; default "sig1" */
  label?: string | undefined
  /** rfc9421: "target-uri" (default) or "path" (@path and @query: behind a proxy that rewrites Host) */
  components?: CoveredTarget | undefined
  /** rfc9421 with an RSA key: "rsa-v1_5-sha256" (default) or "rsa-pss-sha512" */
  algorithm?: MessageSignatureAlgorithm | undefined
  /** rfc9421: each signature expires this many seconds after it is made (the `expires` parameter); default none */
  expiresIn?: number | undefined
  /** seed: "enforced" (default) or "unchecked", for a route with seedBodyBoundary: unchecked (see SignRequestInput) */
  seedBodyBoundary?: SeedBodyBoundary | undefined
  /** DELETE and OPTIONS requests that may carry a body: the route's bodyOnMethods; default none */
  bodyOnMethods?: readonly string[] | undefined
}

export interface SignedResponseInfo {
  /** which scheme signed the request */
  scheme: SignatureScheme
  /** the bytes that were signed: seed, timestamp + METHOD + target + body; rfc9421, the signature base */
  signingString: Uint8Array
  /** every header sent, the Authorization value included, names in lower case */
  headers: Record<string, string>
}

/** fetch's options, but for the method and the body: those are fetch's and send's own arguments, which are signed. */
export type ClientRequestInit = Omit<RequestInit, 'method' | 'body'>

export interface KeygateClient {
  /** The apiKey the client sends: options.apiKey, else the SHA-256 of the key's public half, computed once. */
  apiKey: () => Promise<string>
  /**
   * Signs and sends one business request. The body is sent as given (a string as UTF-8), with
   * `Content-Type: application/json` unless `init.headers` names another. Any status resolves.
   */
  fetch: (method: string, target: string, body?: RequestBody | null, init?: ClientRequestInit) => Promise<Response>
  /** as `fetch`, and also what was signed and sent (what the CLI's -v prints) */
  send: (method: string, target: string, body?: RequestBody | null, init?: ClientRequestInit) => Promise<{ response: Response } & SignedResponseInfo>
}

/**
 * A client for one keygate, user and key. Synchronous: it checks every option at once (a mistake
 * throws a SigningInputError here), and imports the key on the first request, once.
 */
export function createClient (options: ClientOptions): KeygateClient {
  const origin = checkBaseUrl(options.baseUrl)
  const token = checkToken(options.token)
  const key = preparePrivateKey(options.privateKey)
  const givenApiKey = options.apiKey === undefined ? undefined : checkApiKey(options.apiKey)
  if (givenApiKey === undefined && !publicHalfReadable(key)) {
    throw new SigningInputError('apiKey', 'privateKey is a non-extractable CryptoKey, whose public half (and so its apiKey) cannot be read: ' +
      'give apiKey, what registerKey returned (or await apiKeyOf(keyPair.publicKey))')
  }
  const fetchImpl = checkFetch(options.fetch)
  const scheme = checkScheme(options.scheme)
  const messageOptions = { label: checkLabel(options.label), components: checkCoveredTarget(options.components), expiresIn: checkExpiresIn(options.expiresIn) }
  const algorithm = algorithmFor(key, checkAlgorithm(options.algorithm))
  const bodyRules = checkBodyRules(options)
  subtle() // a runtime without WebCrypto (a browser page on plain http:// other than localhost) is said at once, too

  let signingKey: Promise<WebCryptoKey> | undefined
  let apiKey: Promise<string> | undefined
  const importedKey = async (): Promise<WebCryptoKey> => await (signingKey ??= importSigningKey(key, scheme === 'rfc9421' ? algorithm : undefined))
  const clientApiKey = async (): Promise<string> =>
    await (apiKey ??= givenApiKey !== undefined ? Promise.resolve(givenApiKey) : publicSpki(key, 'privateKey').then((spki) => sha256Hex([spki])))

  const send: KeygateClient['send'] = async (method, target, body, init = {}) => {
    if ((init as { body?: unknown }).body !== undefined) throw new SigningInputError('init.body', 'pass the body as the third argument, so that it is signed')
    const request = checkRequest({ method, target, body })
    checkSignedBody(request, scheme, bodyRules)
    // fetch's URL parser re-encodes some characters (a ' in a query) and drops an empty "?":
    // what it would send must be exactly what is signed.
    const url = new URL(request.target, origin)
    if (url.pathname + url.search !== request.target) {
      throw new SigningInputError('target', `fetch would send ${JSON.stringify(url.pathname + url.search)} for ${JSON.stringify(request.target)}; ` +
        'send and sign that form instead')
    }
    const headers = new Headers(init.headers)
    if (request.body.length > 0 && !headers.has('content-type')) headers.set('content-type', 'application/json')
    headers.set('authorization', `Bearer ${token}`)
    let bytes: Bytes
    if (scheme === 'rfc9421') {
      const contentType = request.body.length > 0 ? headers.get('content-type') ?? undefined : undefined
      const prepared = await prepareMessageSignature({ ...request, origin, contentType }, await clientApiKey(), algorithm, messageOptions)
      bytes = utf8(prepared.base)
      if (prepared.contentDigest !== undefined) headers.set('content-digest', prepared.contentDigest)
      headers.set('signature-input', prepared.signatureInput)
      headers.set('signature', signatureField(prepared.label, await signRaw(await importedKey(), algorithm, bytes)))
    } else {
      bytes = signingBytes(request)
      const signed = await signatureHeaders(request, await clientApiKey(), await importedKey(), key.type, bytes)
      for (const [name, value] of Object.entries(signed)) headers.set(name, value)
    }
    const response = await fetchImpl(url, {
      ...init,
      method: request.method,
      headers,
      ...(request.body.length > 0 && { body: request.body })
    })
    const sent: Record<string, string> = {}
    headers.forEach((value, name) => { sent[name] = value })
    return { response, scheme, signingString: bytes, headers: sent }
  }
  return {
    apiKey: clientApiKey,
    send,
    fetch: async (method, target, body, init) => (await send(method, target, body, init)).response
  }
}
