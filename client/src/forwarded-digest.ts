// For an upstream behind keygate in decision mode (behind nginx or Caddy): keygate allowed an RFC
// 9421 request whose body it was never shown, because the signature covers Content-Digest; the
// proxy passes that signed value on as X-Keygate-Content-Digest, and the upstream, which does
// receive the body, must check that the body is the one digested. This is that check: a strict
// reading of the RFC 9530 dictionary (every member `name=:base64:`, nothing else), the digests of
// the exact bytes received by WebCrypto, compared. It runs wherever the rest of the client runs.
import { fromBase64, isArrayBuffer, isUint8Array, ownBytes, toBase64 } from './bytes.js'
import { bodyDigest } from './message-signing.js'
import { CONTENT_DIGEST_ALGORITHMS, contentDigestValue, FORWARDED_DIGEST_HEADER, type ContentDigestAlgorithm } from './protocol/index.js'

/** The header keygate's allowed decision sets (and the proxy copies onto the upstream request) when the upstream must check the body. */
export { FORWARDED_DIGEST_HEADER }

/**
 * A request's headers: Node.js's `req.headers` (lowercase names; a list for a repeated header) or
 * any object with `get(name)`, such as fetch's `Headers` (Deno, Bun, Cloudflare Workers).
 */
export type ForwardedHeaders =
  | { get: (name: string) => string | null | undefined }
  | Readonly<Record<string, string | readonly string[] | undefined>>

/** Why a forwarded digest refuses the body. */
export type ForwardedDigestProblem =
  /** the header is not a dictionary of `name=:base64:` members (RFC 9530), or names an algorithm twice */
  | 'malformed'
  /** no sha-256 or sha-512 member: nothing this check can compute */
  | 'no-known-algorithm'
  /** a sha-256 or sha-512 member is not the digest of the body received */
  | 'mismatch'

export type ForwardedDigestCheck =
  /** no X-Keygate-Content-Digest: keygate saw the body itself (or there is none), so there is nothing to check here */
  | { ok: true; checked: false }
  /** every known digest of the header is the body's */
  | { ok: true; checked: true; algorithms: ContentDigestAlgorithm[] }
  /** refuse the request (400): the body is not the one the client signed, or the header cannot be read */
  | { ok: false; reason: ForwardedDigestProblem; message: string }

const isKnown = (name: string): name is ContentDigestAlgorithm => (CONTENT_DIGEST_ALGORITHMS as readonly string[]).includes(name)

/** One dictionary member as RFC 9530 writes it: an sf-key, `=`, a byte sequence (RFC 9651 §3.3.5), no parameters. */
const MEMBER = /^([a-z*][a-z0-9_\-.*]*)=:([A-Za-z0-9+/]*={0,2}):$/
/** optional whitespace around a member (RFC 9651 §4.2.2; the field's own ends included) */
const OWS_AROUND = /^[ \t]+|[ \t]+$/g

/** The header's value, its lines joined as one field (RFC 9110 §5.3); undefined when it is absent. */
function headerValue (headers: ForwardedHeaders): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const value = (headers as { get: (name: string) => string | null | undefined }).get(FORWARDED_DIGEST_HEADER)
    return value ?? undefined
  }
  const lines: string[] = []
  for (const [name, value] of Object.entries(headers as Readonly<Record<string, string | readonly string[] | undefined>>)) {
    if (name.toLowerCase() !== FORWARDED_DIGEST_HEADER || value === undefined) continue
    if (typeof value === 'string') lines.push(value)
    else lines.push(...value)
  }
  return lines.length === 0 ? undefined : lines.join(', ')
}

function bodyBytes (body: unknown): Uint8Array<ArrayBuffer> {
  if (isUint8Array(body)) return ownBytes(body)
  if (isArrayBuffer(body)) return new Uint8Array(body)
  throw new TypeError('body: must be the exact bytes received, a Uint8Array (a Buffer is one) or an ArrayBuffer, ' +
    `not ${body === null ? 'null' : typeof body}: a body parsed and serialised again is not the body the client signed ` +
    '(with Express, read it with express.raw())')
}

/** The digests by algorithm, or the problem: a member that is not `name=:base64:`, or one name twice, is malformed. */
function parse (value: string): Map<string, Uint8Array> | { reason: ForwardedDigestProblem; message: string } {
  const digests = new Map<string, Uint8Array>()
  const trimmed = value.replace(OWS_AROUND, '')
  if (trimmed === '') return digests
  for (const raw of trimmed.split(',')) {
    const member = raw.replace(OWS_AROUND, '')
    const match = MEMBER.exec(member)
    const digest = match === null ? undefined : fromBase64(match[2] as string)
    if (match === null || digest === undefined) {
      return {
        reason: 'malformed',
        message: `${FORWARDED_DIGEST_HEADER} member ${JSON.stringify(member.slice(0, 100))} is not name=:base64: (RFC 9530); ` +
          'the signed Content-Digest must be a dictionary of byte sequences, e.g. sha-256=:<base64>:'
      }
    }
    const name = match[1] as string
    if (digests.has(name)) {
      return { reason: 'malformed', message: `${FORWARDED_DIGEST_HEADER} names ${name} twice: which digest the client meant cannot be told` }
    }
    digests.set(name, digest)
  }
  return digests
}

/**
 * Checks a request's body against the Content-Digest keygate forwarded (X-Keygate-Content-Digest):
 * every sha-256 and sha-512 member must be the digest of `body`, the exact bytes received, and at
 * least one must be there; other algorithms are ignored. Without the header there is nothing to
 * check (`{ ok: true, checked: false }`): keygate saw the body itself, or the request has none.
 * Resolves `{ ok: false, reason, message }` for a body to refuse; throws a TypeError when `body` is
 * not bytes.
 */
export async function checkForwardedDigest (headers: ForwardedHeaders, body: Uint8Array | ArrayBuffer): Promise<ForwardedDigestCheck> {
  const bytes = bodyBytes(body)
  const value = headerValue(headers)
  if (value === undefined) return { ok: true, checked: false }
  const digests = parse(value)
  if (!(digests instanceof Map)) return { ok: false, ...digests }
  const known = [...digests].filter((entry): entry is [ContentDigestAlgorithm, Uint8Array] => isKnown(entry[0]))
  if (known.length === 0) {
    return {
      ok: false,
      reason: 'no-known-algorithm',
      message: `${FORWARDED_DIGEST_HEADER} has no digest this check computes (${[...digests.keys()].join(', ') || 'none'}); ` +
        `it computes ${CONTENT_DIGEST_ALGORITHMS.join(', ')}`
    }
  }
  for (const [algorithm, given] of known) {
    const computed = await bodyDigest(algorithm, bytes)
    // the digests are of public data: no constant-time compare is needed
    if (given.length !== computed.length || given.some((byte, at) => byte !== computed[at])) {
      return {
        ok: false,
        reason: 'mismatch',
        message: `${FORWARDED_DIGEST_HEADER} ${algorithm} is not the digest of the ${bytes.length} bytes of body received, ` +
          `whose digest is ${contentDigestValue(algorithm, toBase64(computed))}: the body is not the one the client signed`
      }
    }
  }
  return { ok: true, checked: true, algorithms: known.map(([algorithm]) => algorithm) }
}
