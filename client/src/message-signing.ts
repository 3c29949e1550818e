// RFC 9421 (HTTP Message Signatures) on the client's side: which components a request covers, its
// Content-Digest (RFC 9530), the signature parameters, and the signature base, built only with the
// protocol's own serialisers (./protocol/message-signature.ts), which the gateway verifies with.
import { type Bytes, sha256Hex, subtle, toBase64, utf8 } from './bytes.js'
import { SigningInputError } from './errors.js'
import {
  type ComponentId, type ContentDigestAlgorithm, contentDigestValue, MESSAGE_SIGNATURE_ALGORITHMS, type MessageSignatureAlgorithm, type Parameters,
  requestComponentValue, serializeSignatureParams, signatureBase, type SignedMessage
} from './protocol/index.js'

/** Which signature scheme a request is signed with: the X-API-* headers, or RFC 9421's Signature-Input and Signature. */
export type SignatureScheme = 'seed' | 'rfc9421'

/**
 * How the target is covered: "@target-uri" (scheme, host and path: the default), or "@path" plus
 * "@query" when there is a query, for a gateway behind a load balancer or proxy that rewrites Host.
 */
export type CoveredTarget = 'target-uri' | 'path'

/** The RFC 9421 choices of a signature; every one has a default. */
export interface MessageSignatureOptions {
  /** the signature's label in Signature-Input and Signature; default "sig1" */
  label?: string | undefined
  /** "target-uri" (default) or "path" (behind a proxy that rewrites Host) */
  components?: CoveredTarget | undefined
  /** for an RSA key, "rsa-v1_5-sha256" (default) or "rsa-pss-sha512"; other key types have one algorithm each */
  algorithm?: MessageSignatureAlgorithm | undefined
  /** the `created` parameter, seconds since the Unix epoch; default now */
  created?: number | undefined
  /**
   * seconds after `created` when the signature expires (the `expires` parameter, which keygate
   * honours: a signature past it gets TIMESTAMP_OUT_OF_RANGE); default none: keygate's window of
   * 15 minutes either side of `created` bounds it
   */
  expiresIn?: number | undefined
  /** the `nonce` parameter; default 16 random bytes, base64url: two identical requests in one second still differ */
  nonce?: string | undefined
}

/** A request, checked, as RFC 9421 signs it. */
export interface MessageToSign {
  method: string
  target: string
  body: Bytes
  /** scheme://host[:port], needed to cover @target-uri */
  origin: string | undefined
  /** the Content-Type sent with a body */
  contentType: string | undefined
}

/** The signature base of one request, and the header values that go with it. */
export interface PreparedMessageSignature {
  label: string
  algorithm: MessageSignatureAlgorithm
  /** the signature base, exactly as signed */
  base: string
  /** the Signature-Input field value: `label=(...);created=...` */
  signatureInput: string
  /** the Content-Digest field value, when the request has a body */
  contentDigest: string | undefined
}

const LABEL = /^[a-z*][a-z0-9_\-.*]*$/
const NONCE = /^[\x20-\x7e]{1,256}$/

export function checkLabel (label: unknown): string {
  if (label === undefined) return 'sig1'
  if (typeof label !== 'string' || !LABEL.test(label)) {
    throw new SigningInputError('label', 'must be a Structured Fields key: lowercase letters, digits, "_", "-", ".", "*", starting with a letter (e.g. "sig1")')
  }
  return label
}

export function checkCoveredTarget (components: unknown): CoveredTarget {
  if (components === undefined) return 'target-uri'
  if (components !== 'target-uri' && components !== 'path') {
    throw new SigningInputError('components', 'must be "target-uri" (cover @target-uri, the default) or "path" (cover @path and @query, ' +
      'for a keygate behind a proxy that rewrites Host)')
  }
  return components
}

