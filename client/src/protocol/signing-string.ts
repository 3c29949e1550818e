// The signing string of the X-API-Key / X-API-Timestamp / X-API-Signature scheme, in one place for
// both sides: the gateway verifies over it and the client signs over it. timestamp + METHOD + raw
// request target + raw body, no separators.

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
