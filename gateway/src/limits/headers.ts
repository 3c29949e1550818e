// The IETF RateLimit header fields, as draft-ietf-httpapi-ratelimit-headers-11 (the httpapi
// working group's draft, May 2026) defines them: two Structured Field Lists of Items whose value is
// a String, the policy's name.
//
//   RateLimit-Policy: "key-10s";q=20;w=10, "monthly-user-30d";q=100000;w=2592000
//   RateLimit: "key-10s";r=3;t=7, "monthly-user-30d";r=99512;t=2592000
//
// q: the policy's quota (requests), w: its window (seconds); r: the requests available now, t: the
// seconds until the counter is back to its full limit. keygate lists every limit that applied to
// the request, in the route file's order, in both fields.
import type { RateLimit } from './rate-limit.js'

export const RATE_LIMIT_POLICY_HEADER = 'ratelimit-policy'
export const RATE_LIMIT_HEADER = 'ratelimit'

/** An sf-string: policy names hold only [a-z0-9_-] (bucket names and by/window), but escape as the grammar says. */
function sfString (text: string): string {
  return `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

/** RateLimit-Policy for these limits. */
export function policyField (limits: readonly RateLimit[]): string {
  return limits.map((l) => `${sfString(l.policy)};q=${l.limit};w=${l.windowMs / 1000}`).join(', ')
}

/** One service-limit item of RateLimit: `remaining` requests now, full again in `resetSeconds`. */
export function serviceLimitItem (limit: RateLimit, remaining: number, resetSeconds: number): string {
  return `${sfString(limit.policy)};r=${remaining};t=${resetSeconds}`
}
