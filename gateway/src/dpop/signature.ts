// A DPoP proof's key and signature, with node:crypto and no promise: the proof's `jwk` as a public
// key of the type its `alg` names (an EC key on that alg's curve, an Ed25519 or Ed448 key, an RSA
// key of 2048 bits or more), its RFC 7638 thumbprint, and the JWS signature (RFC 7515, 7518, 8037)
// over the first two parts. jose does the same through WebCrypto, asynchronously: measured here,
// twice the time per proof (docs/dpop.md "What a proof costs"); the unit tests check both agree.
import { constants, createPublicKey, verify, type KeyObject } from 'node:crypto'
import { jwkThumbprint, THUMBPRINT_MEMBERS } from '../lib/jwk-thumbprint.js'
import { LruCache } from '../lib/lru-cache.js'

interface AlgorithmRule {
  kty: 'EC' | 'OKP' | 'RSA'
  /** the curves its key may be on (EC, OKP) */
  curves?: readonly string[]
  /** the digest (null: EdDSA hashes itself) */
  hash: string | null
  pss?: boolean
}

const RULES: Readonly<Record<string, AlgorithmRule>> = {
  ES256: { kty: 'EC', curves: ['P-256'], hash: 'sha256' },
  ES384: { kty: 'EC', curves: ['P-384'], hash: 'sha384' },
  ES512: { kty: 'EC', curves: ['P-521'], hash: 'sha512' },
  EdDSA: { kty: 'OKP', curves: ['Ed25519', 'Ed448'], hash: null },
  Ed25519: { kty: 'OKP', curves: ['Ed25519'], hash: null },
  RS256: { kty: 'RSA', hash: 'sha256' },
  RS384: { kty: 'RSA', hash: 'sha384' },
  RS512: { kty: 'RSA', hash: 'sha512' },
  PS256: { kty: 'RSA', hash: 'sha256', pss: true },
  PS384: { kty: 'RSA', hash: 'sha384', pss: true },
  PS512: { kty: 'RSA', hash: 'sha512', pss: true }
}

/** the smallest RSA modulus a proof's key may have (as jose, and RFC 7518 §3.3) */
const MIN_RSA_BITS = 2048
/**
 * the longest RSA public exponent, base64url (4 bytes; 65537 is "AQAB"): a verification costs one
 * squaring per bit of `e`, and openssl bounds `e` only above 3072-bit moduli, so a 3072-bit key
 * with a 3071-bit `e` made each verification about 100 times dearer (6 ms), unauthenticated, at the
 * token endpoint, whose proofs are bound to no key yet
 */
const MAX_RSA_EXPONENT_CHARS = 6
const SALT_BYTES: Readonly<Record<string, number>> = { sha256: 32, sha384: 48, sha512: 64 }

/**
 * Proof keys imported, by thumbprint: a client signs every request's proof with one key, and
 * importing it is a fifth of a proof's cost. Safe to keep: the thumbprint is the SHA-256 of the
 * very members the key is made of, and a key is public; only keys that passed the checks are kept.
 */
const IMPORTED = new LruCache<string, KeyObject>(10_000)

/** The proof's key, for `alg`: its thumbprint and the key; a string says why it is not one. */
export function proofKey (jwk: Record<string, unknown>, alg: string): { key: KeyObject, thumbprint: string } | string {
  const rule = RULES[alg]
  if (rule === undefined) return `keygate does not verify ${alg}`
  if (jwk.kty !== rule.kty) return `its alg ${alg} takes a key of type ${rule.kty}, not ${String(jwk.kty)}`
  if (rule.curves !== undefined && !rule.curves.includes(jwk.crv as string)) return `its alg ${alg} takes a key on ${rule.curves.join(' or ')}`
  const members = THUMBPRINT_MEMBERS[rule.kty] as readonly string[]
  if (members.some((name) => typeof jwk[name] !== 'string')) return `its ${rule.kty} key lacks ${members.join(', ')}`
  if (rule.kty === 'RSA' && (jwk.e as string).length > MAX_RSA_EXPONENT_CHARS) return 'its RSA public exponent (e) is longer than 4 bytes'
  const thumbprint = jwkThumbprint(jwk) as string
  let key = IMPORTED.get(thumbprint)
  if (key !== undefined) return { key, thumbprint }
  try {
    key = createPublicKey({ key: jwk as never, format: 'jwk' })
  } catch {
    return 'it is not a public key node can read'
  }
  if (rule.kty === 'RSA' && (key.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_RSA_BITS) return `its RSA key has fewer than ${MIN_RSA_BITS} bits`
  IMPORTED.set(thumbprint, key)
  return { key, thumbprint }
}

/** Whether the compact JWS `proof`'s signature verifies with `key` by `alg` (proofKey made the key for it). */
export function signatureVerifies (proof: string, key: KeyObject, alg: string): boolean {
  const rule = RULES[alg] as AlgorithmRule
  const dot = proof.lastIndexOf('.')
  const input = Buffer.from(proof.slice(0, dot), 'ascii')
  const signature = Buffer.from(proof.slice(dot + 1), 'base64url')
  try {
    if (rule.kty === 'EC') return verify(rule.hash, input, { key, dsaEncoding: 'ieee-p1363' }, signature)
    if (rule.pss === true) {
      return verify(rule.hash, input, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: SALT_BYTES[rule.hash as string] as number }, signature)
    }
    return verify(rule.hash, input, key, signature)
  } catch {
    // a signature of the wrong length for the key, or bytes openssl will not read: not a signature by it
    return false
  }
}
