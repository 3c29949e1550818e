// RFC 9530 Content-Digest: the digests of the body a client sent, checked against the exact bytes
// the gateway received (the bytes it forwards). Parsed with the Structured Fields parser (a
// dictionary of byte sequences); sha-256 and sha-512 are computed, every one present is compared
// (public data: no constant-time compare needed); other algorithms are ignored, and a field with
// only those is refused, as is a field that does not parse. A body keygate is not shown (decision
// mode) is checked by the upstream: keygate refuses only a field no body could match.
import { createHash } from 'node:crypto'
import { parseDictionary } from 'structured-headers'
import { CONTENT_DIGEST_ALGORITHMS, contentDigestValue, type ContentDigestAlgorithm } from '#client/protocol'
import { GatewayError } from '../errors.js'

type Member = ReturnType<typeof parseDictionary> extends Map<string, infer V> ? V : never

const HASH_OF: Readonly<Record<ContentDigestAlgorithm, string>> = { 'sha-256': 'sha256', 'sha-512': 'sha512' }

const isKnown = (name: string): name is ContentDigestAlgorithm => (CONTENT_DIGEST_ALGORITHMS as readonly string[]).includes(name)

/** The Content-Digest value of `body` for one algorithm, as a client should have sent it. */
export function contentDigestOf (algorithm: ContentDigestAlgorithm, body: Uint8Array): string {
  return contentDigestValue(algorithm, createHash(HASH_OF[algorithm]).update(body).digest('base64'))
}

/** `body`: the one received, when keygate is shown it (its length and digests help a client find its mistake). */
function refuse (detail: string, body: Uint8Array | undefined, algorithms: readonly ContentDigestAlgorithm[]): GatewayError {
  return new GatewayError('INVALID_CONTENT_DIGEST', detail, {
    extra: {
      accepted: CONTENT_DIGEST_ALGORITHMS,
      ...(body !== undefined && {
        bodyLength: body.length,
        // what the gateway received, so that a client that re-serialised its body sees it
        computed: algorithms.map((algorithm) => contentDigestOf(algorithm, body)).join(', ')
      })
    }
  })
}

/** The digests of `field` keygate computes; refused when it does not parse, names none of them, or one is no byte sequence. */
function knownDigests (field: string, body: Uint8Array | undefined): Array<[ContentDigestAlgorithm, ArrayBuffer]> {
  let digests: ReturnType<typeof parseDictionary>
  try {
    digests = parseDictionary(field)
  } catch (err) {
    throw refuse(`Content-Digest is not a Structured Fields dictionary (RFC 9651): ${(err as Error).message}; send sha-256=:<base64>:`, body, ['sha-256'])
  }
  const known = [...digests].filter((entry): entry is [ContentDigestAlgorithm, Member] => isKnown(entry[0]))
  if (known.length === 0) {
    throw refuse(`Content-Digest has no digest keygate computes (${[...digests.keys()].join(', ') || 'none'}); ` +
      `send one of ${CONTENT_DIGEST_ALGORITHMS.join(', ')}`, body, ['sha-256'])
  }
  return known.map(([algorithm, [value]]) => {
    if (!(value instanceof ArrayBuffer)) throw refuse(`Content-Digest ${algorithm} must be a byte sequence: ${algorithm}=:<base64>:`, body, [algorithm])
    return [algorithm, value]
  })
}

/** Throws INVALID_CONTENT_DIGEST unless every known digest of `field` is the digest of `body`. */
export function checkContentDigest (field: string, body: Uint8Array): void {
  for (const [algorithm, value] of knownDigests(field, body)) {
    const computed = createHash(HASH_OF[algorithm]).update(body).digest()
    if (!computed.equals(Buffer.from(value))) {
      throw refuse(`Content-Digest ${algorithm} is not the digest of the ${body.length} bytes of body received; ` +
        'compute it over the exact bytes you send (not over a copy serialised again), see computed', body, [algorithm])
    }
  }
}

/**
 * For a body keygate is not shown (decision mode, a route with unseenBody: digest), whose digest
 * the upstream checks: throws INVALID_CONTENT_DIGEST for what checkContentDigest would refuse
 * whatever the body (a field that does not parse, names no algorithm keygate computes, or holds a
 * digest of the wrong length), so the upstream is only ever handed digests it can check.
 */
export function checkUnseenContentDigest (field: string): void {
  for (const [algorithm, value] of knownDigests(field, undefined)) {
    const length = createHash(HASH_OF[algorithm]).digest().length
    if (value.byteLength !== length) {
      throw refuse(`Content-Digest ${algorithm} holds ${value.byteLength} bytes; a ${algorithm} digest holds ${length}`, undefined, [algorithm])
    }
  }
}
