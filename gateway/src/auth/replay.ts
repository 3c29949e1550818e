import { createHash } from 'node:crypto'
import { MAX_TIMESTAMP_SKEW_MS, SAFE_METHODS, type KeyType } from '#client/protocol'
import { GatewayError } from '../errors.js'
import { canonicalP256Signature, decodeBase64, keyTypeOf, P256_RAW_SIGNATURE_BYTES } from '../keys/public-key.js'
import type { Store } from '../store/index.js'
import { required, type AuthStage, type AuthState } from './stage.js'

/** Gateways' clocks differ a little: remember a signature a minute past its window. */
export const CLOCK_MARGIN_MS = 60_000

/**
 * A signed request that changes something is accepted once. Its signature is remembered in the
 * store (set-if-absent, shared by every gateway) until its timestamp leaves the 15-minute window,
 * after which the timestamp check refuses it anyway. RSA PKCS#1 v1.5 and Ed25519 signatures are
 * deterministic (and Ed25519's verify refuses s >= L) and only canonical base64 is accepted, so one
 * signed request has exactly one signature. ECDSA's are not: (r, s) and (r, n - s) both verify, so
 * a P-256 signature is remembered in its low-s form (replayIdentity).
 */
/**
 * The seed scheme's identity of a signed request: its key and signature (a P-256 one in low-s
 * form). The key is named by its fingerprint (computed once when it was cached), not its apiKey:
 * the seed's signing string names no key, so two apiKeys of one key pair (registered in two
 * encodings before fingerprints) would otherwise each accept the same signed request once.
 */
function seedReplayId (state: AuthState): string {
  const { apiKey, signature } = required(state.signatureHeaders, 'the signature headers', 'replay')
  const key = required(state.key, 'the key', 'replay')
  return replayIdentity(key.fingerprint ?? apiKey, key.keyType ?? keyTypeOf(key.keyObject), signature)
}

export function replayStage (store: Store, now: () => number = Date.now): AuthStage {
  return {
    name: 'replay',
    needsBody: true,
    run (request, state) {
      // not async: a request with nothing to remember costs no promise
      if (state.replay === 'allow' || SAFE_METHODS.has(request.method)) return
      const timestampMs = required(state.timestampMs, 'the timestamp', 'replay')
      const ttlMs = timestampMs + MAX_TIMESTAMP_SKEW_MS + CLOCK_MARGIN_MS - now()
      // RFC 9421: the identity its signature stage computed (the key and the signature base)
      const id = state.replayId ?? seedReplayId(state)
      return store.rememberOnce(`replay:${id}`, Math.max(ttlMs, 1)).then((mark) => {
        if (mark !== false) {
          state.replayMark = mark
        } else {
          throw new GatewayError('REPLAYED_REQUEST', 'This signed request was already accepted; sign each POST, PUT, PATCH or DELETE anew ' +
            (state.replayId === undefined
              ? '(a new X-API-Timestamp gives a new signature)'
              : '(RFC 9421: the same signature base again is a replay, whatever the signature bytes; a new created, or a nonce parameter, makes a new one)'))
        }
      })
    }
  }
}

/**
 * Takes back the replay mark of a request keygate refuses after the replay check (a rate limit,
 * a full upstream queue, an upstream that took no connection): it was never forwarded, so its
 * retry must pass. Never waits: the answer goes out while the store forgets.
 */
export function releaseReplayMark (state: AuthState | null): void {
  if (state === null) return
  const marks = [state.replayMark, state.agentReplayMark]
  state.replayMark = undefined
  state.agentReplayMark = undefined
  for (const mark of marks) if (mark !== undefined) void mark.forget()
}

/**
 * What a signed request is remembered by: its key (seed: its fingerprint) and signature (as received: canonical
 * base64, one spelling). A P-256 signature (verified before this runs) by its r and low s, the
 * same for each of its malleated forms: read as DER (the seed scheme), else, 64 bytes, as raw
 * r||s (RFC 9421's ecdsa-p256-sha256), so one identity serves both schemes; one that cannot be
 * read stays as it is.
 */
export function replayIdentity (keyId: string, keyType: KeyType | undefined, signature: string): string {
  const hash = createHash('sha256').update(keyId).update('\n')
  const bytes = keyType === 'p256' ? decodeBase64(signature) : undefined
  if (bytes === undefined) return hash.update(signature).digest('hex')
  let canonical = canonicalP256Signature(bytes, 'der')
  if (canonical === bytes && bytes.length === P256_RAW_SIGNATURE_BYTES) canonical = canonicalP256Signature(bytes, 'ieee-p1363')
  // a prefix no base64 text has: a low-s identity never equals a signature's text
  return hash.update('p256-low-s:').update(canonical).digest('hex')
}