export function checkAlgorithm (algorithm: unknown): MessageSignatureAlgorithm | undefined {
  if (algorithm === undefined) return undefined
  if (typeof algorithm !== 'string' || !(MESSAGE_SIGNATURE_ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw new SigningInputError('algorithm', `must be one of ${MESSAGE_SIGNATURE_ALGORITHMS.join(', ')}`)
  }
  return algorithm as MessageSignatureAlgorithm
}

function checkCreated (created: unknown): number {
  if (created === undefined) return Math.floor(Date.now() / 1000)
  if (typeof created !== 'number' || !Number.isSafeInteger(created) || created < 0) {
    throw new SigningInputError('created', 'must be an integer number of seconds since the Unix epoch (Math.floor(Date.now() / 1000))')
  }
  if (created > 99_999_999_999) throw new SigningInputError('created', `${created} looks like milliseconds; RFC 9421's created is in seconds`)
  return created
}

/** `expires`: `created` + expiresIn, or none */
export function checkExpiresIn (expiresIn: unknown): number | undefined {
  if (expiresIn === undefined) return undefined
  if (typeof expiresIn !== 'number' || !Number.isSafeInteger(expiresIn) || expiresIn < 1) {
    throw new SigningInputError('expiresIn', 'must be a whole number of seconds, 1 or more (the signature expires that long after created)')
  }
  return expiresIn
}

function checkNonce (nonce: unknown): string {
  if (nonce === undefined) return randomNonce()
  if (typeof nonce !== 'string' || !NONCE.test(nonce)) throw new SigningInputError('nonce', 'must be 1 to 256 printable ASCII characters')
  return nonce
}

/** 16 random bytes, base64url without padding. */
export function randomNonce (): string {
  const bytes = new Uint8Array(16)
  const crypto = (globalThis as { crypto?: { getRandomValues?: (array: Uint8Array) => Uint8Array } }).crypto
  if (crypto?.getRandomValues === undefined) throw new Error('@keygate/client needs crypto.getRandomValues for RFC 9421 nonces')
  crypto.getRandomValues(bytes)
  return toBase64(bytes).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
}

/** WebCrypto's name of each Content-Digest algorithm's hash */
const HASH_OF: Readonly<Record<ContentDigestAlgorithm, string>> = { 'sha-256': 'SHA-256', 'sha-512': 'SHA-512' }

/** The digest of the exact body bytes by a Content-Digest algorithm (RFC 9530). */
export async function bodyDigest (algorithm: ContentDigestAlgorithm, body: Bytes): Promise<Uint8Array> {
  return new Uint8Array(await subtle().digest(HASH_OF[algorithm], body))
}

/** The Content-Digest field value of the exact body bytes: `sha-256=:<base64>:` (RFC 9530). */
export async function contentDigest (body: Bytes): Promise<string> {
  return contentDigestValue('sha-256', toBase64(await bodyDigest('sha-256', body)))
}

/** The covered components, in order: @method, the target, and for a body content-digest and content-type. */
export function coveredComponents (message: MessageToSign, covered: CoveredTarget): ComponentId[] {
  const components: ComponentId[] = [{ name: '@method' }]
  if (covered === 'target-uri') {
    components.push({ name: '@target-uri' })
  } else {
    components.push({ name: '@path' })
    if (message.target.includes('?')) components.push({ name: '@query' })
  }
  if (message.body.length > 0) components.push({ name: 'content-digest' }, { name: 'content-type' })
  return components
}

/**
 * The signature base and Signature-Input of a request: components as coveredComponents says,
 * parameters created, expires (with expiresIn), keyid (the apiKey), alg and nonce, in that order.
 */
export async function prepareMessageSignature (
  message: MessageToSign, apiKey: string, algorithm: MessageSignatureAlgorithm, options: MessageSignatureOptions
): Promise<PreparedMessageSignature> {
  const label = checkLabel(options.label)
  const covered = checkCoveredTarget(options.components)
  const created = checkCreated(options.created)
  const expiresIn = checkExpiresIn(options.expiresIn)
  const params: Parameters = [
    ['created', created], ...(expiresIn === undefined ? [] : [['expires', created + expiresIn] as const]),
    ['keyid', apiKey], ['alg', algorithm], ['nonce', checkNonce(options.nonce)]
  ]
  let scheme = ''
  let authority = ''
  if (covered === 'target-uri') {
    if (message.origin === undefined) {
      throw new SigningInputError('baseUrl', 'covering @target-uri needs the scheme and host the request is sent to: give baseUrl ' +
        '(e.g. https://api.example.com), or components: "path" to cover @path and @query instead')
    }
    const url = new URL(message.origin)
    scheme = url.protocol.slice(0, -1)
    authority = url.host
  }
  const digest = message.body.length > 0 ? await contentDigest(message.body) : undefined
  if (digest !== undefined && (message.contentType === undefined || message.contentType.trim() === '')) {
    throw new SigningInputError('contentType', 'a request with a body covers its Content-Type: give one (e.g. application/json)')
  }
  const fields: Record<string, string | undefined> = { 'content-digest': digest, 'content-type': message.contentType }
  const signed: SignedMessage = {
    method: message.method,
    target: message.target,
    scheme,
    authority,
    field: (name) => { const value = fields[name]; return value === undefined ? undefined : [value] }
  }
  const components = coveredComponents(message, covered)
  const signatureParams = serializeSignatureParams(components, params)
  let base: string
  try {
    base = signatureBase(components.map((component) => [component, requestComponentValue(signed, component)] as const), signatureParams)
  } catch (err) {
    throw new SigningInputError('contentType', `cannot be signed: ${(err as Error).message}`)
  }
  return { label, algorithm, base, signatureInput: `${label}=${signatureParams}`, contentDigest: digest }
}

/** The Signature field value: `label=:<base64>:`. */
export function signatureField (label: string, signature: Bytes): string {
  return `${label}=:${toBase64(signature)}:`
}

/**
 * A signature base as keygate describes the one it verified in an INVALID_SIGNATURE answer: its
 * lines, and the lowercase hex SHA-256 of its UTF-8 bytes.
 */
export interface SignatureBaseDetails {
  signatureBase: string[]
  signatureBaseSha256: string
}

export async function describeBase (base: string): Promise<SignatureBaseDetails> {
  return { signatureBase: base.split('\n'), signatureBaseSha256: await sha256Hex([utf8(base)]) }
}

/**
 * The lines that differ between the signature base you signed and the one keygate verified (its
 * INVALID_SIGNATURE answer's `signatureBase`): both empty when the bases are equal, which means
 * another key signed.
 */
export function signatureBaseMismatches (mine: SignatureBaseDetails, problem: Record<string, unknown>): { mine: string[]; keygate: string[] } {
  const theirs = Array.isArray(problem.signatureBase) ? problem.signatureBase.filter((line): line is string => typeof line === 'string') : []
  if (problem.signatureBaseSha256 === mine.signatureBaseSha256) return { mine: [], keygate: [] }
  return { mine: mine.signatureBase.filter((line) => !theirs.includes(line)), keygate: theirs.filter((line) => !mine.signatureBase.includes(line)) }
}
