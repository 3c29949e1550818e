// Parsing the public keys clients register (RSA, Ed25519, EC P-256) and verifying signatures made
// with them, one function per key type. The apiKey is the hex SHA-256 of the key's DER
// SubjectPublicKeyInfo: one key gives one apiKey whatever its PEM form or wrapping. The
// fingerprint (RFC 7638) names the key by its mathematical value: one key, one fingerprint, in
// any encoding (an EC point compressed or not), so a key is registered once, ever.
import { constants, createPublicKey, createVerify, verify, type JsonWebKey, type KeyObject, type VerifyKeyObjectInput } from 'node:crypto'
import { apiKeyOfSpki, type KeyType } from '#client/protocol'
import { GatewayError } from '../errors.js'
import { jwkThumbprint } from '../lib/jwk-thumbprint.js'
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

/** What registration accepts, and how to make each: the advice of every refused key type. */
const ACCEPTED_KEYS = 'keygate accepts RSA (2048, 3072 or 4096 bits: openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048), ' +
  'Ed25519 (openssl genpkey -algorithm ed25519) and EC P-256 (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256) ' +
  'public keys, as SPKI PEM (openssl pkey -in private.pem -pubout), or keygate keygen'

export interface ParsedPublicKey {
  keyObject: KeyObject
  keyType: KeyType
  apiKey: string
  /** RFC 7638 JWK thumbprint: the key's value, whatever its encoding (keyFingerprint) */
  fingerprint: string
  /** SPKI PEM, the stored form */
  pem: string
}

/** The one PEM block of `text` as a public KeyObject, else INVALID_PUBLIC_KEY. */
function readPemPublicKey (text: string): KeyObject {
  const block = PEM_BLOCK.exec(text.trim() + '\n')
  if (block === null) {
    throw new GatewayError('INVALID_PUBLIC_KEY', 'publicKey must be one PEM block, ' +
      '"-----BEGIN PUBLIC KEY-----" (SPKI) or "-----BEGIN RSA PUBLIC KEY-----" (PKCS#1)')
  }
  try {
    return createPublicKey({ key: block[0], format: 'pem' })
  } catch (err) {
    throw new GatewayError('INVALID_PUBLIC_KEY', 'publicKey is not a parseable PEM public key', { cause: err })
  }
}

/**
 * The key type of a public key keygate accepts (EC: on P-256 only), else undefined. Cheap: Node
 * caches a KeyObject's type and details.
 */
export function keyTypeOf (keyObject: KeyObject): KeyType | undefined {
  switch (keyObject.asymmetricKeyType) {
    case 'rsa': return 'rsa'
    case 'ed25519': return 'ed25519'
    case 'ec': return keyObject.asymmetricKeyDetails?.namedCurve === 'prime256v1' ? 'p256' : undefined
    default: return undefined
  }
}

function parsed (keyObject: KeyObject, keyType: KeyType): ParsedPublicKey {
  const fingerprint = keyFingerprint(keyObject)
  if (fingerprint === undefined) throw new Error(`a ${keyType} key without a thumbprint`)
  return {
    keyObject,
    keyType,
    apiKey: apiKeyOf(keyObject),
    fingerprint,
    pem: keyObject.export({ type: 'spki', format: 'pem' }).toString()
  }
}

/**
 * PEM text -> a verified, normalised public key of a type keygate accepts: RSA (SPKI or PKCS#1,
 * by the rules of parseRsaPublicKey), Ed25519 or EC P-256 (SPKI). Anything else (other curves,
 * Ed448, X25519, DSA, RSA-PSS-only keys) is INVALID_PUBLIC_KEY saying what is accepted.
 */
export function parsePublicKey (text: string): ParsedPublicKey {
  const keyObject = readPemPublicKey(text)
  const keyType = keyTypeOf(keyObject)
  if (keyType === undefined) {
    const curve = keyObject.asymmetricKeyType === 'ec' ? ` on the curve ${keyObject.asymmetricKeyDetails?.namedCurve ?? '(explicit parameters)'}` : ''
    throw new GatewayError('INVALID_PUBLIC_KEY', `publicKey is a ${keyObject.asymmetricKeyType ?? 'unknown'} key${curve}: ${ACCEPTED_KEYS}`)
  }
  if (keyType === 'rsa') checkRsaRules(keyObject)
  return parsed(keyObject, keyType)
}

