// The usage read-out (the admin API's GET /v1/usage?key=|user=|agent=): for an API key, a user or a
// signed agent (its directory origin), every limit of the current routes that counts per key (per
// user, per agent), with how much of it is used now,
// read without counting anything (store.peekRate). A counter shared through a bucket is listed
// once, with every route that shares it.
import type { Store } from '../store/index.js'
import { counterKey, remainingRequests, wholeSeconds, type LimitedRoute, type RateLimit } from './rate-limit.js'

export type UsageSubject = { key: string } | { user: string } | { agent: string }

export interface LimitUsage {
  /** the routes (by name) whose requests count in this counter */
  routes: string[]
  /** the shared counter's name, or null for a route's own limit */
  bucket: string | null
  /** the name RateLimit-Policy gives it */
  policy: string
  by: 'key' | 'user' | 'agent'
  limit: number
  window: string
  /** requests counted and not yet drained (the GCRA's backlog, in requests, rounded up) */
  used: number
  /** requests that would pass now */
  remaining: number
  /** seconds until the counter is back to its full limit (0: unused) */
  resetSeconds: number
}

/** Every per-key (per-user, per-agent) limit of `routes` for the subject, in route-file order, counted by nothing. */
export async function readUsage (routes: readonly LimitedRoute[], store: Pick<Store, 'peekRate'>, subject: UsageSubject): Promise<LimitUsage[]> {
  const [by, name] = 'key' in subject ? ['key', subject.key] as const : 'user' in subject ? ['user', subject.user] as const : ['agent', subject.agent] as const
  const counters = new Map<string, { limit: RateLimit; routes: string[] }>()
  for (const route of routes) {
    for (const limit of route.rateLimits) {
      if (limit.by !== by) continue
      const entry = counters.get(limit.counter)
      if (entry === undefined) counters.set(limit.counter, { limit, routes: [route.name] })
      else if (!entry.routes.includes(route.name)) entry.routes.push(route.name)
    }
  }
  const entries = [...counters.values()]
  if (entries.length === 0) return []
  const { backlogMs } = await store.peekRate(entries.map(({ limit }) => ({ key: counterKey(limit, name), limit: limit.limit, windowMs: limit.windowMs })))
  return entries.map(({ limit, routes: names }, i) => {
    const backlog = backlogMs[i] ?? 0
    const remaining = remainingRequests(limit, backlog)
    return {
      routes: names,
      bucket: limit.bucket ?? null,
      policy: limit.policy,
      by,
      limit: limit.limit,
      window: limit.window,
      used: limit.limit - remaining,
      remaining,
      resetSeconds: wholeSeconds(backlog)
    }
  })
}
