import type { KeyObject } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { describeSigningString, signingString, type SigningStringDetails } from '#client/protocol'
import { GatewayError } from '../errors.js'
import { decodeBase64, verifyRsaSha256 } from '../keys/public-key.js'
import { sha256Hex } from '../lib/sha256.js'
import { required, type AuthStage } from './stage.js'

const EMPTY = Buffer.alloc(0)

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

/**
 * The verification of X-API-Signature: RSA PKCS#1 v1.5 with SHA-256 over the signing string,
 * with the registered key. Undefined when it verifies, else why not.
 */
export function verifyRequestSignature (keyObject: KeyObject, request: SignedRequest): SignatureFailure | undefined {
  const bytes = decodeBase64(request.signature)
  if (bytes === undefined) return 'not-base64'
  if (verifyRsaSha256(keyObject, signingString(request.timestamp, request.method, request.target, request.body), bytes)) return undefined
  const modulusBytes = Math.ceil((keyObject.asymmetricKeyDetails?.modulusLength ?? 0) / 8)
  return bytes.length === modulusBytes ? 'does-not-verify' : 'wrong-length'
}

const ADVICE: Record<SignatureFailure, (keyBits: number, signatureBytes: number) => string> = {
  'not-base64': () => 'X-API-Signature is not canonical single-line base64 (no line breaks, spaces, or base64url): ' +
    'send the signature bytes in standard base64 on one line',
  'wrong-length': (bits, bytes) => `X-API-Signature holds ${bytes} bytes, but a signature by the key of X-API-Key (${bits}-bit RSA) ` +
    `holds ${bits / 8}: it was made with another key pair, or damaged on the way`,
  'does-not-verify': () => 'X-API-Signature does not verify with the key of X-API-Key over the signing string described here. ' +
    'Compare signingStringSha256 with the SHA-256 of the exact bytes you signed. If they differ, compare timestamp, method, target, ' +
    'bodyLength and bodySha256 with yours: the first that differs is the mistake; if all of them match, you signed extra bytes ' +
    '(a trailing newline, separators). If the hashes are equal, you signed with another private key than the one registered as apiKey'
}

/**
 * INVALID_SIGNATURE with what the gateway verified, so the client can compare with its own in one
 * glance: never the expected signature. Hashing the body costs time, and only failures pay it.
 */
export function invalidSignatureError (keyObject: KeyObject, apiKey: string, request: SignedRequest, failure: SignatureFailure): GatewayError {
  const bits = keyObject.asymmetricKeyDetails?.modulusLength ?? 0
  const signatureBytes = decodeBase64(request.signature)?.length ?? 0
  return new GatewayError('INVALID_SIGNATURE', ADVICE[failure](bits, signatureBytes), {
    extra: { apiKey, ...describeSignedRequest(request) }
  })
}

/** What the gateway verified, as an INVALID_SIGNATURE answer describes it. */
export function describeSignedRequest (request: Omit<SignedRequest, 'signature'>): SigningStringDetails {
  return describeSigningString(request.timestamp, request.method, request.target, request.body, sha256Hex)
}

/**
 * X-API-Signature: RSA-SHA256 over the signing string, with the registered key.
 * `observeVerification` gets the seconds the verification took (the metrics); `onFailure` hears
 * of each request whose signature failed (the budget of failed checks per address).
 */
export function signatureStage (observeVerification?: (seconds: number) => void, onFailure?: (request: FastifyRequest) => void): AuthStage {
  return {
    name: 'signature',
    needsBody: true,
    run (request, state) {
      const { apiKey, timestamp, signature } = required(state.signatureHeaders, 'the signature headers', 'signature')
      const key = required(state.key, 'the key', 'signature')
      const signed: SignedRequest = {
        timestamp,
        method: request.raw.method ?? '',
        target: request.raw.url ?? '',
        body: Buffer.isBuffer(request.body) ? request.body : EMPTY,
        signature
      }
      const started = performance.now()
      const failure = verifyRequestSignature(key.keyObject, signed)
      observeVerification?.((performance.now() - started) / 1000)
      if (failure !== undefined) {
        onFailure?.(request)
        throw invalidSignatureError(key.keyObject, apiKey, signed, failure)
      }
    }
  }
}
