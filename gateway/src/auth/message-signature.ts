// RFC 9421: the verification of a request's chosen signature. In order: the components it must
// cover, its Content-Digest against the body received, its algorithm against the key, then the
// signature over the signature base (built by the protocol code the client signs with). A failure
// answers with the base the gateway verified (its lines and SHA-256), never a secret.
import { createHash, type KeyObject } from 'node:crypto'
import {
  ALGORITHMS_OF_KEY_TYPE, ComponentError, MESSAGE_SIGNATURE_ALGORITHMS, requestComponentValue, SAFE_METHODS, signatureBase,
  type ComponentId, type MessageSignatureAlgorithm, type SignedMessage
} from '#client/protocol'
import { GatewayError } from '../errors.js'
import {
  ED25519_SIGNATURE_BYTES, keyTypeOf, P256_RAW_SIGNATURE_BYTES, rsaSignatureBytes, verifyEd25519, verifyP256Sha256, verifyRsaPssSha512, verifyRsaSha256
} from '../keys/public-key.js'
import { checkContentDigest, checkUnseenContentDigest } from './content-digest.js'
import { bodyBytes, hasBody, UNSEEN_BODY, type DescribedRequest } from './described-request.js'
import type { MessageSignatureInput } from './message-signature-headers.js'
import { required, type AuthStage, type AuthState } from './stage.js'

/** The length in bytes of a signature by `keyObject` with `alg`. */
export function signatureLength (keyObject: KeyObject, alg: MessageSignatureAlgorithm): number {
  return alg.startsWith('rsa-') ? rsaSignatureBytes(keyObject) : alg === 'ed25519' ? ED25519_SIGNATURE_BYTES : P256_RAW_SIGNATURE_BYTES
}

/**
 * Verifies `signature` over `data` with `alg` (RFC 9421 §3.3), by the keys layer's one verification
 * per algorithm: RSASSA-PKCS1-v1_5 with SHA-256, RSASSA-PSS with SHA-512, Ed25519, ECDSA P-256
 * with SHA-256 (r||s, 64 bytes). The caller has checked that `alg` suits the key.
 */
export function verifyMessageSignature (keyObject: KeyObject, alg: MessageSignatureAlgorithm, data: Uint8Array, signature: Uint8Array): boolean {
  try {
    switch (alg) {
      case 'rsa-v1_5-sha256': return verifyRsaSha256(keyObject, data, signature)
      case 'rsa-pss-sha512': return verifyRsaPssSha512(keyObject, data, signature)
      case 'ed25519': return verifyEd25519(keyObject, data, signature)
      case 'ecdsa-p256-sha256': return verifyP256Sha256(keyObject, data, signature, 'ieee-p1363')
    }
  } catch {
    return false
  }
}

/** The algorithm to verify with: `alg` when it suits the key, the key type's own when absent; else INVALID_SIGNATURE. */
export function algorithmFor (keyObject: KeyObject, input: Pick<MessageSignatureInput, 'alg' | 'label'>): MessageSignatureAlgorithm {
  const type = keyTypeOf(keyObject)
  const accepted = type === undefined ? [] : ALGORITHMS_OF_KEY_TYPE[type]
  if (input.alg === undefined && accepted[0] !== undefined) return accepted[0]
  const alg = accepted.find((name) => name === input.alg)
  if (alg !== undefined) return alg
  const known = (MESSAGE_SIGNATURE_ALGORITHMS as readonly string[]).includes(input.alg ?? '')
  throw new GatewayError('INVALID_SIGNATURE', `Signature-Input ${input.label}: alg ${JSON.stringify(input.alg)} ` +
    `${known ? 'does not suit' : 'is not an algorithm of'} the key of keyid (${type ?? 'unknown'}); accepted: ${accepted.join(', ')}, or no alg`, {
    extra: { label: input.label, alg: input.alg, acceptedAlgorithms: accepted }
  })
}

/**
 * What a request's component values are read from: the raw target, the field lines, and the
 * scheme and host the client used (as the mode that described the request found them).
 */
export function signedMessage (request: DescribedRequest): SignedMessage {
  return {
    method: request.method,
    target: request.target,
    scheme: request.scheme,
    authority: request.authority,
    field: (name) => request.field(name)
  }
}

/**
 * The components a signature must cover: @method; @target-uri, or @path (and @query when the
 * target has a query), or @request-target; content-digest when there is a body. The ones missing.
 */
export function missingComponents (components: readonly ComponentId[], target: string, hasBody: boolean): string[] {
  const covered = new Set(components.map((component) => component.name))
  const missing: string[] = []
  if (!covered.has('@method')) missing.push('@method')
  if (!covered.has('@target-uri') && !covered.has('@request-target')) {
    if (!covered.has('@path')) missing.push('@target-uri or @path')
    if (target.includes('?') && !covered.has('@query')) missing.push('@query')
  }
  if (hasBody && !covered.has('content-digest')) missing.push('content-digest')
  return missing
}

