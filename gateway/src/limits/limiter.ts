// The limiter: one authenticated request against its route's rate limits. Every limit that
// applies is checked, and the request counted in all of them, in one atomic store step
// (store.countRate): a refused request consumes nothing, an allowed one counts once in each.
//
// It answers the headers for the response (RateLimit-Policy and RateLimit, headers.ts), or
// rejects with 429 RATE_LIMITED (Retry-After, the same fields, and which limit refused). When the
// store cannot be reached, the route's `onStoreDown` decides: `allow` lets the request through
// uncounted and without RateLimit fields, `deny` answers 503 STORE_UNAVAILABLE. Either way it is
// counted (for the metrics) and logged, at most one line per route and mode every
// STORE_FAILURE_LOG_INTERVAL_MS, saying how many failures the line stands for.
import { GatewayError, isGatewayError } from '../errors.js'
import type { RateCounter, RateOutcome, Store } from '../store/index.js'
import { addressBucket } from '../lib/client-address.js'
import { policyField, RATE_LIMIT_HEADER, RATE_LIMIT_POLICY_HEADER, serviceLimitItem } from './headers.js'
import {
  counterKey, remainingRequests as remainingOf, requestShareMs as share, wholeSeconds as seconds, type LimitedRoute, type RateLimit, type StoreDownPolicy
} from './rate-limit.js'

/** Who a request is, as far as the limits count: its API key, user and signed agent (once authenticated), and its client address. */
export interface RateLimitSubjects {
  key?: string | undefined
  user?: string | undefined
  /** the signed agent's directory origin (Web Bot Auth) */
  agent?: string | undefined
  /** request.ip: already the client behind any trusted proxy; IPv6 counts by its /64 */
  address: string
}

/** The answer's RateLimit fields; a field set to undefined is removed (an upstream's copy is never passed on). */
export type RateLimitHeaders = Record<string, string | undefined>

/** requests one check takes of a limit, where not one (an MCP batch's calls of one tool: mcp-calls/tool-limits.ts) */
export type Costs = ReadonlyMap<RateLimit, number>

/** On `allow` with the store down: the upstream's fields are dropped and none are set. */
const NO_HEADERS: RateLimitHeaders = Object.freeze({ [RATE_LIMIT_POLICY_HEADER]: undefined, [RATE_LIMIT_HEADER]: undefined })

export const STORE_FAILURE_LOG_INTERVAL_MS = 10_000

export interface RateLimiterOptions {
  store: Pick<Store, 'countRate'>
  /** a request refused by `limit` (the one with the longest wait, when several refused) */
  onLimited?: (route: LimitedRoute, limit: RateLimit) => void
  /** the store did not answer a check on `route`; `mode` is what the route did about it */
  onStoreFailure?: (route: LimitedRoute, mode: StoreDownPolicy) => void
  /** where the (rate-limited) store-failure lines go */
  log?: { warn: (fields: object, message: string) => void }
  now?: () => number
}

export interface RateLimiter {
  /**
   * Counts a request against the route's limits. Resolves to the answer's headers; rejects with
   * RATE_LIMITED (429) or, on a route with `onStoreDown: deny` whose store is down, STORE_UNAVAILABLE.
   */
  check: (route: LimitedRoute, subjects: RateLimitSubjects, costs?: Costs) => Promise<RateLimitHeaders>
}

function subjectOf (limit: RateLimit, subjects: RateLimitSubjects): string | undefined {
  switch (limit.by) {
    case 'key': return subjects.key
    case 'user': return subjects.user
    case 'agent': return subjects.agent
    case 'address': return addressBucket(subjects.address)
  }
}

/** The RateLimit field of an allowed request: each limit's state after counting it. */
function allowedField (limits: readonly RateLimit[], outcome: RateOutcome): string {
  return limits.map((limit, i) => {
    const backlog = outcome.backlogMs[i] ?? 0
    return serviceLimitItem(limit, remainingOf(limit, backlog), seconds(backlog))
  }).join(', ')
}

