// Parsing and proving the RSA public keys clients register. The apiKey is the hex SHA-256 of the
// key's DER SubjectPublicKeyInfo: one key gives one apiKey whatever its PEM form or wrapping.
import { createPublicKey, createVerify, verify, type KeyObject } from 'node:crypto'
import { apiKeyOfSpki } from '#client/protocol'
import { GatewayError } from '../errors.js'
import { sha256Hex } from '../lib/sha256.js'

/**
 * The RSA key sizes registration accepts. Every signature check costs one verification, a bad
 * one too, and that cost grows with the key: measured here (a bad signature, OpenSSL 3), 2048 bits
 * ~28 us, 3072 ~48, 4096 ~80, 8192 ~290 (10x), so whoever knows the apiKey of a big key could make
 * every refusal dear. Keys stored before this rule keep verifying: it applies at registration only.
 */
export const ACCEPTED_RSA_BITS: readonly number[] = [2048, 3072, 4096]
/**
 * The one public exponent accepted: 65537, the default of every tool. A bigger one costs more per
 * verification (e = 2^32+1 about twice as much; OpenSSL takes exponents of any size on small keys).
 */
export const RSA_PUBLIC_EXPONENT = 65537n
/** signing strings up to this size are joined into one buffer and verified in one call */
const ONE_SHOT_MAX_BYTES = 64 * 1024
const PEM_BLOCK = /^-----BEGIN (PUBLIC KEY|RSA PUBLIC KEY)-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END \1-----\s*$/

export interface ParsedPublicKey {
  keyObject: KeyObject
  apiKey: string
  /** SPKI PEM, the stored form */
  pem: string
}

/** SPKI (`PUBLIC KEY`) or PKCS#1 (`RSA PUBLIC KEY`) PEM text -> a verified, normalised RSA key. */
export function parseRsaPublicKey (text: string): ParsedPublicKey {
  const block = PEM_BLOCK.exec(text.trim() + '\n')
  if (block === null) {
    throw new GatewayError('INVALID_PUBLIC_KEY', 'publicKey must be one PEM block, ' +
      '"-----BEGIN PUBLIC KEY-----" (SPKI) or "-----BEGIN RSA PUBLIC KEY-----" (PKCS#1)')
  }
  let keyObject: KeyObject
  try {
    keyObject = createPublicKey({ key: block[0], format: 'pem' })
  } catch (err) {
    throw new GatewayError('INVALID_PUBLIC_KEY', 'publicKey is not a parseable PEM public key', { cause: err })
  }
  if (keyObject.asymmetricKeyType !== 'rsa') {
    throw new GatewayError('INVALID_PUBLIC_KEY', `publicKey is a ${keyObject.asymmetricKeyType ?? 'unknown'} key; only RSA keys are accepted`)
  }
  const { modulusLength = 0, publicExponent = 0n } = keyObject.asymmetricKeyDetails ?? {}
  if (!ACCEPTED_RSA_BITS.includes(modulusLength)) {
    throw new GatewayError('INVALID_PUBLIC_KEY', `publicKey is an RSA key of ${modulusLength} bits: keygate accepts 2048, 3072 or 4096 bits ` +
      '(openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048, or keygate keygen)')
  }
  if (publicExponent !== RSA_PUBLIC_EXPONENT) {
    throw new GatewayError('INVALID_PUBLIC_KEY', `publicKey has the public exponent ${publicExponent}: keygate accepts ${RSA_PUBLIC_EXPONENT} only ` +
      '(the default of openssl, ssh-keygen, WebCrypto and Node.js)')
  }
  return {
    keyObject,
    apiKey: apiKeyOf(keyObject),
    pem: keyObject.export({ type: 'spki', format: 'pem' }).toString()
  }
}

/** The apiKey of a public key: lowercase hex SHA-256 of its DER SubjectPublicKeyInfo. */
export function apiKeyOf (publicKey: KeyObject): string {
  return apiKeyOfSpki(publicKey.export({ type: 'spki', format: 'der' }), sha256Hex)
}

/**
 * Strict single-line, canonical base64; anything else is undefined. Canonical means one spelling
 * per byte string (no stray bits in the padding), so a signature has exactly one accepted form.
 * Node's decoder skips what is not base64 (line breaks, spaces, "!") and also reads base64url
 * and unpadded text, but encodes only the canonical form: a text that survives the round trip
 * unchanged is canonical base64, and nothing else does (no pattern needed on the hot path).
 */
export function decodeBase64 (text: string): Buffer | undefined {
  if (text.length === 0 || text.length % 4 !== 0) return undefined
  const bytes = Buffer.from(text, 'base64')
  return bytes.toString('base64') === text ? bytes : undefined
}

/**
 * RSASSA-PKCS1-v1_5 with SHA-256 (what `openssl dgst -sha256 -sign` makes) over the concatenation
 * of `data` (several parts are hashed in turn: no copy of a large body).
 */
export function verifyRsaSha256 (keyObject: KeyObject, data: Uint8Array | readonly Uint8Array[], signature: Uint8Array): boolean {
  // A signature is exactly as long as the modulus; a shorter or longer one cannot verify.
  const bits = keyObject.asymmetricKeyDetails?.modulusLength ?? 0
  if (signature.length !== Math.ceil(bits / 8)) return false
  const parts: readonly Uint8Array[] = data instanceof Uint8Array ? [data] : data
  // One buffer (a GET's signing string, or a small body joined to it): the one-shot verify, which
  // builds no stream. A large body is hashed in place, part by part, never copied.
  const size = parts.reduce((sum, part) => sum + part.length, 0)
  if (parts.length === 1 || size <= ONE_SHOT_MAX_BYTES) {
    return verify('sha256', parts.length === 1 ? parts[0] as Uint8Array : Buffer.concat(parts, size), keyObject, signature)
  }
  const verifier = createVerify('sha256')
  for (const part of parts) verifier.update(part)
  return verifier.verify(keyObject, signature)
}
