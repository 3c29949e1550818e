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
// A flood from many addresses (a botnet, or one host with many addresses) that all use one key
// would buy `limit` verifications from each address. So each (key, address) pair has a count too,
// and a key is under attack once `attackedKeyAddresses` (3 by default) distinct addresses have each
// failed `attackedKeyLimit` (2 by default) checks on it within a window; until that window ends, an
// address that has failed `attackedKeyLimit` checks on the key is refused before the verification of
// any request for that key (after the token and the key lookup, which cost a few microseconds, never
// before the RSA). Many failures from one address count as one address: its own budget above holds
// it, and a flood from one or two addresses changes nothing for any other address, however long it
// runs. Good traffic that shares the key from addresses that fail nothing is verified as before;
// an address that made `attackedKeyLimit` honest mistakes on the key is refused too while the key
// is under attack (3 such addresses are what "under attack" means).
//
// The counts live in this process, in bounded CLOCK caches (lib/lru-cache.ts): addresses that
// fail nothing are never stored, and a flood from ever-new addresses (IPv6 counts per /64) pushes
// out the least recently seen ones rather than growing memory. The budget protects this process's
// CPU, which is what a flood spends: with N processes (workers or gateways) an address may fail
// up to N x limit checks per window in all, and each process spends at most `limit` verifications
// on it. Sharing the counts in Redis would cost a round trip per signed request.
import { GatewayError } from '../errors.js'
import { LruCache } from '../lib/lru-cache.js'
import { addressBucket } from '../lib/client-address.js'
import type { AuthStage, AuthState } from './stage.js'
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
/** failed checks an address may make on a key that is under attack; as many on a key make the address one of its attackers */
export const DEFAULT_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT = 2
/** distinct addresses that must each fail `attackedKeyLimit` checks on a key within a window to put it under attack */
export const DEFAULT_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES = 3
/** at most: more would give a many-address flood that many times `attackedKeyLimit` verifications before the key is protected */
export const MAX_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES = 100
/** keys counted at once */
export const SIGNATURE_BUDGET_KEYS = 10_000
/** (key, address) pairs counted at once (~285 bytes each, measured by bench/signature-budget-flood.ts: 100,000 is ~29 MB at most) */
export const SIGNATURE_BUDGET_KEY_ADDRESSES = 100_000

export interface SignatureBudgetOptions {
  /** failed signature checks an address may make per window */
  limit?: number
  /** the window, in seconds, from the address's first failure */
  windowSeconds?: number
  /** how long a refusal is held before it is sent, ms; 0: at once */
  delayMs?: number
  /** failed checks an address may make on a key under attack; as many make it one of the key's attackers */
  attackedKeyLimit?: number
  /** attackers (addresses with `attackedKeyLimit` failures on the key) within a window that put a key under attack */
  attackedKeyAddresses?: number
  maxAddresses?: number
  maxKeys?: number
  /** (key, address) pairs counted at once */
  maxKeyAddresses?: number
  maxHeld?: number
}

export type SignatureBudgetLimits = Required<SignatureBudgetOptions>

/** Counted by the budget for the metrics: plain numbers, free on the hot path. */
export interface SignatureBudgetStats {
  /** signed requests refused (429) because their address was over its budget */
  refusals: number
  /** times an address used up its budget (reached the limit within a window) */
  exhausted: number
  /** times a key came under attack: `attackedKeyAddresses` addresses each failed `attackedKeyLimit` checks on it within a window */
  keysAttacked: number
}

export interface SignatureBudget {
  readonly limits: SignatureBudgetLimits
  readonly stats: Readonly<SignatureBudgetStats>
  /** addresses counted now (at most limits.maxAddresses) */
  readonly addresses: number
  /** (key, address) pairs counted now (at most limits.maxKeyAddresses) */
  readonly keyAddresses: number
  /** refusals being held now (at most limits.maxHeld) */
  readonly held: number
  /**
   * Undefined when `address` may still have its signatures checked; else the RATE_LIMITED error
   * to answer with, now or (a promise that rejects with it) after the hold.
   */
  refuse: (address: string, nowMs: number) => undefined | GatewayError | Promise<never>
  /**
   * The same, just before a signature for `key` (an apiKey, an agent key's thumbprint) is verified:
   * undefined unless the key is under attack and `address` has failed `attackedKeyLimit` checks on it.
   */
  refuseForKey: (address: string, key: string, nowMs: number) => undefined | GatewayError | Promise<never>
  /** a signature from `address` (for `key`, when known) failed its check */
  recordFailure: (address: string, nowMs: number, key?: string) => void
}

