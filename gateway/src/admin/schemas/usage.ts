// The admin API's usage resource: where an API key or a user stands against every rate limit and
// quota that counts per key or per user (TypeBox; the OpenAPI document is made from these).
import { Type, type Static } from '@sinclair/typebox'
import { API_KEY_PATTERN } from '#client/protocol'
import { LimitUsage } from '../../http/schemas/usage.js'

export const UsageQuery = Type.Object({
  key: Type.Optional(Type.String({ pattern: API_KEY_PATTERN.source, description: 'an apiKey: its per-key limits' })),
  user: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'a username: its per-user limits' }))
}, { additionalProperties: false })
export type UsageQuery = Static<typeof UsageQuery>

export const Usage = Type.Object({
  key: Type.Optional(Type.String()),
  user: Type.Optional(Type.String()),
  items: Type.Array(LimitUsage, { description: 'in route-file order; empty when no route limits this key or user' })
})