function rateLimited (limits: readonly RateLimit[], outcome: RateOutcome, policy: string, costs?: Costs): { error: GatewayError; limit: RateLimit } {
  // A refused request counted nowhere: each backlog is the state before it. A limit refused it
  // when one more request does not fit; it fits again once the backlog has drained by the excess.
  let worst: RateLimit | undefined
  let worstWaitMs = 0
  const items = limits.map((limit, i) => {
    const backlog = outcome.backlogMs[i] ?? 0
    const waitMs = backlog + share(limit) * (costs?.get(limit) ?? 1) - limit.windowMs
    if (waitMs > 0 && (worst === undefined || waitMs > worstWaitMs)) {
      worst = limit
      worstWaitMs = waitMs
    }
    return waitMs > 0 ? serviceLimitItem(limit, 0, Math.max(1, seconds(waitMs))) : serviceLimitItem(limit, remainingOf(limit, backlog), seconds(backlog))
  })
  // the store refused without any limit being over (a race with a concurrent request): a second's wait
  const limit = worst ?? limits[0] as RateLimit
  const retryAfter = Math.max(1, seconds(worstWaitMs))
  const error = new GatewayError('RATE_LIMITED',
    `The rate limit of ${limit.limit} requests per ${limit.window} by ${limit.by} is used up; try again in ${retryAfter} s`, {
      headers: { 'retry-after': String(retryAfter), [RATE_LIMIT_POLICY_HEADER]: policy, [RATE_LIMIT_HEADER]: items.join(', ') },
      extra: { policy: limit.policy, by: limit.by, limit: limit.limit, window: limit.window }
    })
  return { error, limit }
}

function storeDown (err: unknown): GatewayError {
  return new GatewayError('STORE_UNAVAILABLE', 'The rate-limit store did not answer and this route refuses requests it cannot count; try again shortly', {
    headers: { 'retry-after': '1' },
    cause: err
  })
}

export function createRateLimiter (options: RateLimiterOptions): RateLimiter {
  const { store } = options
  const now = options.now ?? Date.now
  /** per route's limits: RateLimit-Policy, the same for every request that all of them apply to */
  const policies = new WeakMap<readonly RateLimit[], string>()
  const policyOf = (limits: readonly RateLimit[]): string => {
    let field = policies.get(limits)
    if (field === undefined) {
      field = policyField(limits)
      policies.set(limits, field)
    }
    return field
  }
  /** route name and mode -> when a line was last written, and the failures since */
  const logged = new Map<string, { at: number; since: number }>()
  const storeFailed = (route: LimitedRoute, err: unknown): void => {
    const mode = route.onStoreDown
    options.onStoreFailure?.(route, mode)
    const id = `${mode} ${route.name}`
    const entry = logged.get(id) ?? { at: -Infinity, since: 0 }
    entry.since++
    logged.set(id, entry)
    const t = now()
    if (t - entry.at < STORE_FAILURE_LOG_INTERVAL_MS) return
    options.log?.warn({ route: route.name, onStoreDown: mode, failures: entry.since, err: { message: (err as Error).message } },
      mode === 'allow'
        ? 'rate-limit store unavailable: requests on this route are forwarded uncounted (onStoreDown: allow)'
        : 'rate-limit store unavailable: requests on this route are refused with 503 (onStoreDown: deny)')
    entry.at = t
    entry.since = 0
  }

  return {
    async check (route, subjects, costs) {
      let limits = route.rateLimits
      const counters: RateCounter[] = []
      for (const limit of limits) {
        const subject = subjectOf(limit, subjects)
        // n requests at once: a counter whose request adds n times the ms (GCRA), checked and counted as one
        if (subject !== undefined) counters.push({ key: counterKey(limit, subject), limit: limit.limit / (costs?.get(limit) ?? 1), windowMs: limit.windowMs })
      }
      // Only a limit whose subject is unknown (a user on a public route) is left out; the tiers
      // (route-rules.ts) make that rare, so the common case keeps the route's own list.
      if (counters.length !== limits.length) {
        limits = limits.filter((limit) => subjectOf(limit, subjects) !== undefined)
        if (limits.length === 0) return NO_HEADERS
      }
      let outcome: RateOutcome
      try {
        outcome = await store.countRate(counters)
      } catch (err) {
        if (!isGatewayError(err) || err.code !== 'STORE_UNAVAILABLE') throw err
        storeFailed(route, err)
        if (route.onStoreDown === 'deny') throw storeDown(err)
        return NO_HEADERS
      }
      const policy = limits === route.rateLimits ? policyOf(limits) : policyField(limits)
      if (outcome.allowed) return { [RATE_LIMIT_POLICY_HEADER]: policy, [RATE_LIMIT_HEADER]: allowedField(limits, outcome) }
      const { error, limit } = rateLimited(limits, outcome, policy, costs)
      options.onLimited?.(route, limit)
      throw error
    }
  }
}