/** The signature base of `input` over `message` (RFC 9421 §2.5); ComponentError when a component cannot be supplied. */
export function messageSignatureBase (message: SignedMessage, input: Pick<MessageSignatureInput, 'components' | 'signatureParams'>): string {
  return signatureBase(input.components.map((component) => [component, requestComponentValue(message, component)] as const), input.signatureParams)
}

/** The replay identity of a verified RFC 9421 signature: its key and its base (ECDSA and PSS signatures differ each time). */
export function replayIdOf (apiKey: string, base: string): string {
  return createHash('sha256').update('rfc9421\n').update(apiKey).update('\n').update(base).digest('hex')
}

const ADVICE = 'The signature does not verify with the key of keyid over the signature base described here. ' +
  'Compare signatureBaseSha256 with the SHA-256 of the exact base you signed; if they differ, compare your base with signatureBase ' +
  'line by line: the first line that differs is the mistake (@path or @target-uri as the gateway sees them, a field value, ' +
  'the @signature-params line). If the hashes are equal, you signed with another private key than the one registered as keyid, ' +
  'or with another algorithm than alg'

function invalidSignature (
  detail: string, input: MessageSignatureInput, alg: string | undefined, base: string | undefined, extra: Record<string, unknown> = {}
): GatewayError {
  return new GatewayError('INVALID_SIGNATURE', detail, {
    extra: {
      label: input.label,
      keyid: input.keyid,
      ...(alg !== undefined && { alg }),
      ...(base !== undefined && {
        signatureBaseSha256: createHash('sha256').update(base).digest('hex'),
        signatureBase: base.split('\n')
      }),
      ...extra
    }
  })
}

/**
 * The chosen RFC 9421 signature, verified. `observeVerification` gets the seconds the verification
 * took (the metrics); `onFailure` hears of each signature that did not verify (the budget).
 */
export function messageSignatureStage (
  observeVerification?: (seconds: number) => void, onFailure?: (request: DescribedRequest, state: AuthState) => void
): AuthStage {
  return {
    name: 'signature',
    needsBody: true,
    run (request, state) {
      const input = required(state.messageSignature, 'the RFC 9421 signature', 'signature')
      const key = required(state.key, 'the key', 'signature')
      const message = signedMessage(request)
      const missing = missingComponents(input.components, message.target, hasBody(request))
      if (missing.length > 0) {
        throw invalidSignature(`Signature-Input ${input.label} must cover ${missing.join(', ')}: ` +
          'keygate verifies only signatures that cover the method, the target and the body (through content-digest)',
        input, input.alg, undefined, { missingComponents: missing })
      }
      const digest = message.field('content-digest')
      // A body keygate is not shown (decision mode behind nginx or Caddy, on a route that allows it)
      // is covered through content-digest, as checked above: the upstream checks the digest, so it
      // must be one the upstream can check.
      const unseen = request.body === UNSEEN_BODY
      if (digest !== undefined) {
        if (unseen) checkUnseenContentDigest(digest.join(', '))
        else checkContentDigest(digest.join(', '), bodyBytes(request))
      }
      const alg = algorithmFor(key.keyObject, input)
      let base: string
      try {
        base = messageSignatureBase(message, input)
      } catch (err) {
        if (!(err instanceof ComponentError)) throw err
        throw invalidSignature(`Signature-Input ${input.label} covers ${err.component}, which cannot be verified: ${err.message}`,
          input, alg, undefined, { component: err.component })
      }
      const expected = signatureLength(key.keyObject, alg)
      if (input.signature.length !== expected) {
        onFailure?.(request, state)
        throw invalidSignature(`Signature ${input.label} holds ${input.signature.length} bytes, ` +
          `but a ${alg} signature by the key of keyid holds ${expected}: ` +
          'it was made with another key or algorithm, or encoded otherwise (ECDSA: r||s, not DER)', input, alg, base)
      }
      const started = performance.now()
      const verified = verifyMessageSignature(key.keyObject, alg, Buffer.from(base), input.signature)
      observeVerification?.((performance.now() - started) / 1000)
      if (!verified) {
        onFailure?.(request, state)
        throw invalidSignature(ADVICE, input, alg, base)
      }
      if (unseen) state.deferredDigest = (digest as string[]).join(', ')
      // what the replay stage remembers, computed only for the requests it checks
      if (state.replay !== 'allow' && !SAFE_METHODS.has(request.method)) state.replayId = replayIdOf(key.apiKey, base)
    }
  }
}
