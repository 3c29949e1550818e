// The admin API's usage over time: the top keys, users, routes or agents, and one's series (TypeBox).
import { Type, type Static } from '@sinclair/typebox'
import { API_KEY_PATTERN } from '#client/protocol'
import { Dimension, Since } from '../../http/schemas/usage-analytics.js'
import { AGENT_ORIGIN_PATTERN } from './usage.js'

export const TopQuery = Type.Object({
  by: Dimension,
  order: Type.Optional(Type.Union([Type.Literal('requests'), Type.Literal('refusals')], { description: 'default requests' })),
  since: Type.Optional(Since('1h')),
  limit: Type.Optional(Type.String({ pattern: '^(?:[1-9][0-9]{0,2}|1000)$', description: 'how many, 1 to 1000; default 10' }))
}, { additionalProperties: false })
export type TopQuery = Static<typeof TopQuery>

export const SeriesQuery = Type.Object({
  key: Type.Optional(Type.String({ pattern: API_KEY_PATTERN.source, description: 'an apiKey' })),
  user: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'a username' })),
  route: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'a route\'s name' })),
  agent: Type.Optional(Type.String({ pattern: AGENT_ORIGIN_PATTERN, maxLength: 300, description: 'a signed agent\'s directory origin' })),
  since: Type.Optional(Since('6h'))
}, { additionalProperties: false })
export type SeriesQuery = Static<typeof SeriesQuery>