interface Count {
  failures: number
  /** ms: when the window ends */
  resetAt: number
}

/** an address's failures on one key */
interface KeyAddressCount extends Count {
  /** the key's window (its resetAt) this address was last counted in as an attacker: once per window */
  countedIn: number
}

/** a key's attackers: addresses that failed `attackedKeyLimit` checks on it, in the key's window */
interface KeyCount {
  attackers: number
  /** ms: when the window ends */
  resetAt: number
}

export function signatureBudgetLimits (options: SignatureBudgetOptions = {}): SignatureBudgetLimits {
  return {
    limit: integerOption('limit', options.limit ?? DEFAULT_SIGNATURE_FAILURE_LIMIT, 1),
    windowSeconds: integerOption('windowSeconds', options.windowSeconds ?? DEFAULT_SIGNATURE_FAILURE_WINDOW_SECONDS, 1),
    delayMs: integerOption('delayMs', options.delayMs ?? DEFAULT_SIGNATURE_FAILURE_DELAY_MS, 0),
    attackedKeyLimit: integerOption('attackedKeyLimit', options.attackedKeyLimit ?? DEFAULT_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT, 1),
    attackedKeyAddresses: integerOption('attackedKeyAddresses', options.attackedKeyAddresses ?? DEFAULT_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES, 1,
      MAX_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES),
    maxAddresses: integerOption('maxAddresses', options.maxAddresses ?? SIGNATURE_BUDGET_ADDRESSES, 1),
    maxKeys: integerOption('maxKeys', options.maxKeys ?? SIGNATURE_BUDGET_KEYS, 1),
    maxKeyAddresses: integerOption('maxKeyAddresses', options.maxKeyAddresses ?? SIGNATURE_BUDGET_KEY_ADDRESSES, 1),
    maxHeld: integerOption('maxHeld', options.maxHeld ?? SIGNATURE_BUDGET_MAX_HELD, 0)
  }
}

export function createSignatureBudget (options: SignatureBudgetOptions = {}): SignatureBudget {
  const limits = signatureBudgetLimits(options)
  const windowMs = limits.windowSeconds * 1000
  const counts = new LruCache<string, Count>(limits.maxAddresses)
  const stats: SignatureBudgetStats = { refusals: 0, exhausted: 0, keysAttacked: 0 }
  const keys = keyAttacks(limits, stats)
  let held = 0
  const release = (): void => { held-- }

  /** the address's failures in its current window (0: none, or the window ended) */
  const failuresOf = (bucket: string, nowMs: number): Count | undefined => {
    const count = counts.get(bucket)
    if (count === undefined) return undefined
    if (count.resetAt > nowMs) return count
    counts.delete(bucket)
    return undefined
  }

  /** 429 RATE_LIMITED, held while the hold allows, until `resetAt` */
  const refusal = (resetAt: number, nowMs: number, why: string): GatewayError | Promise<never> => {
    stats.refusals++
    const leftMs = resetAt - nowMs
    const holdMs = held < limits.maxHeld ? Math.min(limits.delayMs, leftMs) : 0
    // counted from when the answer leaves, after the hold
    const seconds = Math.max(1, Math.ceil((leftMs - holdMs) / 1000))
    const error = new GatewayError('RATE_LIMITED', `${why}; try again in ${seconds} s ` +
      '(INVALID_SIGNATURE answers say what was verified: see docs/debugging-signatures.md)', { headers: { 'retry-after': String(seconds) } })
    if (holdMs <= 0) return error
    held++
    return new Promise<never>((_resolve, reject) => {
      setTimeout(() => {
        release()
        reject(error)
      }, holdMs)
    })
  }

  /** one more failure in the window of `map`'s entry `id`; true when it reaches the limit */
  const count = (map: LruCache<string, Count>, id: string, nowMs: number): boolean => {
    const entry = map.get(id)
    if (entry === undefined || entry.resetAt <= nowMs) {
      map.set(id, { failures: 1, resetAt: nowMs + windowMs })
      return limits.limit === 1
    }
    entry.failures++
    return entry.failures === limits.limit
  }

  return {
    limits,
    stats,
    get addresses () { return counts.size },
    get keyAddresses () { return keys.pairs },
    get held () { return held },
    refuse (address, nowMs) {
      // No address has failed lately (the usual case): nothing to look up.
      if (counts.size === 0) return undefined
      const failures = failuresOf(addressBucket(address), nowMs)
      if (failures === undefined || failures.failures < limits.limit) return undefined
      return refusal(failures.resetAt, nowMs, 'Too many failed signature checks from this address')
    },
    refuseForKey (address, key, nowMs) {
      const resetAt = keys.attackedBy(key, addressBucket(address), nowMs)
      if (resetAt === undefined) return undefined
      return refusal(resetAt, nowMs, `Too many failed signature checks for this key, from ${limits.attackedKeyAddresses} ` +
        `or more addresses that each failed ${limits.attackedKeyLimit} or more, this one among them`)
    },
    recordFailure (address, nowMs, key) {
      const bucket = addressBucket(address)
      if (count(counts, bucket, nowMs)) stats.exhausted++
      if (key !== undefined) keys.record(key, bucket, nowMs)
    }
  }
}

