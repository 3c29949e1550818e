// The signing string of the X-API-Key / X-API-Timestamp / X-API-Signature scheme, in one place for
// both sides: the gateway verifies over it and the client signs over it. timestamp + METHOD + raw
// request target + raw body, no separators; and the rule that makes that concatenation read one
// way only (seedBodyProblem).
import { TARGET_CHARACTER } from './request-target.js'

/**
 * UTF-8, which is the identity on ASCII: the gateway refuses any target that is not made of URI
 * characters (requestTargetProblem) and any timestamp that is not digits before it gets here, and
 * the client checks both before it signs.
 */
const utf8 = new TextEncoder()
const EMPTY = new Uint8Array(0)

/**
 * timestamp + METHOD + raw request target + raw body, as bytes. The target is the request line's,
 * undecoded, query included. The body is appended as its own part: no copy of a large body.
 */
export function signingString (timestamp: string, method: string, target: string, body: Uint8Array | undefined): Uint8Array[] {
  const head = utf8.encode(timestamp + method + target)
  return body === undefined || body.length === 0 ? [head] : [head, body]
}

/**
 * What a signing string is made of, minus anything secret: what keygate tells a client whose
 * signature does not verify, and what the client computes on its side to compare (one glance:
 * the first member that differs is the mistake; all equal means another key signed).
 */
export interface SigningStringDetails {
  timestamp: string
  method: string
  target: string
  bodyLength: number
  /** lowercase hex SHA-256 of the body's exact bytes (of the empty string without a body) */
  bodySha256: string
  signingStringLength: number
  /** lowercase hex SHA-256 of the whole signing string, exactly as signed */
  signingStringSha256: string
}

/** lowercase hex SHA-256 of the parts, hashed in turn: each runtime brings its own */
export type Sha256Hex = (parts: readonly Uint8Array[]) => string
/** the same, for runtimes whose hash is asynchronous (WebCrypto's crypto.subtle.digest) */
export type Sha256HexAsync = (parts: readonly Uint8Array[]) => Promise<string>

/**
 * Costs two hashes over the body: for failures and debugging, never for a request that verifies.
 * With a synchronous hash (the gateway's node:crypto) the answer is synchronous; with an
 * asynchronous one (the client's WebCrypto), a promise of it.
 */
export function describeSigningString (timestamp: string, method: string, target: string, body: Uint8Array | undefined,
  sha256Hex: Sha256Hex): SigningStringDetails
export function describeSigningString (timestamp: string, method: string, target: string, body: Uint8Array | undefined,
  sha256Hex: Sha256HexAsync): Promise<SigningStringDetails>
export function describeSigningString (timestamp: string, method: string, target: string, body: Uint8Array | undefined,
  sha256Hex: Sha256Hex | Sha256HexAsync): SigningStringDetails | Promise<SigningStringDetails> {
  const bytes = body ?? EMPTY
  const parts = signingString(timestamp, method, target, bytes)
  const details = (bodySha256: string, signingStringSha256: string): SigningStringDetails => ({
    timestamp,
    method,
    target,
    bodyLength: bytes.length,
    bodySha256,
    signingStringLength: parts.reduce((sum, part) => sum + part.length, 0),
    signingStringSha256
  })
  const bodyHash = sha256Hex([bytes])
  const wholeHash = sha256Hex(parts)
  if (typeof bodyHash === 'string' && typeof wholeHash === 'string') return details(bodyHash, wholeHash)
  return Promise.all([bodyHash, wholeHash]).then(([bodySha256, signingStringSha256]) => details(bodySha256, signingStringSha256))
}

/** Which bytes the target rule admits in a target: all of them ASCII, so a byte table of 128. */
const IN_TARGET = new Uint8Array(128).map((_, byte) => TARGET_CHARACTER.test(String.fromCharCode(byte)) ? 1 : 0)

/** Whether the target rule (requestTargetProblem) admits this byte in a request target. */
export function isTargetByte (byte: number): boolean {
  return byte < 128 && IN_TARGET[byte] === 1
}

/** `"4" (0x34)`, or `0x0a` for a byte that does not print */
function describeByte (byte: number): string {
  const hex = `0x${byte.toString(16).padStart(2, '0')}`
  return byte > 0x20 && byte < 0x7f ? `${JSON.stringify(String.fromCharCode(byte))} (${hex})` : hex
}

/**
 * A signed route's seed body rule (its seedBodyBoundary): enforced (the default: seedBodyProblem
 * refuses), or unchecked (a body starting with a target byte is verified anyway, and one signature
 * then authorizes other requests).
 */
export const SEED_BODY_BOUNDARIES = ['enforced', 'unchecked'] as const
export type SeedBodyBoundary = (typeof SEED_BODY_BOUNDARIES)[number]

/**
 * Why keygate refuses this body under the seed scheme (400 AMBIGUOUS_SIGNED_BODY), or undefined.
 * The signing string has no separator between target and body, so a body that starts with a byte
 * a target may hold could have been the target's end, and vice versa: one signature would then
 * authorize several requests (DELETE /v1/clients/42 is also DELETE /v1/clients/ with body "42").
 * When a non-empty body starts with a byte no target holds, moving bytes into the target makes
 * an invalid target, and moving them out makes a body that starts with a target byte: the split
 * is unique. The method and timestamp are fixed by their own rules (letters, digits).
 */
export function seedBodyProblem (body: Uint8Array | undefined): string | undefined {
  const first = body?.[0]
  if (first === undefined || !isTargetByte(first)) return undefined
  return `The body starts with ${describeByte(first)}, a byte a request target may hold. The seed scheme signs timestamp + METHOD + target + body ` +
    'with no separator, so bytes could move between the end of the target and the start of the body and the same signature would ' +
    'authorize another request. With the seed scheme, a body must start with a byte no target holds ("{", "[", a quote, whitespace, ...); ' +
    'sign a body that must start otherwise with RFC 9421 HTTP Message Signatures (Signature-Input covering content-digest, RFC 9530)'
}
