// A tool's own rate limits and quotas (the route's `mcp.toolRateLimits`; docs/mcp.md): the limits of
// the most specific entry that names a tools/call's tool (exact, or a glob, as the policy's `tools`)
// are counted with the route's own, in the same atomic store step (limits/limiter.ts), so a call
// refused by either counts in neither. In a batch (protocol versions before 2025-06-18) each call
// counts: n calls of one tool cost n requests of its counters.
import type { LimitedRoute, RateLimit } from '../limits/rate-limit.js'
import type { McpMessage } from './messages.js'
import { lookup, type McpPolicy } from './policy.js'

/** What a request is counted against: the route with its tools' limits, and how many requests each counter takes (absent: one). */
export interface ToolLimited {
  route: LimitedRoute
  costs?: ReadonlyMap<RateLimit, number>
}

/** a tool entry's limits -> the route's limits and them: one object per entry, so the limiter caches its RateLimit-Policy */
const combined = new WeakMap<readonly RateLimit[], LimitedRoute>()

function withTool (route: LimitedRoute, tool: readonly RateLimit[]): LimitedRoute {
  let found = combined.get(tool)
  if (found === undefined) {
    found = { name: route.name, rateLimits: [...route.rateLimits, ...tool], onStoreDown: route.onStoreDown }
    combined.set(tool, found)
  }
  return found
}

/** The limits of a request's tool calls; undefined when none of its messages calls a tool that has some. */
export function toolLimited (route: LimitedRoute & { readonly mcp?: McpPolicy }, messages: readonly McpMessage[] | undefined): ToolLimited | undefined {
  const rules = route.mcp?.toolLimits
  if (rules === undefined || messages === undefined) return undefined
  let first: readonly RateLimit[] | undefined
  let calls: Map<readonly RateLimit[], number> | undefined
  for (const message of messages) {
    if (message.method !== 'tools/call') continue
    const limits = lookup(rules, String(message.params?.name))?.requirement
    if (limits === undefined) continue
    if (first === undefined) {
      first = limits
      continue
    }
    calls ??= new Map([[first, 1]])
    calls.set(limits, (calls.get(limits) ?? 0) + 1)
  }
  if (first === undefined) return undefined
  if (calls === undefined) return { route: withTool(route, first) }
  // a batch: each counter once, taking as many requests as the batch's calls that count in it
  const byCounter = new Map<string, RateLimit>()
  const costs = new Map<RateLimit, number>()
  for (const [limits, n] of calls) {
    for (const limit of limits) {
      const seen = byCounter.get(limit.counter)
      if (seen === undefined) byCounter.set(limit.counter, limit)
      costs.set(seen ?? limit, (costs.get(seen ?? limit) ?? 0) + n)
    }
  }
  return { route: { name: route.name, rateLimits: [...route.rateLimits, ...byCounter.values()], onStoreDown: route.onStoreDown }, costs }
}