/** SPKI (`PUBLIC KEY`) or PKCS#1 (`RSA PUBLIC KEY`) PEM text -> a verified, normalised RSA key. */
export function parseRsaPublicKey (text: string): ParsedPublicKey {
  const keyObject = readPemPublicKey(text)
  if (keyObject.asymmetricKeyType !== 'rsa') {
    throw new GatewayError('INVALID_PUBLIC_KEY', `publicKey is a ${keyObject.asymmetricKeyType ?? 'unknown'} key; only RSA keys are accepted`)
  }
  checkRsaRules(keyObject)
  return parsed(keyObject, 'rsa')
}

/** #9's rules: the sizes and the exponent registration accepts. */
function checkRsaRules (keyObject: KeyObject): void {
  const { modulusLength = 0, publicExponent = 0n } = keyObject.asymmetricKeyDetails ?? {}
  if (!ACCEPTED_RSA_BITS.includes(modulusLength)) {
    throw new GatewayError('INVALID_PUBLIC_KEY', `publicKey is an RSA key of ${modulusLength} bits: keygate accepts 2048, 3072 or 4096 bits ` +
      '(openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048, or keygate keygen)')
  }
  if (publicExponent !== RSA_PUBLIC_EXPONENT) {
    throw new GatewayError('INVALID_PUBLIC_KEY', `publicKey has the public exponent ${publicExponent}: keygate accepts ${RSA_PUBLIC_EXPONENT} only ` +
      '(the default of openssl, ssh-keygen, WebCrypto and Node.js)')
  }
}

/** The apiKey of a public key: lowercase hex SHA-256 of its DER SubjectPublicKeyInfo. */
export function apiKeyOf (publicKey: KeyObject): string {
  return apiKeyOfSpki(publicKey.export({ type: 'spki', format: 'der' }), sha256Hex)
}

/**
 * The RFC 7638 JWK thumbprint (SHA-256, base64url) of a public key: the hash of its required JWK
 * members in lexicographic order, which hold only its value (RSA n and e, the EC curve and point
 * x and y, the Ed25519 bytes). The SPKI DER is no such name: a P-256 point has a compressed and an
 * uncompressed form, two apiKeys for one key. What jose's calculateJwkThumbprint gives, but
 * synchronous (a cache miss computes it while parsing the key). Undefined for a key of no type
 * that has a thumbprint here.
 */
