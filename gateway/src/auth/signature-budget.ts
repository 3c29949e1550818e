// A budget of failed signature checks per client address, in front of the signed tier.
//
// A bad signature costs what a good one costs: its RSA verification (~35 us), then a problem
// answer. Without a budget, a flood of bad signatures from one address takes as much CPU as the
// same number of accepted requests. With it, each address may fail `limit` signature checks in a
// window (which starts at its first failure); past that, its signed requests get 429 RATE_LIMITED
// with Retry-After before any check at all (the first stage: no token check, no key lookup, no RSA),
// until the window ends. The budget is per address, not per key: an attacker who knows an apiKey
// and floods from its own address locks out only that address, never the key's owner elsewhere.
//
// Only failed signatures (INVALID_SIGNATURE) count: a stale timestamp, an unknown key or a missing
// token are refused by cheap checks before any verification and cost no budget, so a client with
// a wrong clock never meets it.
//
// The 429s are held for a moment before they are sent (at most `delayMs`, never past the window):
// holding costs a timer, not CPU, and a client that waits for each answer on its connections (as
// load generators and most HTTP clients do) then sends a request per connection per hold instead
// of as fast as the gateway refuses them. At most `maxHeld` answers are held at once; beyond that,
// they go at once.
//
// The counts live in this process, in a bounded CLOCK cache (lib/lru-cache.ts): addresses that
// fail nothing are never stored, and a flood from ever-new addresses (IPv6 counts per /64) pushes
// out the least recently seen ones rather than growing memory. The budget protects this process's
// CPU, which is what a flood spends: with N processes (workers or gateways) an address may fail
// up to N x limit checks per window in all, and each process spends at most `limit` verifications
// on it. Sharing the counts in Redis would cost a round trip per signed request.
import { GatewayError } from '../errors.js'
import { LruCache } from '../lib/lru-cache.js'
import { addressBucket } from '../lib/client-address.js'
import type { AuthStage } from './stage.js'
import { integerOption } from '../lib/integer-option.js'

/** failed signature checks per address per window: an honest client fails rarely, and 20 a second sustained is a broken one */
export const DEFAULT_SIGNATURE_FAILURE_LIMIT = 200
export const DEFAULT_SIGNATURE_FAILURE_WINDOW_SECONDS = 10
/** how long a 429 of the budget is held before it is sent */
export const DEFAULT_SIGNATURE_FAILURE_DELAY_MS = 1000
/** addresses counted at once (~210 bytes each, measured: 100,000 is ~21 MB at most) */
export const SIGNATURE_BUDGET_ADDRESSES = 100_000
/** 429s held at once; beyond, they are sent at once */
export const SIGNATURE_BUDGET_MAX_HELD = 1000

export interface SignatureBudgetOptions {
  /** failed signature checks an address may make per window */
  limit?: number
  /** the window, in seconds, from the address's first failure */
  windowSeconds?: number
  /** how long a refusal is held before it is sent, ms; 0: at once */
  delayMs?: number
  maxAddresses?: number
  maxHeld?: number
}

export type SignatureBudgetLimits = Required<SignatureBudgetOptions>

/** Counted by the budget for the metrics: plain numbers, free on the hot path. */
export interface SignatureBudgetStats {
  /** signed requests refused (429) because their address was over its budget */
  refusals: number
  /** times an address used up its budget (reached the limit within a window) */
  exhausted: number
}

export interface SignatureBudget {
  readonly limits: SignatureBudgetLimits
  readonly stats: Readonly<SignatureBudgetStats>
  /** addresses counted now (at most limits.maxAddresses) */
  readonly addresses: number
  /** refusals being held now (at most limits.maxHeld) */
  readonly held: number
  /**
   * Undefined when `address` may still have its signatures checked; else the RATE_LIMITED error
   * to answer with, now or (a promise that rejects with it) after the hold.
   */
  refuse: (address: string, nowMs: number) => undefined | GatewayError | Promise<never>
  /** a signature from `address` failed its check */
  recordFailure: (address: string, nowMs: number) => void
}

interface Count {
  failures: number
  /** ms: when the window ends */
  resetAt: number
}

export function signatureBudgetLimits (options: SignatureBudgetOptions = {}): SignatureBudgetLimits {
  return {
    limit: integerOption('limit', options.limit ?? DEFAULT_SIGNATURE_FAILURE_LIMIT, 1),
    windowSeconds: integerOption('windowSeconds', options.windowSeconds ?? DEFAULT_SIGNATURE_FAILURE_WINDOW_SECONDS, 1),
    delayMs: integerOption('delayMs', options.delayMs ?? DEFAULT_SIGNATURE_FAILURE_DELAY_MS, 0),
    maxAddresses: integerOption('maxAddresses', options.maxAddresses ?? SIGNATURE_BUDGET_ADDRESSES, 1),
    maxHeld: integerOption('maxHeld', options.maxHeld ?? SIGNATURE_BUDGET_MAX_HELD, 0)
  }
}

export function createSignatureBudget (options: SignatureBudgetOptions = {}): SignatureBudget {
  const limits = signatureBudgetLimits(options)
  const windowMs = limits.windowSeconds * 1000
  const counts = new LruCache<string, Count>(limits.maxAddresses)
  const stats: SignatureBudgetStats = { refusals: 0, exhausted: 0 }
  let held = 0
  const release = (): void => { held-- }

  return {
    limits,
    stats,
    get addresses () { return counts.size },
    get held () { return held },
    refuse (address, nowMs) {
      // No address has failed lately (the usual case): nothing to look up.
      if (counts.size === 0) return undefined
      const bucket = addressBucket(address)
      const count = counts.get(bucket)
      if (count === undefined) return undefined
      if (count.resetAt <= nowMs) {
        counts.delete(bucket)
        return undefined
      }
      if (count.failures < limits.limit) return undefined
      stats.refusals++
      const leftMs = count.resetAt - nowMs
      const holdMs = held < limits.maxHeld ? Math.min(limits.delayMs, leftMs) : 0
      // counted from when the answer leaves, after the hold
      const seconds = Math.max(1, Math.ceil((leftMs - holdMs) / 1000))
      const error = new GatewayError('RATE_LIMITED', `Too many failed signature checks from this address; try again in ${seconds} s ` +
        '(INVALID_SIGNATURE answers say what was verified: see docs/debugging-signatures.md)', { headers: { 'retry-after': String(seconds) } })
      if (holdMs <= 0) return error
      held++
      return new Promise<never>((_resolve, reject) => {
        setTimeout(() => {
          release()
          reject(error)
        }, holdMs)
      })
    },
    recordFailure (address, nowMs) {
      const bucket = addressBucket(address)
      const count = counts.get(bucket)
      if (count === undefined || count.resetAt <= nowMs) {
        counts.set(bucket, { failures: 1, resetAt: nowMs + windowMs })
        if (limits.limit === 1) stats.exhausted++
        return
      }
      count.failures++
      if (count.failures === limits.limit) stats.exhausted++
    }
  }
}

/** The first stage of the signed tier: an address over its budget is refused before any other check. */
export function signatureBudgetStage (budget: SignatureBudget, now: () => number = Date.now): AuthStage {
  return {
    name: 'signature-budget',
    needsBody: false,
    run (request) {
      const refused = budget.refuse(request.ip, now())
      if (refused === undefined) return
      if (refused instanceof GatewayError) throw refused
      return refused
    }
  }
}
