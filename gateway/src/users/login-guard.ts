// Login brute-force protection, in front of the password check:
//
// - failures are counted per username and per client address in the store (shared by every
//   gateway on one Redis); past a threshold, POST /v1/auth/token answers 429 RATE_LIMITED with
//   Retry-After, and a locked-out attempt costs no scrypt: the counts are checked first;
// - at most `concurrency` password verifications run at once and at most `queue` wait; beyond
//   that a login gets 429 at once (Retry-After: 1), so a login storm cannot take every CPU from
//   business traffic.
//
// The store offers an atomic "count a hit, return the count" (`hit`), not a read, so an attempt is
// counted *before* its password is checked: that is what makes the check atomic across gateways
// (of N concurrent attempts at the threshold, exactly those within it go on). Per username, a
// success then resets the count, so it is the failures since the last success. Per address, a
// success must not reset anything (an attacker with one account of their own would reset their
// address between guesses), but must not count as a failure either (many users behind one NAT log
// in every token lifetime): the address has a second counter, of checks plus successes, read at
// the same time, and failures = attempts - successes = 2 * attempts - (checks + successes).
// Both address counters live in clock-aligned windows (the window's number is in the key), so
// the two always describe the same window.
import { GatewayError } from '../errors.js'
import type { Store, UserRecord } from '../store/index.js'
import { addressBucket } from '../lib/client-address.js'
import { sha256Base64url } from '../lib/sha256.js'
import { Semaphore } from '../lib/semaphore.js'
import { integerOption } from '../lib/integer-option.js'

export const DEFAULT_LOGIN_MAX_FAILURES_PER_USER = 10
export const DEFAULT_LOGIN_MAX_FAILURES_PER_ADDRESS = 100
export const DEFAULT_LOGIN_WINDOW_SECONDS = 15 * 60
/** password verifications at once: the machine's 2 cores (libuv's pool has 4 threads) */
export const DEFAULT_LOGIN_CONCURRENCY = 2
/** logins waiting for a verification slot; beyond: 429 at once */
export const DEFAULT_LOGIN_QUEUE = 32

export interface LoginGuardOptions {
  /** failed logins per username within a window; the next is refused (429) until it ends */
  maxFailuresPerUser?: number
  /** failed logins per client address (an IPv6 address counts as its /64) within a window */
  maxFailuresPerAddress?: number
  /** the counting window, in seconds */
  windowSeconds?: number
  /** password verifications at once */
  concurrency?: number
  /** logins waiting for a verification slot */
  queue?: number
}

export type LoginLimits = Required<LoginGuardOptions>

/** `U`: what `users.authenticate` answers for a right password (the gateway's: the user's record). */
export interface LoginGuard<U = UserRecord> {
  readonly limits: LoginLimits
  /**
   * `users.authenticate` behind the limits: its answer (the user) when the password is right;
   * INVALID_CREDENTIALS, RATE_LIMITED (with Retry-After) or STORE_UNAVAILABLE otherwise.
   */
  login: (username: string, password: string, address: string) => Promise<U>
}

export function loginLimits (options: LoginGuardOptions = {}): LoginLimits {
  return {
    maxFailuresPerUser: integerOption('maxFailuresPerUser', options.maxFailuresPerUser ?? DEFAULT_LOGIN_MAX_FAILURES_PER_USER, 1),
    maxFailuresPerAddress: integerOption('maxFailuresPerAddress', options.maxFailuresPerAddress ?? DEFAULT_LOGIN_MAX_FAILURES_PER_ADDRESS, 1),
    windowSeconds: integerOption('windowSeconds', options.windowSeconds ?? DEFAULT_LOGIN_WINDOW_SECONDS, 1),
    concurrency: integerOption('concurrency', options.concurrency ?? DEFAULT_LOGIN_CONCURRENCY, 1),
    queue: integerOption('queue', options.queue ?? DEFAULT_LOGIN_QUEUE, 0)
  }
}

/** Bounded and key-safe whatever the input: a 256-character username makes a 43-character key. */
const hashed = sha256Base64url

/** The store keys (under the store's own prefix), kept apart by their own prefixes. */
export const loginKeys = {
  /** failures of one username since its last success (unknown usernames alike) */
  user: (username: string): string => `login:user:${hashed(username)}`,
  /** attempts from one address in window `window` */
  addressAttempts: (bucket: string, window: number): string => `login:addr:${bucket}:${window}`,
  /** checks plus successes from one address in window `window` */
  addressChecks: (bucket: string, window: number): string => `login:addr-ok:${bucket}:${window}`
}

function rateLimited (retryAfterMs: number, detail: string): GatewayError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000))
  return new GatewayError('RATE_LIMITED', `${detail}; try again in ${seconds} s`, { headers: { 'retry-after': String(seconds) } })
}

export function createLoginGuard<U = UserRecord> (
  store: Store,
  users: { authenticate: (username: string, password: string) => Promise<U> },
  options: LoginGuardOptions = {},
  now: () => number = Date.now
): LoginGuard<U> {
  const limits = loginLimits(options)
  const windowMs = limits.windowSeconds * 1000
  const slots = new Semaphore(limits.concurrency, limits.queue)

  /** Counts this attempt against the address; refuses it when the failures are over the limit. */
  async function checkAddress (bucket: string, window: number, windowLeftMs: number): Promise<void> {
    const [attempts, checks] = await Promise.all([
      store.hit(loginKeys.addressAttempts(bucket, window), windowLeftMs),
      store.hit(loginKeys.addressChecks(bucket, window), windowLeftMs)
    ])
    // This attempt included. Attempts checked at the same moment may see each other's hit in one
    // counter and not the other: near the limit it is off by at most the attempts in flight.
    const failures = 2 * attempts.count - checks.count
    if (failures > limits.maxFailuresPerAddress) {
      throw rateLimited(Math.max(attempts.resetMs, checks.resetMs), 'Too many failed logins from this address')
    }
  }

  return {
    limits,
    async login (username, password, address) {
      const permit = slots.tryAcquire()
      if (permit === null) throw rateLimited(1000, 'Too many logins are being checked right now')
      try {
        const t = now()
        const window = Math.floor(t / windowMs)
        const windowLeftMs = (window + 1) * windowMs - t
        const bucket = addressBucket(address)
        await checkAddress(bucket, window, windowLeftMs)
        // Only after the address: a client refused there does not lock its victims' usernames.
        const userKey = loginKeys.user(username)
        const tries = await store.hit(userKey, windowMs)
        if (tries.count > limits.maxFailuresPerUser) throw rateLimited(tries.resetMs, 'Too many failed logins for this username')

        await permit.ready
        let authenticated: U
        try {
          authenticated = await users.authenticate(username, password)
        } finally {
          permit.release()
        }
        // The success offsets its attempt in the window of the check (when that window has ended
        // meanwhile, nobody reads its counters again).
        const leftMs = (window + 1) * windowMs - now()
        await Promise.all([
          store.resetHits(userKey),
          leftMs > 0 ? store.hit(loginKeys.addressChecks(bucket, window), leftMs) : undefined
        ])
        return authenticated
      } finally {
        permit.release()
      }
    }
  }
}
