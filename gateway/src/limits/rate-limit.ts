// The rate-limit model: what a route's `rateLimits` entry becomes once checked, and how it names
// its counter and its policy. Each limit is `limit` requests per `window`, counted per subject
// (the request's API key, its user, its signed agent's directory origin, or its client address) in a GCRA counter (store/types.ts:
// RateCounter). Without a `bucket` a limit counts for its route alone; limits with one bucket name
// share their counter across every route that lists them (a monthly quota over the whole API).
import { createHash } from 'node:crypto'

export const RATE_LIMIT_BY = ['key', 'user', 'agent', 'address'] as const
/** What a limit counts per: the signed request's API key, the authenticated user, the signed agent (its directory origin), the client address. */
export type RateLimitBy = typeof RATE_LIMIT_BY[number]

export const STORE_DOWN_POLICIES = ['allow', 'deny'] as const
/** What a limited route does when the store cannot be reached: forward uncounted, or 503. */
export type StoreDownPolicy = typeof STORE_DOWN_POLICIES[number]
export const DEFAULT_STORE_DOWN_POLICY: StoreDownPolicy = 'allow'

/** a whole number and a unit: 1s, 10s, 1m, 1h, 1d, 30d */
export const WINDOW_PATTERN = '^[1-9][0-9]{0,8}[smhd]$'
/** the longest window: a year, leap day included */
export const MAX_WINDOW_SECONDS = 366 * 24 * 3600
/** the most requests one limit may allow (per window) */
export const MAX_LIMIT = 1_000_000_000
/** a bucket name: what its policy name and its counters are built from */
export const BUCKET_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$'

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 }

/** "10s" -> 10, "30d" -> 2592000; undefined when it is not a window. */
export function windowSeconds (text: string): number | undefined {
  if (!new RegExp(WINDOW_PATTERN).test(text)) return undefined
  return Number(text.slice(0, -1)) * (UNIT_SECONDS[text.slice(-1)] as number)
}

export interface RateLimit {
  by: RateLimitBy
  /** requests per window */
  limit: number
  /** as written in the route file: "10s", "30d" */
  window: string
  windowMs: number
  /** the shared counter's name, when the limit has one */
  bucket: string | undefined
  /**
   * the policy's name in RateLimit-Policy and RateLimit (`key-10s`, `monthly-user-30d`) and in
   * 429 answers; one name per counter
   */
  policy: string
  /** the counter, without its subject: the same for every route that shares it */
  counter: string
}

/** A route as far as its limits go: what the limiter and the usage read-out need of it. */
export interface LimitedRoute {
  readonly name: string
  readonly rateLimits: readonly RateLimit[]
  readonly onStoreDown: StoreDownPolicy
}

/**
 * The counter scope of a route's own limits: the route's path and methods (not its name, which
 * may be `routes[i]` and move when the file is reordered), so a reload keeps its counts.
 */
export function routeScope (route: { prefix: string; exact: boolean; methods: readonly string[] }): string {
  const identity = `${route.exact ? 'path' : 'prefix'} ${route.prefix} ${[...route.methods].sort().join(',')}`
  return `r:${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}`
}

/** A checked entry (its window already known good) as the limiter uses it. */
export function rateLimit (entry: { by: RateLimitBy; limit: number; window: string; bucket?: string | undefined }, scope: string): RateLimit {
  const seconds = windowSeconds(entry.window)
  if (seconds === undefined) throw new RangeError(`not a window: ${entry.window}`)
  const bucket = entry.bucket
  return {
    by: entry.by,
    limit: entry.limit,
    window: entry.window,
    windowMs: seconds * 1000,
    bucket,
    policy: `${bucket === undefined ? '' : `${bucket}-`}${entry.by}-${entry.window}`,
    counter: `${bucket === undefined ? scope : `b:${bucket}`}:${entry.by}:${seconds}`
  }
}

/** The store key of a limit's counter for one subject (an apiKey, a username, an agent's origin, an address bucket). */
export function counterKey (limit: RateLimit, subject: string): string {
  return `${limit.counter}:${subject}`
}

/** The ms one request adds to a limit's counter (GCRA's emission interval). */
export function requestShareMs (limit: Pick<RateLimit, 'limit' | 'windowMs'>): number {
  return limit.windowMs / limit.limit
}

/** Requests a counter with this backlog still lets through now (a hair of slack for the division's rounding). */
export function remainingRequests (limit: Pick<RateLimit, 'limit' | 'windowMs'>, backlogMs: number): number {
  return Math.min(limit.limit, Math.max(0, Math.floor((limit.windowMs - backlogMs) / requestShareMs(limit) + 1e-6)))
}

/** ms as the whole seconds the headers carry, rounded up. */
export function wholeSeconds (ms: number): number {
  return Math.max(0, Math.ceil(ms / 1000 - 1e-6))
}
