// The usage read-out (the admin API's GET /v1/usage?key=|user=|agent=): for an API key, a user or a
// signed agent (its directory origin), every limit of the current routes that counts per key (per
// user, per agent), with how much of it is used now,
// read without counting anything (store.peekRate). A counter shared through a bucket is listed
// once, with every route that shares it. An MCP route's tools' own limits (mcp.toolRateLimits) are
// listed too, each with the tools (names or globs) that count in it.
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
  /** a tool's own limit (an MCP route's toolRateLimits): the tools (names or globs) whose calls count in it */
  tools?: string[]
}

/** An MCP route's tools' own limits (mcp-calls/policy.ts: toolLimits), by the name or glob of each entry. */
interface ToolLimitRules {
  exact: ReadonlyMap<string, readonly RateLimit[]>
  globs: ReadonlyArray<{ pattern: string; requirement: readonly RateLimit[] }>
}
/** A route as the read-out needs it: its limits, and on an MCP route its tools' */
export type UsageRoute = LimitedRoute & { readonly mcp?: { readonly toolLimits?: ToolLimitRules | undefined } | undefined }

/** the route's own limits (no tool), then each tool entry's */
function limitLists (route: UsageRoute): Array<[string | undefined, readonly RateLimit[]]> {
  const tools = route.mcp?.toolLimits
  if (tools === undefined) return [[undefined, route.rateLimits]]
  const globs = tools.globs.map(({ pattern, requirement }): [string, readonly RateLimit[]] => [pattern, requirement])
  return [[undefined, route.rateLimits], ...tools.exact, ...globs]
}

/** Every per-key (per-user, per-agent) limit of `routes` for the subject, in route-file order, counted by nothing. */
export async function readUsage (routes: readonly UsageRoute[], store: Pick<Store, 'peekRate'>, subject: UsageSubject): Promise<LimitUsage[]> {
  const [by, name] = 'key' in subject ? ['key', subject.key] as const : 'user' in subject ? ['user', subject.user] as const : ['agent', subject.agent] as const
  const counters = new Map<string, { limit: RateLimit; routes: string[]; tools: string[] }>()
  for (const route of routes) {
    for (const [tool, limits] of limitLists(route)) {
      for (const limit of limits) {
        if (limit.by !== by) continue
        let entry = counters.get(limit.counter)
        if (entry === undefined) counters.set(limit.counter, entry = { limit, routes: [], tools: [] })
        if (!entry.routes.includes(route.name)) entry.routes.push(route.name)
        if (tool !== undefined && !entry.tools.includes(tool)) entry.tools.push(tool)
      }
    }
  }
  const entries = [...counters.values()]
  if (entries.length === 0) return []
  const { backlogMs } = await store.peekRate(entries.map(({ limit }) => ({ key: counterKey(limit, name), limit: limit.limit, windowMs: limit.windowMs })))
  return entries.map(({ limit, routes: names, tools }, i) => {
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
      resetSeconds: wholeSeconds(backlog),
      ...(tools.length > 0 && { tools })
    }
  })
}
