// The admin API's route resource: the route table as it is in force (TypeBox; the OpenAPI document is made from these).
import { Type } from '@sinclair/typebox'

/**
 * One route as the route table has it. Open to more members: a route gains fields (the route
 * file's settings), and each shows here as it is.
 */
export const RouteView = Type.Object({
  name: Type.String(),
  prefix: Type.String({ description: 'the prefix, or the exact path when `exact`' }),
  exact: Type.Boolean(),
  upstream: Type.String(),
  auth: Type.String({ description: 'signed, bearer, agent or public' }),
  methods: Type.Array(Type.String()),
  rewrite: Type.Optional(Type.String()),
  bodyLimit: Type.Integer(),
  timeoutMs: Type.Integer(),
  addHeaders: Type.Record(Type.String(), Type.String(), { description: 'the values are shown as "***": they may hold the upstream\'s credentials' })
}, { additionalProperties: true })

export const RoutesInForce = Type.Object({
  file: Type.Union([Type.String(), Type.Null()], { description: 'KEYGATE_ROUTES; null: the built-in routes' }),
  items: Type.Array(RouteView)
})

export const RoutesReloaded = Type.Object({
  file: Type.String(),
  items: Type.Array(RouteView, { description: 'the routes now in force' }),
  workers: Type.Optional(Type.Integer({ description: 'with KEYGATE_WORKERS: how many worker processes reloaded' }))
})
