// DPoP server nonces (RFC 9449 §8): when on, a proof must carry a `nonce` the server gave (the
// DPoP-Nonce answer header of a USE_DPOP_NONCE refusal), so a proof cannot be made ahead of time.
// Time is cut into periods of the configured length; each period has one random nonce, shared by
// every gateway of the store (the first to ask sets it: shareValue), and a proof with the nonce of
// the current period or the one before passes. A process asks the store once per period and keeps
// the answer: a request pays no store command for its nonce.
import { randomBytes } from 'node:crypto'
import { GatewayError } from '../errors.js'
import type { OnceStore } from '../store/types.js'

export interface DpopNonces {
  /** passes when `nonce` is the current or the previous one; else USE_DPOP_NONCE with the current one */
  check: (nonce: unknown) => Promise<void>
  /** the nonce to give a client now */
  current: () => Promise<string>
}

/** the nonces a process keeps: the current period's and the one before */
const KEPT = 2

export function createNonces (store: Pick<OnceStore, 'shareValue'>, periodMs: number, now: () => number): DpopNonces {
  const held = new Map<number, Promise<string>>()
  const of = (period: number): Promise<string> => {
    let nonce = held.get(period)
    if (nonce === undefined) {
      // kept in the store for two periods: a gateway that asks late for the previous one still agrees
      nonce = store.shareValue(`dpop-nonce:${periodMs}:${period}`, randomBytes(24).toString('base64url'), 2 * periodMs + 1000)
      held.set(period, nonce)
      // a failed ask is asked again next time
      nonce.catch(() => { if (held.get(period) === nonce) held.delete(period) })
      for (const kept of held.keys()) if (kept <= period - KEPT) held.delete(kept)
    }
    return nonce
  }
  const current = async (): Promise<string> => await of(Math.floor(now() / periodMs))
  return {
    current,
    async check (nonce) {
      const period = Math.floor(now() / periodMs)
      const [present, previous] = await Promise.all([of(period), of(period - 1)])
      if (typeof nonce === 'string' && (nonce === present || nonce === previous)) return
      throw new GatewayError('USE_DPOP_NONCE', nonce === undefined
        ? 'This server requires a nonce in each DPoP proof: make the proof again with the nonce of the DPoP-Nonce header'
        : 'The DPoP proof\'s nonce is not a current one: make the proof again with the nonce of the DPoP-Nonce header', {
        headers: { 'dpop-nonce': present }
      })
    }
  }
}
