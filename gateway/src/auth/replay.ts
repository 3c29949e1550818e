import { createHash } from 'node:crypto'
import { MAX_TIMESTAMP_SKEW_MS, SAFE_METHODS } from '#client/protocol'
import { GatewayError } from '../errors.js'
import type { Store } from '../store/index.js'
import { required, type AuthStage } from './stage.js'

/** Gateways' clocks differ a little: remember a signature a minute past its window. */
const CLOCK_MARGIN_MS = 60_000

/**
 * A signed request that changes something is accepted once. Its signature is remembered in the
 * store (set-if-absent, shared by every gateway) until its timestamp leaves the 15-minute window,
 * after which the timestamp check refuses it anyway. RSA PKCS#1 v1.5 signatures are deterministic
 * and only canonical base64 is accepted, so one signed request has exactly one signature.
 */
export function replayStage (store: Store, now: () => number = Date.now): AuthStage {
  return {
    name: 'replay',
    needsBody: true,
    run (request, state) {
      // not async: a request with nothing to remember costs no promise
      if (state.replay === 'allow' || SAFE_METHODS.has(request.method)) return
      const { apiKey, signature } = required(state.signatureHeaders, 'the signature headers', 'replay')
      const timestampMs = required(state.timestampMs, 'the timestamp', 'replay')
      const ttlMs = timestampMs + MAX_TIMESTAMP_SKEW_MS + CLOCK_MARGIN_MS - now()
      const id = createHash('sha256').update(apiKey).update('\n').update(signature).digest('hex')
      return store.rememberOnce(`replay:${id}`, Math.max(ttlMs, 1)).then((first) => {
        if (!first) {
          throw new GatewayError('REPLAYED_REQUEST', 'This signed request was already accepted; sign each POST, PUT, PATCH or DELETE anew ' +
            '(a new X-API-Timestamp gives a new signature)')
        }
      })
    }
  }
}
