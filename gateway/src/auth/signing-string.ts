// The signing string of SPEC.md §5, in one place for both sides: the gateway verifies over it and
// the client module (keygate/client) signs over it. Dependency-free (node:crypto only), so the
// client module can import it without the gateway.
import { createHash } from 'node:crypto'

/**
 * X-API-Timestamp: 13 to 15 digits, milliseconds since the epoch from 2001-09-09 to year 33658.
 * Fewer digits are almost always seconds (10 digits), the classic client mistake.
 */
export const MILLISECONDS_TIMESTAMP = /^[1-9][0-9]{12,14}$/

/**
 * timestamp + METHOD + raw request target + raw body, as bytes. The target is the request line's,
 * undecoded, query included (CONTRACT.md); targets are restricted to URI characters, so latin1 is
 * the identity on them. The body is appended as its own part: no copy of a large body.
 */
export function signingString (timestamp: string, method: string, target: string, body: Buffer | undefined): Buffer[] {
  const head = Buffer.from(timestamp + method + target, 'latin1')
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

/** Costs two hashes over the body: for failures and debugging, never for a request that verifies. */
export function describeSigningString (timestamp: string, method: string, target: string, body: Buffer | undefined): SigningStringDetails {
  const bytes = body ?? Buffer.alloc(0)
  const whole = createHash('sha256')
  let length = 0
  for (const part of signingString(timestamp, method, target, bytes)) {
    whole.update(part)
    length += part.length
  }
  return {
    timestamp,
    method,
    target,
    bodyLength: bytes.length,
    bodySha256: createHash('sha256').update(bytes).digest('hex'),
    signingStringLength: length,
    signingStringSha256: whole.digest('hex')
  }
}
