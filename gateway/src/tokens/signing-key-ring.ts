// The pieces of the token-signing key ring that both the token service and the operator CLI use:
// parsing a PEM into a key with its kid and JWK, generating a new key, the rotation policy, and
// rotating the ring kept on a store.
//
// When does a replaced key retire? Not before every token it signed has expired. A token signed
// the instant before the rotation lives for the longest token lifetime (the bearer TTL, or a
// longer identity-token TTL of a route); a gateway that has not re-read the ring yet keeps signing
// with the replaced key for up to one refresh interval; clocks differ a little. So:
//   retire after = longest token lifetime + margin, the default margin covering two refresh
//   intervals and a minute of clock skew.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { calculateJwkThumbprint, exportJWK, type JWK } from 'jose'
import type { SigningKeyRotation, Store } from '../store/types.js'

export type TokenAlgorithm = 'EdDSA' | 'ES256'

/** Gateways re-read the ring this often, so they start signing with a rotated key. */
export const REFRESH_INTERVAL_MS = 30_000
/** A token with an unknown kid makes a gateway re-read the ring at most this often. */
export const UNKNOWN_KID_REFRESH_MS = 1000
export const DEFAULT_RETIRE_MARGIN_MS = 2 * REFRESH_INTERVAL_MS + 60_000

export interface RingKey {
  kid: string
  privateKey: KeyObject
  publicKey: KeyObject
  algorithm: TokenAlgorithm
  /** the public JWK as published: kid, alg, use */
  jwk: JWK
  /** ms since the epoch from which it verifies nothing; undefined for the current key */
  retiresAt: number | undefined
}

export function algorithmOf (key: KeyObject): TokenAlgorithm {
  if (key.asymmetricKeyType === 'ed25519') return 'EdDSA'
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256'
  throw new Error(`the token signing key is ${key.asymmetricKeyType ?? 'unknown'}; use an Ed25519 or P-256 (prime256v1) private key`)
}

/** A PEM private key with its algorithm and its kid: the RFC 7638 thumbprint of its public JWK. */
export async function parseSigningKey (pem: string, retiresAt: number | undefined): Promise<RingKey> {
  const privateKey = createPrivateKey(pem)
  const algorithm = algorithmOf(privateKey)
  const publicKey = createPublicKey(privateKey)
  const publicJwk = await exportJWK(publicKey)
  const kid = await calculateJwkThumbprint(publicJwk)
  return { kid, privateKey, publicKey, algorithm, jwk: { ...publicJwk, kid, alg: algorithm, use: 'sig' }, retiresAt }
}

/** A fresh Ed25519 key as PKCS#8 PEM. */
export function generateSigningKeyPem (): string {
  return generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
}

/** How long a replaced key keeps verifying, given the longest token lifetime in seconds. */
export function retireAfterMs (longestTtlSeconds: number, marginMs = DEFAULT_RETIRE_MARGIN_MS): number {
  return longestTtlSeconds * 1000 + marginMs
}

export interface RotationResult {
  /** the kid of the new current key */
  kid: string
  /** the key it replaced, and when that one retires (ms since the epoch); undefined on an empty store */
  replaced: { kid: string; retiresAt: number } | undefined
  rotation: SigningKeyRotation
}

/** Generates a key and makes it the current one on the store, atomically for every gateway. */
export async function rotateStoredSigningKey (store: Store, retireAfter: number): Promise<RotationResult> {
  const candidate = generateSigningKeyPem()
  const rotation = await store.rotateSigningKey(candidate, retireAfter)
  const { kid } = await parseSigningKey(candidate, undefined)
  const replaced = rotation.replaced === null
    ? undefined
    : { kid: (await parseSigningKey(rotation.replaced.pem, undefined)).kid, retiresAt: rotation.replaced.retiresAt }
  return { kid, replaced, rotation }
}
