import type { KeyObject } from 'node:crypto'
import { describeSigningString, signingString, type KeyType, type SigningStringDetails } from '#client/protocol'
import { GatewayError } from '../errors.js'
import {
  decodeBase64, ED25519_SIGNATURE_BYTES, keyTypeOf, P256_DER_SIGNATURE_BYTES, P256_RAW_SIGNATURE_BYTES, rsaSignatureBytes, verifyWithKey
} from '../keys/public-key.js'
import { sha256Hex } from '../lib/sha256.js'
import { bodyBytes, type DescribedRequest } from './described-request.js'
import { required, type AuthStage, type AuthState } from './stage.js'

export interface SignedRequest {
  timestamp: string
  method: string
  /** the raw request target: path, and ?query when there is one */
  target: string
  body: Buffer | undefined
  /** X-API-Signature as received */
  signature: string
}

/** Why a signature was refused; each reason has its own advice for the client. */
export type SignatureFailure = 'not-base64' | 'wrong-length' | 'does-not-verify'

/** The key's type: as the registry set it, else read from the key. */
function typeOf (keyObject: KeyObject, keyType: KeyType | undefined): KeyType {
  return keyType ?? keyTypeOf(keyObject) ?? 'rsa'
}

/** Whether a signature of this size can be one by a key of this type (seed scheme: P-256 in DER). */
function sizeFits (keyObject: KeyObject, keyType: KeyType, bytes: Uint8Array): boolean {
  switch (keyType) {
    case 'rsa': return bytes.length === rsaSignatureBytes(keyObject)
    case 'ed25519': return bytes.length === ED25519_SIGNATURE_BYTES
    case 'p256': return bytes.length >= P256_DER_SIGNATURE_BYTES.min && bytes.length <= P256_DER_SIGNATURE_BYTES.max && bytes[0] === 0x30
  }
}

/**
 * The verification of X-API-Signature over the signing string with the registered key, by its
 * algorithm: RSA PKCS#1 v1.5 SHA-256, Ed25519, or ECDSA P-256 SHA-256 (DER, what
 * `openssl dgst -sha256 -sign` makes). Undefined when it verifies, else why not.
 */
export function verifyRequestSignature (keyObject: KeyObject, request: SignedRequest, keyType?: KeyType): SignatureFailure | undefined {
  const bytes = decodeBase64(request.signature)
  if (bytes === undefined) return 'not-base64'
  const type = typeOf(keyObject, keyType)
  if (verifyWithKey(keyObject, type, signingString(request.timestamp, request.method, request.target, request.body), bytes)) return undefined
  return sizeFits(keyObject, type, bytes) ? 'does-not-verify' : 'wrong-length'
}

/** What a signature by the key holds, for the wrong-length advice. */
function expectedSize (keyObject: KeyObject, keyType: KeyType): string {
  switch (keyType) {
    case 'rsa': {
      const bits = keyObject.asymmetricKeyDetails?.modulusLength ?? 0
      return `a signature by the key of X-API-Key (${bits}-bit RSA) holds ${bits / 8}`
    }
    case 'ed25519': return `a signature by the key of X-API-Key (Ed25519) holds ${ED25519_SIGNATURE_BYTES}`
    case 'p256': return 'a signature by the key of X-API-Key (EC P-256) is DER, an ECDSA-Sig-Value (what openssl dgst -sha256 -sign makes) ' +
      `of ${P256_DER_SIGNATURE_BYTES.min} to ${P256_DER_SIGNATURE_BYTES.max} bytes whose first is 0x30`
  }
}

/** The likely mistake behind a wrong length, when one is likely. */
function lengthHint (keyType: KeyType, bytes: Uint8Array | undefined): string {
  if (keyType !== 'p256' || bytes?.length !== P256_RAW_SIGNATURE_BYTES) return ''
  return `. ${P256_RAW_SIGNATURE_BYTES} bytes is the raw r||s form of an ECDSA signature (IEEE P1363: WebCrypto's and JOSE's): ` +
    'the seed scheme takes DER, a SEQUENCE of the INTEGERs r and s'
}

const ADVICE: Record<SignatureFailure, (expected: string, signatureBytes: number, hint: string) => string> = {
  'not-base64': () => 'X-API-Signature is not canonical single-line base64 (no line breaks, spaces, or base64url): ' +
    'send the signature bytes in standard base64 on one line',
  'wrong-length': (expected, bytes, hint) => `X-API-Signature holds ${bytes} bytes, but ${expected}: ` +
    `it was made with another key pair, or damaged on the way${hint}`,
  'does-not-verify': () => 'X-API-Signature does not verify with the key of X-API-Key over the signing string described here. ' +
    'Compare signingStringSha256 with the SHA-256 of the exact bytes you signed. If they differ, compare timestamp, method, target, ' +
    'bodyLength and bodySha256 with yours: the first that differs is the mistake; if all of them match, you signed extra bytes ' +
    '(a trailing newline, separators). If the hashes are equal, you signed with another private key than the one registered as apiKey'
}

/**
 * INVALID_SIGNATURE with what the gateway verified, so the client can compare with its own in one
 * glance: never the expected signature. Hashing the body costs time, and only failures pay it.
 */
export function invalidSignatureError (
  keyObject: KeyObject, apiKey: string, request: SignedRequest, failure: SignatureFailure, keyType?: KeyType
): GatewayError {
  const bytes = decodeBase64(request.signature)
  const type = typeOf(keyObject, keyType)
  return new GatewayError('INVALID_SIGNATURE', ADVICE[failure](expectedSize(keyObject, type), bytes?.length ?? 0, lengthHint(type, bytes)), {
    extra: { apiKey, ...describeSignedRequest(request) }
  })
}

/** What the gateway verified, as an INVALID_SIGNATURE answer describes it. */
export function describeSignedRequest (request: Omit<SignedRequest, 'signature'>): SigningStringDetails {
  return describeSigningString(request.timestamp, request.method, request.target, request.body, sha256Hex)
}

/**
 * X-API-Signature over the signing string, with the registered key and its algorithm.
 * `observeVerification` gets the seconds the verification took (the metrics); `onFailure` hears
 * of each request whose signature failed (the budget of failed checks per address).
 */
export function signatureStage (observeVerification?: (seconds: number) => void, onFailure?: (request: DescribedRequest, state: AuthState) => void): AuthStage {
  return {
    name: 'signature',
    needsBody: true,
    run (request, state) {
      const { apiKey, timestamp, signature } = required(state.signatureHeaders, 'the signature headers', 'signature')
      const key = required(state.key, 'the key', 'signature')
      const signed: SignedRequest = {
        timestamp,
        method: request.method,
        target: request.target,
        // an unseen body never gets here: the seed-body stage refuses it (seed-body.ts)
        body: bodyBytes(request),
        signature
      }
      const started = performance.now()
      const failure = verifyRequestSignature(key.keyObject, signed, key.keyType)
      observeVerification?.((performance.now() - started) / 1000)
      if (failure !== undefined) {
        onFailure?.(request, state)
        throw invalidSignatureError(key.keyObject, apiKey, signed, failure, key.keyType)
      }
    }
  }
}
