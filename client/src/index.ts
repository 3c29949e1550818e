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
//
// Its rooms: sign.ts (signRequest and the descriptions of what was signed), client.ts
// (createClient), registration.ts (a key's registration body), api.ts (login, registerKey),
// checks.ts (what a caller gives, checked first), request-types.ts; keys.ts, message-signing.ts and
// ./protocol beneath them; dpop.ts (RFC 9449 proofs for DPoP-bound tokens, and the nonce retry).
import { sha256Hex } from './bytes.js'
import { KeygateResponseError, SigningInputError } from './errors.js'
import { importSigningKey, prepareKey, preparePrivateKey, publicSpki } from './keys.js'
import {
  type CoveredTarget, type MessageSignatureOptions, type SignatureBaseDetails, signatureBaseMismatches, type SignatureScheme
} from './message-signing.js'
import { apiKeyOfSpki, type KeyType, type MessageSignatureAlgorithm, signingString, type SigningStringDetails } from './protocol/index.js'
import type { CryptoKeyLike, KeyInput, KeyObjectLike, PrivateKeyInput } from './types.js'

export { KeygateResponseError, SigningInputError, signingString, type CryptoKeyLike, type KeyInput, type KeyObjectLike, type PrivateKeyInput }
export { signatureBaseMismatches }
export {
  checkForwardedDigest, FORWARDED_DIGEST_HEADER, type ForwardedDigestCheck, type ForwardedDigestProblem, type ForwardedHeaders
} from './forwarded-digest.js'
export type { ContentDigestAlgorithm } from './protocol/index.js'
export type { CoveredTarget, KeyType, MessageSignatureAlgorithm, MessageSignatureOptions, SignatureBaseDetails, SignatureScheme }
export type { SigningStringDetails }
export { describeRequest, describeSignatureBase, describeSigningString, signatureMismatches, signRequest } from './sign.js'
export type {
  FetchFunction, MessageSignatureHeaders, MessageSignatureInput, RequestBody, SeedBodyBoundary, SignatureHeaders, SignRequestInput
} from './request-types.js'
export { keyRegistration, signKeyName, type KeyRegistrationBody } from './registration.js'
export { login, registerKey, type LoginInput, type LoginResult, type RegisterKeyInput } from './api.js'
export {
  accessTokenHash, dpopProof, dpopThumbprint, generateDpopKey, withDpopProof, type DpopAlgorithm, type DpopKeyPair, type DpopProofInput
} from './dpop.js'
export { createClient, type ClientOptions, type ClientRequestInit, type KeygateClient, type SignedResponseInfo } from './client.js'

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