export function keyFingerprint (keyObject: KeyObject): string | undefined {
  let jwk: JsonWebKey
  try {
    jwk = keyObject.export({ format: 'jwk' })
  } catch {
    // a type Node cannot write as a JWK (DSA, DH): none keygate registers
    return undefined
  }
  return jwkThumbprint(jwk as Record<string, unknown>)
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

/** The parts of the signed data: one buffer, or several hashed in turn (a signing string and a body). */
export type SignedData = Uint8Array | readonly Uint8Array[]

function partsOf (data: SignedData): readonly Uint8Array[] {
  return data instanceof Uint8Array ? [data] : data
}

/** The parts as one buffer (a copy only when there are several). */
function joined (parts: readonly Uint8Array[]): Uint8Array {
  return parts.length === 1 ? parts[0] as Uint8Array : Buffer.concat(parts)
}

/**
 * Hash-then-verify with `digest`: one buffer (a GET's signing string, or a small body joined to
 * it) goes to the one-shot verify, which builds no stream; a large body is hashed in place, part
 * by part, never copied.
 */
function verifyDigest (digest: string, key: KeyObject | VerifyKeyObjectInput, data: SignedData, signature: Uint8Array): boolean {
  const parts = partsOf(data)
  const size = parts.reduce((sum, part) => sum + part.length, 0)
  if (parts.length === 1 || size <= ONE_SHOT_MAX_BYTES) return verify(digest, joined(parts), key, signature)
  const verifier = createVerify(digest)
  for (const part of parts) verifier.update(part)
  return verifier.verify(key, signature)
}

/** The bytes of an RSA key's signatures: as many as its modulus. */
export function rsaSignatureBytes (keyObject: KeyObject): number {
  // asymmetricKeyDetails is a native call that builds a new object each time (1% of a signed GET's
  // CPU, profiled): a key's size is read once. Keys are cached objects, so this stays small.
  let bytes = RSA_SIGNATURE_BYTES.get(keyObject)
  if (bytes === undefined) {
    bytes = Math.ceil((keyObject.asymmetricKeyDetails?.modulusLength ?? 0) / 8)
    RSA_SIGNATURE_BYTES.set(keyObject, bytes)
  }
  return bytes
}
const RSA_SIGNATURE_BYTES = new WeakMap<KeyObject, number>()

/**
 * RSASSA-PKCS1-v1_5 with SHA-256 (what `openssl dgst -sha256 -sign` makes) over the concatenation
 * of `data` (several parts are hashed in turn: no copy of a large body).
 */
export function verifyRsaSha256 (keyObject: KeyObject, data: SignedData, signature: Uint8Array): boolean {
  // A signature is exactly as long as the modulus; a shorter or longer one cannot verify.
  if (signature.length !== rsaSignatureBytes(keyObject)) return false
  return verifyDigest('sha256', keyObject, data, signature)
}

/** RSASSA-PSS with SHA-512, MGF1 SHA-512 and a 64-byte salt: RFC 9421's `rsa-pss-sha512`. */
export function verifyRsaPssSha512 (keyObject: KeyObject, data: SignedData, signature: Uint8Array): boolean {
  if (signature.length !== rsaSignatureBytes(keyObject)) return false
  // OpenSSL's MGF1 uses the signature's digest unless told otherwise: SHA-512. RFC 9421 signs with
  // a 64-byte salt; any salt length is taken, as common signers (http-message-signatures) use the
  // longest, and PSS's security does not rest on the verifier fixing it.
  return verifyDigest('sha512', { key: keyObject, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_AUTO }, data, signature)
}

/** An Ed25519 signature's size, and a raw (IEEE P1363, r||s) P-256 one's. */
export const ED25519_SIGNATURE_BYTES = 64
export const P256_RAW_SIGNATURE_BYTES = 64
/** The sizes a DER ECDSA-Sig-Value on P-256 can have: SEQUENCE of two INTEGERs of 1 to 33 bytes. */
export const P256_DER_SIGNATURE_BYTES = { min: 8, max: 72 } as const

/** Ed25519 (RFC 8032, pure): the one-shot verify over the joined data (Ed25519 hashes it twice, so no streaming). */
export function verifyEd25519 (keyObject: KeyObject, data: SignedData, signature: Uint8Array): boolean {
  if (signature.length !== ED25519_SIGNATURE_BYTES) return false
  return verify(null, joined(partsOf(data)), keyObject, signature)
}

/**
 * How an ECDSA signature is written: `der`, an ECDSA-Sig-Value (what `openssl dgst -sha256 -sign`
 * makes; the seed scheme and registration), or `ieee-p1363`, r||s of 32 bytes each (RFC 9421's
 * `ecdsa-p256-sha256`, WebCrypto's).
 */
export type EcdsaSignatureEncoding = 'der' | 'ieee-p1363'

/** A plausible size for the encoding: no verification for a signature that cannot be one. */
function p256SizeFits (signature: Uint8Array, encoding: EcdsaSignatureEncoding): boolean {
  if (encoding === 'ieee-p1363') return signature.length === P256_RAW_SIGNATURE_BYTES
  return signature.length >= P256_DER_SIGNATURE_BYTES.min && signature.length <= P256_DER_SIGNATURE_BYTES.max && signature[0] === 0x30
}

/** ECDSA on P-256 with SHA-256, the signature in `encoding` (default DER). */
export function verifyP256Sha256 (keyObject: KeyObject, data: SignedData, signature: Uint8Array, encoding: EcdsaSignatureEncoding = 'der'): boolean {
  if (!p256SizeFits(signature, encoding)) return false
  return verifyDigest('sha256', { key: keyObject, dsaEncoding: encoding }, data, signature)
}

export interface VerifyOptions {
  /** P-256 only: how the signature is written (default `der`) */
  encoding?: EcdsaSignatureEncoding
}

/**
 * The signature check of each key type, with its algorithm for the seed scheme and registration:
 * RSA PKCS#1 v1.5 SHA-256, Ed25519, ECDSA P-256 SHA-256 (DER unless `encoding` says otherwise).
 */
export function verifyWithKey (keyObject: KeyObject, keyType: KeyType, data: SignedData, signature: Uint8Array, options: VerifyOptions = {}): boolean {
  switch (keyType) {
    case 'rsa': return verifyRsaSha256(keyObject, data, signature)
    case 'ed25519': return verifyEd25519(keyObject, data, signature)
    case 'p256': return verifyP256Sha256(keyObject, data, signature, options.encoding ?? 'der')
  }
}

/** The order n of P-256's base point, and n / 2 (rounded down), as 32 big-endian bytes. */
const P256_ORDER = Buffer.from('ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551', 'hex')
const P256_HALF_ORDER = Buffer.from('7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8', 'hex')
const SCALAR_BYTES = 32

/**
 * One DER INTEGER at `at`, minimally encoded, positive and of at most 32 bytes: where its value
 * starts and where it ends; else undefined.
 */
function derScalar (bytes: Uint8Array, at: number): { start: number; end: number } | undefined {
  const length = bytes[at + 1] ?? 0
  if (bytes[at] !== 0x02 || length < 1 || length > SCALAR_BYTES + 1 || at + 2 + length > bytes.length) return undefined
  const first = bytes[at + 2] ?? 0
  // negative, or a leading zero not needed to keep the next byte's high bit from reading as a sign
  if ((first & 0x80) !== 0 || (first === 0 && length > 1 && ((bytes[at + 3] ?? 0) & 0x80) === 0)) return undefined
  const start = first === 0 && length > 1 ? at + 3 : at + 2
  return at + 2 + length - start > SCALAR_BYTES ? undefined : { start, end: at + 2 + length }
}

/** r || s as 64 bytes (each right-aligned in its 32), from a signature in `encoding`; undefined when it is not one (strict DER). */
function p256Scalars (signature: Uint8Array, encoding: EcdsaSignatureEncoding): Buffer | undefined {
  if (encoding === 'ieee-p1363') return signature.length === P256_RAW_SIGNATURE_BYTES ? Buffer.from(signature) : undefined
  // short-form length only: a P-256 ECDSA-Sig-Value is at most 72 bytes
  if (signature[0] !== 0x30 || signature[1] !== signature.length - 2) return undefined
  const r = derScalar(signature, 2)
  const s = r === undefined ? undefined : derScalar(signature, r.end)
  if (r === undefined || s === undefined || s.end !== signature.length) return undefined
  const out = Buffer.alloc(2 * SCALAR_BYTES)
  out.set(signature.subarray(r.start, r.end), SCALAR_BYTES - (r.end - r.start))
  out.set(signature.subarray(s.start, s.end), 2 * SCALAR_BYTES - (s.end - s.start))
  return out
}

/**
 * One identity per P-256 signature, whatever its spelling: ECDSA signatures are malleable ((r, s)
 * and (r, n - s) both verify, and DER has variants), so whoever saw a signed request could send it
 * again under another signature. This gives r || min(s, n - s) as 64 bytes (low-s form), the same
 * for each of them, by byte arithmetic (~1 us). A signature that cannot be parsed is given back as
 * it is (it cannot verify).
 */
export function canonicalP256Signature (signature: Uint8Array, encoding: EcdsaSignatureEncoding = 'der'): Uint8Array {
  const rs = p256Scalars(signature, encoding)
  if (rs === undefined) return signature
  const s = rs.subarray(SCALAR_BYTES)
  if (Buffer.compare(s, P256_HALF_ORDER) <= 0) return rs
  // s := n - s, big-endian with borrow (s < n for any signature that verifies)
  let borrow = 0
  for (let i = SCALAR_BYTES - 1; i >= 0; i--) {
    const difference = (P256_ORDER[i] ?? 0) - (s[i] ?? 0) - borrow
    borrow = difference < 0 ? 1 : 0
    s[i] = difference & 0xff
  }
  return rs
}
