// The admin API's usage resource: where an API key or a user stands against every rate limit and
// quota that counts per key, per user or per signed agent (TypeBox; the OpenAPI document is made from these).
import { Type, type Static } from '@sinclair/typebox'
import { API_KEY_PATTERN } from '#client/protocol'
import { LimitUsage } from '../../http/schemas/usage.js'

/** a signed agent's directory origin, as x-gateway-agent and the usage series name it: https://host[:port] */
export const AGENT_ORIGIN_PATTERN = '^https://[^/?#@\\s]+$'

export const UsageQuery = Type.Object({
  key: Type.Optional(Type.String({ pattern: API_KEY_PATTERN.source, description: 'an apiKey: its per-key limits' })),
  user: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'a username: its per-user limits' })),
  agent: Type.Optional(Type.String({ pattern: AGENT_ORIGIN_PATTERN, maxLength: 300, description: 'a signed agent\'s directory origin: its per-agent limits' }))
}, { additionalProperties: false })
export type UsageQuery = Static<typeof UsageQuery>

export const Usage = Type.Object({
  key: Type.Optional(Type.String()),
  user: Type.Optional(Type.String()),
  agent: Type.Optional(Type.String()),
  items: Type.Array(LimitUsage, { description: 'in route-file order; empty when no route limits this key, user or agent' })
})
