// Where a key or a user stands against one rate limit or quota (limits/usage.ts: LimitUsage), as
// the admin API's GET /v1/usage and the user API's usage read-outs answer it (TypeBox).
import { Type } from '@sinclair/typebox'

export const LimitUsage = Type.Object({
  routes: Type.Array(Type.String(), { description: 'the routes (by name) whose requests count in this counter' }),
  bucket: Type.Union([Type.String(), Type.Null()], { description: 'the shared counter\'s name; null: one route\'s own limit' }),
  policy: Type.String({ description: 'the name RateLimit-Policy gives this limit' }),
  by: Type.Union([Type.Literal('key'), Type.Literal('user'), Type.Literal('agent')]),
  limit: Type.Integer(),
  window: Type.String({ description: 'as the route file says it: 10s, 1m, 30d, ...' }),
  used: Type.Integer({ description: 'requests counted that have not drained yet' }),
  remaining: Type.Integer({ description: 'requests that would pass now' }),
  resetSeconds: Type.Integer({ description: 'seconds until the counter is back to its full limit (0: unused)' }),
  tools: Type.Optional(Type.Array(Type.String(), {
    description: 'an MCP route\'s tool limit (mcp.toolRateLimits): the tools (names or globs) whose calls count in it; absent for a route\'s own limit'
  }))
})

/** The user API's read-outs: the caller's own key, or the caller. */
export const KeyUsage = Type.Object({
  apiKey: Type.String(),
  items: Type.Array(LimitUsage, {
    description: 'the per-key limits of the signed routes this key may call (its scopes that its user still has), in route-file order; ' +
      'empty when none limits it'
  })
})

export const UserUsage = Type.Object({
  user: Type.String(),
  items: Type.Array(LimitUsage, {
    description: 'the per-user limits of the routes the caller\'s scopes allow, in route-file order; empty when none limits them'
  })
})