/**
 * The keys' counts: a key is under attack once `attackedKeyAddresses` distinct addresses (its
 * attackers) have each failed `attackedKeyLimit` checks on it within the key's window, which starts
 * when its first attacker is counted. An address counts once per key window, however often it fails.
 */
function keyAttacks (limits: SignatureBudgetLimits, stats: SignatureBudgetStats): {
  /** when `key` is under attack and the address (`bucket`) is one of its attackers: when the refusal ends (the first of the two windows to end) */
  attackedBy: (key: string, bucket: string, nowMs: number) => number | undefined
  /** one more failure of the address (`bucket`) on `key` */
  record: (key: string, bucket: string, nowMs: number) => void
  /** (key, address) pairs counted now */
  readonly pairs: number
} {
  const windowMs = limits.windowSeconds * 1000
  const keys = new LruCache<string, KeyCount>(limits.maxKeys)
  const pairs = new LruCache<string, KeyAddressCount>(limits.maxKeyAddresses)
  return {
    get pairs () { return pairs.size },
    attackedBy (key, bucket, nowMs) {
      // No key has an attacker (the usual case): nothing to look up.
      if (keys.size === 0) return undefined
      const attack = keys.get(key)
      if (attack === undefined || attack.attackers < limits.attackedKeyAddresses) return undefined
      if (attack.resetAt <= nowMs) {
        keys.delete(key)
        return undefined
      }
      const pair = pairs.get(`${key} ${bucket}`)
      if (pair === undefined || pair.resetAt <= nowMs || pair.failures < limits.attackedKeyLimit) return undefined
      return Math.min(pair.resetAt, attack.resetAt)
    },
    record (key, bucket, nowMs) {
      const id = `${key} ${bucket}`
      let pair = pairs.get(id)
      if (pair === undefined) {
        pair = { failures: 0, resetAt: nowMs + windowMs, countedIn: 0 }
        pairs.set(id, pair)
      } else if (pair.resetAt <= nowMs) {
        // a new window for the pair; `countedIn` stays, so that the address counts once per key window
        pair.failures = 0
        pair.resetAt = nowMs + windowMs
      }
      pair.failures++
      if (pair.failures < limits.attackedKeyLimit) return
      let attack = keys.get(key)
      if (attack === undefined || attack.resetAt <= nowMs) {
        attack = { attackers: 0, resetAt: nowMs + windowMs }
        keys.set(key, attack)
      }
      if (pair.countedIn === attack.resetAt) return
      pair.countedIn = attack.resetAt
      attack.attackers++
      if (attack.attackers === limits.attackedKeyAddresses) stats.keysAttacked++
    }
  }
}

/** The first stage of the signed tier: an address over its budget is refused before any other check. */
export function signatureBudgetStage (budget: SignatureBudget, now: () => number = Date.now): AuthStage {
  return {
    name: 'signature-budget',
    needsBody: false,
    run (request) {
      return answer(budget.refuse(request.ip, now()))
    }
  }
}

/**
 * Just before a signature is verified, its key known (`keyOf`): an address that has failed
 * `attackedKeyLimit` checks on the key while the key is under attack (from `attackedKeyAddresses`
 * addresses) is refused before the verification.
 */
export function attackedKeyStage (budget: SignatureBudget, keyOf: (state: AuthState) => string | undefined, now: () => number = Date.now): AuthStage {
  return {
    name: 'signature-budget-key',
    needsBody: false,
    run (request, state) {
      const key = keyOf(state)
      return key === undefined ? undefined : answer(budget.refuseForKey(request.ip, key, now()))
    }
  }
}

function answer (refused: undefined | GatewayError | Promise<never>): void | Promise<never> {
  if (refused === undefined) return
  if (refused instanceof GatewayError) throw refused
  return refused
}
