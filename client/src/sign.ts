// Signing one request: signRequest (either scheme), and the descriptions that compare what a
// client signed with what keygate says it verified in an INVALID_SIGNATURE answer.
import { type Bytes, concatBytes, sha256Hex, toBase64, utf8 } from './bytes.js'
import {
  algorithmFor, checkApiKey, checkBaseUrl, checkBodyRules, checkContentType, checkRequest, checkScheme, checkSignedBody, type CheckedRequest
} from './checks.js'
import { derOfRawEcdsa } from './der.js'
import { defaultAlgorithm, importSigningKey, preparePrivateKey, signRaw, type WebCryptoKey } from './keys.js'
import { checkAlgorithm, describeBase, prepareMessageSignature, type SignatureBaseDetails, signatureField } from './message-signing.js'
import {
  describeSigningString as describeWith, type KeyType, type MessageSignatureAlgorithm, signingString, type SigningStringDetails
} from './protocol/index.js'
import type { MessageSignatureHeaders, MessageSignatureInput, SignatureHeaders, SignRequestInput } from './request-types.js'

/** What a signing string is made of (see SigningStringDetails), as keygate describes it. */
export async function describeSigningString (timestamp: string, method: string, target: string, body: Uint8Array | undefined): Promise<SigningStringDetails> {
  return await describeWith(timestamp, method, target, body, sha256Hex)
}

/** The signing string as one run of bytes: WebCrypto signs one buffer. */
export function signingBytes (request: CheckedRequest): Bytes {
  return concatBytes(signingString(request.timestamp, request.method, request.target, request.body))
}

/**
 * The seed scheme's signature (and the registration proof), base64: RSA PKCS#1 v1.5 SHA-256, the
 * raw Ed25519 signature, or for P-256 the DER ECDSA signature of the SHA-256 (what openssl dgst
 * -sha256 -sign makes; WebCrypto's raw r || s is converted).
 */
export async function seedSignature (key: WebCryptoKey, type: KeyType, bytes: Bytes): Promise<string> {
  const raw = await signRaw(key, defaultAlgorithm(type), bytes)
  return toBase64(type === 'p256' ? derOfRawEcdsa(raw) : raw)
}

export async function signatureHeaders (
  request: CheckedRequest, apiKey: string, key: WebCryptoKey, type: KeyType, bytes: Bytes
): Promise<SignatureHeaders> {
  return { 'X-API-Key': apiKey, 'X-API-Timestamp': request.timestamp, 'X-API-Signature': await seedSignature(key, type, bytes) }
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
