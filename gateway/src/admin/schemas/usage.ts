// The admin API's usage resource: where an API key or a user stands against every rate limit and
// quota that counts per key or per user (TypeBox; the OpenAPI document is made from these).
import { Type, type Static } from '@sinclair/typebox'
import { API_KEY_PATTERN } from '#client/protocol'

export const UsageQuery = Type.Object({
  key: Type.Optional(Type.String({ pattern: API_KEY_PATTERN.source, description: 'an apiKey: its per-key limits' })),
  user: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'a username: its per-user limits' }))
}, { additionalProperties: false })
export type UsageQuery = Static<typeof UsageQuery>

export const LimitUsage = Type.Object({
  routes: Type.Array(Type.String(), { description: 'the routes (by name) whose requests count in this counter' }),
  bucket: Type.Union([Type.String(), Type.Null()], { description: 'the shared counter\'s name; null: one route\'s own limit' }),
  policy: Type.String({ description: 'the name RateLimit-Policy gives this limit' }),
  by: Type.Union([Type.Literal('key'), Type.Literal('user')]),
  limit: Type.Integer(),
  window: Type.String({ description: 'as the route file says it: 10s, 1m, 30d, ...' }),
  used: Type.Integer({ description: 'requests counted that have not drained yet' }),
  remaining: Type.Integer({ description: 'requests that would pass now' }),
  resetSeconds: Type.Integer({ description: 'seconds until the counter is back to its full limit (0: unused)' })
})

export const Usage = Type.Object({
  key: Type.Optional(Type.String()),
  user: Type.Optional(Type.String()),
  items: Type.Array(LimitUsage, { description: 'in route-file order; empty when no route limits this key or user' })
})
