// The little PEM and DER the client needs, without a library: find a key's PEM block, read which
// algorithm (and curve) a PKCS#8 or SPKI key is for, wrap a PKCS#1 RSA key (what "BEGIN RSA
// PRIVATE KEY" and "BEGIN RSA PUBLIC KEY" hold) or a SEC1 EC key ("BEGIN EC PRIVATE KEY") into
// the PKCS#8 or SPKI that WebCrypto imports, and turn WebCrypto's raw ECDSA signature (r || s)
// into the DER one that openssl and the seed scheme use.
import { type Bytes, concatBytes, fromBase64, toBase64 } from './bytes.js'

export interface PemBlock {
  /** "PRIVATE KEY", "RSA PRIVATE KEY", "PUBLIC KEY", ... */
  label: string
  /** RFC 1421 headers ("Proc-Type: 4,ENCRYPTED"): an OpenSSL-encrypted traditional key */
  encrypted: boolean
  /** the DER inside, or undefined when the body is not base64 */
  der: Bytes | undefined
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g

export function pemBlocks (text: string): PemBlock[] {
  return [...text.matchAll(PEM_BLOCK)].map((match) => {
    const lines = (match[2] ?? '').split(/\r?\n/)
    const encrypted = lines.some((line) => /^Proc-Type:.*ENCRYPTED/i.test(line.trim()))
    const body = lines.filter((line) => !line.includes(':')).join('')
    return { label: match[1] ?? '', encrypted, der: fromBase64(body) }
  })
}

export function pem (label: string, der: Uint8Array): string {
  const lines = toBase64(der).match(/.{1,64}/g) ?? []
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`
}

interface Tlv { tag: number; start: number; end: number }

/** The tag-length-value at `offset`: its content runs from start to end. Undefined when it overruns `limit`. */
function readTlv (der: Uint8Array, offset: number, limit: number): Tlv | undefined {
  if (offset + 2 > limit) return undefined
  const tag = der[offset] ?? 0
  let length = der[offset + 1] ?? 0
  let start = offset + 2
  if (length >= 0x80) {
    const count = length & 0x7f
    if (count === 0 || count > 4 || start + count > limit) return undefined
    length = 0
    for (let i = 0; i < count; i++) length = length * 256 + (der[start + i] ?? 0)
    start += count
  }
  return start + length > limit ? undefined : { tag, start, end: start + length }
}

const SEQUENCE = 0x30

/** One DER SEQUENCE and nothing after it: the least a PKCS#1 key must be. */
export function isSequence (der: Uint8Array): boolean {
  const outer = readTlv(der, 0, der.length)
  return outer?.tag === SEQUENCE && outer.end === der.length
}

const OID = 0x06

/**
 * The algorithm OID ("1.2.840.113549.1.1.1") of a PKCS#8 PrivateKeyInfo or a SubjectPublicKeyInfo,
 * or undefined when the DER is not one.
 */
export function keyAlgorithmOid (der: Uint8Array, kind: 'pkcs8' | 'spki'): string | undefined {
  return keyAlgorithm(der, kind)?.oid
}

/**
 * The algorithm OID of a PKCS#8 PrivateKeyInfo or a SubjectPublicKeyInfo, and its parameters when
 * they are an OID (an EC key's named curve, "1.2.840.10045.3.1.7" for P-256); undefined when the
 * DER is not one.
 */
export function keyAlgorithm (der: Uint8Array, kind: 'pkcs8' | 'spki'): { oid: string; parameter: string | undefined } | undefined {
  const outer = readTlv(der, 0, der.length)
  if (outer?.tag !== SEQUENCE || outer.end !== der.length) return undefined
  let at = outer.start
  if (kind === 'pkcs8') {
    const version = readTlv(der, at, outer.end)
    if (version?.tag !== 0x02) return undefined
    at = version.end
  }
  const algorithm = readTlv(der, at, outer.end)
  if (algorithm?.tag !== SEQUENCE) return undefined
  const oid = readTlv(der, algorithm.start, algorithm.end)
  if (oid?.tag !== OID || oid.end === oid.start) return undefined
  const parameter = readTlv(der, oid.end, algorithm.end)
  return {
    oid: dotted(der.subarray(oid.start, oid.end)),
    parameter: parameter?.tag === OID && parameter.end > parameter.start ? dotted(der.subarray(parameter.start, parameter.end)) : undefined
  }
}

/**
 * The named curve of a SEC1 ECPrivateKey ("BEGIN EC PRIVATE KEY"): SEQUENCE { INTEGER 1, OCTET
 * STRING, [0] { OID } OPTIONAL, ... }. Undefined when the DER is not one or names no curve.
 */
export function sec1Curve (der: Uint8Array): string | undefined {
  const outer = readTlv(der, 0, der.length)
  if (outer?.tag !== SEQUENCE || outer.end !== der.length) return undefined
  const version = readTlv(der, outer.start, outer.end)
  if (version?.tag !== 0x02) return undefined
  const secret = readTlv(der, version.end, outer.end)
  if (secret?.tag !== 0x04) return undefined
  const parameters = readTlv(der, secret.end, outer.end)
  if (parameters?.tag !== 0xa0) return undefined
  const oid = readTlv(der, parameters.start, parameters.end)
  return oid?.tag === OID && oid.end > oid.start ? dotted(der.subarray(oid.start, oid.end)) : undefined
}

function dotted (oid: Uint8Array): string {
  const first = oid[0] ?? 0
  const arcs = [Math.min(2, Math.floor(first / 40)), first - Math.min(2, Math.floor(first / 40)) * 40]
  let arc = 0
  for (const byte of oid.subarray(1)) {
    arc = arc * 128 + (byte & 0x7f)
    if (byte < 0x80) {
      arcs.push(arc)
      arc = 0
    }
  }
  return arcs.join('.')
}

export const RSA_OID = '1.2.840.113549.1.1.1'
export const EC_OID = '1.2.840.10045.2.1'
export const ED25519_OID = '1.3.101.112'
export const P256_OID = '1.2.840.10045.3.1.7'

const ALGORITHM_NAMES: Record<string, string> = {
  [RSA_OID]: 'RSA',
  '1.2.840.113549.1.1.10': 'RSA-PSS',
  '1.2.840.10045.2.1': 'EC',
  '1.2.840.10040.4.1': 'DSA',
  '1.2.840.113549.1.3.1': 'DH',
  '1.3.101.110': 'X25519',
  '1.3.101.111': 'X448',
  '1.3.101.112': 'Ed25519',
  '1.3.101.113': 'Ed448'
}

const CURVE_NAMES: Record<string, string> = {
  [P256_OID]: 'P-256',
  '1.3.132.0.34': 'P-384',
  '1.3.132.0.35': 'P-521',
  '1.3.132.0.10': 'secp256k1'
}

/** "P-384", "secp256k1", ... or the OID itself */
export function curveName (oid: string | undefined): string {
  return oid === undefined ? 'unnamed curve' : CURVE_NAMES[oid] ?? `curve OID ${oid}`
}

/** "EC", "Ed25519", ... or the OID itself */
export function algorithmName (oid: string): string {
  return ALGORITHM_NAMES[oid] ?? `OID ${oid}`
}

function tlv (tag: number, ...contents: Uint8Array[]): Bytes {
  const length = contents.reduce((sum, part) => sum + part.length, 0)
  const lengthBytes: number[] = []
  if (length < 0x80) {
    lengthBytes.push(length)
  } else {
    for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) lengthBytes.unshift(rest % 256)
    lengthBytes.unshift(0x80 | lengthBytes.length)
  }
  return concatBytes([Uint8Array.of(tag, ...lengthBytes), ...contents])
}

// AlgorithmIdentifier { rsaEncryption, NULL }
const RSA_ALGORITHM = tlv(SEQUENCE, Uint8Array.of(0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01), Uint8Array.of(0x05, 0x00))

/** PKCS#1 RSAPrivateKey -> PKCS#8 PrivateKeyInfo: SEQUENCE { INTEGER 0, RSA_ALGORITHM, OCTET STRING { pkcs1 } } */
export function pkcs8OfPkcs1 (pkcs1: Uint8Array): Bytes {
  return tlv(SEQUENCE, Uint8Array.of(0x02, 0x01, 0x00), RSA_ALGORITHM, tlv(0x04, pkcs1))
}

/** PKCS#1 RSAPublicKey -> SubjectPublicKeyInfo: SEQUENCE { RSA_ALGORITHM, BIT STRING { no unused bits, pkcs1 } } */
export function spkiOfPkcs1 (pkcs1: Uint8Array): Bytes {
  return tlv(SEQUENCE, RSA_ALGORITHM, tlv(0x03, Uint8Array.of(0x00), pkcs1))
}

// AlgorithmIdentifier { id-ecPublicKey, prime256v1 }
const P256_ALGORITHM = tlv(SEQUENCE, Uint8Array.of(0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01),
  Uint8Array.of(0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07))

/** SEC1 ECPrivateKey of a P-256 key -> PKCS#8 PrivateKeyInfo: SEQUENCE { INTEGER 0, P256_ALGORITHM, OCTET STRING { sec1 } } */
export function pkcs8OfSec1P256 (sec1: Uint8Array): Bytes {
  return tlv(SEQUENCE, Uint8Array.of(0x02, 0x01, 0x00), P256_ALGORITHM, tlv(0x04, sec1))
}

/** One unsigned big-endian integer as a minimal DER INTEGER: no leading zero bytes, one 0x00 when the top bit is set. */
function derInteger (unsigned: Uint8Array): Bytes {
  let start = 0
  while (start < unsigned.length - 1 && unsigned[start] === 0) start++
  const trimmed = unsigned.subarray(start)
  return (trimmed[0] ?? 0) >= 0x80 ? tlv(0x02, Uint8Array.of(0), trimmed) : tlv(0x02, trimmed)
}

/** WebCrypto's ECDSA signature (r || s, each half the same length) -> DER SEQUENCE { INTEGER r, INTEGER s }, what openssl makes. */
export function derOfRawEcdsa (raw: Uint8Array): Bytes {
  const half = raw.length / 2
  return tlv(SEQUENCE, derInteger(raw.subarray(0, half)), derInteger(raw.subarray(half)))
}
