// The admin API's usage: where one API key (?key=) or one user (?user=) stands against every rate
// limit and quota of the routes in force that counts per key or per user, read without counting
// (limits/usage.ts). An unknown key or user is a 404, so a typo is not read as "nothing used".
// And usage over time (analytics/): the top keys, users, routes or agents over a window, and one's series.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { topUsage, usageSeries, windowOf, type UsageDimension } from '../analytics/read.js'
import { GatewayError } from '../errors.js'
import { TopUsage, UsageSeries } from '../http/schemas/usage-analytics.js'
import type { LimitUsage, UsageSubject } from '../limits/usage.js'
import { noSuchKey } from './keys.js'
import type { Operations } from './operations.js'
import type { Store } from '../store/index.js'
import { Usage, UsageQuery } from './schemas/usage.js'
import { SeriesQuery, TopQuery } from './schemas/usage-analytics.js'
import { noSuchUser } from './users.js'

/** The usage of a key or a user against the limits of the routes in force. */
export type UsageReader = (subject: UsageSubject) => Promise<LimitUsage[]>

export interface AdminUsageOptions {
  usage: UsageReader
  operations: Operations
  /** where usage over time is counted (analytics/) */
  analytics: Pick<Store, 'readUsageCounts'>
}

export const adminUsageRoutes: FastifyPluginAsyncTypebox<AdminUsageOptions> = async (app, { usage, operations, analytics }) => {
  app.get('/v1/usage', {
    config: { problems: ['VALIDATION_FAILED', 'API_KEY_NOT_FOUND', 'USER_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Where a key, a user or a signed agent stands against its rate limits and quotas',
      description: 'Exactly one of `key`, `user` and `agent` (a directory origin). Lists every limit of the routes in force that counts ' +
        'per key (per user, per agent), ' +
        'with what is used and what remains now; reading counts nothing. A limit shared through a `bucket` is listed once, with ' +
        'every route that shares it. Limits by address are not listed.',
      tags: ['usage'],
      querystring: UsageQuery,
      response: { 200: Usage }
    }
  }, async (request) => {
    const { key, user, agent } = request.query
    if ([key, user, agent].filter((given) => given !== undefined).length !== 1) {
      throw new GatewayError('VALIDATION_FAILED', 'Give exactly one of ?key=APIKEY, ?user=NAME and ?agent=ORIGIN', {
        extra: { errors: [{ field: key === undefined ? 'key' : 'user', message: 'give exactly one of key, user and agent' }] }
      })
    }
    // an agent has no account: any origin is read (an agent never seen has used nothing)
    if (agent !== undefined) return { agent, items: await usage({ agent }) }
    if (key !== undefined) {
      if (await operations.getKey(key) === null) throw noSuchKey(key)
      return { key, items: await usage({ key }) }
    }
    const name = user as string
    if (await operations.getUser(name) === null) throw noSuchUser(name)
    return { user: name, items: await usage({ user: name }) }
  })

  app.get('/v1/usage/top', {
    config: { problems: ['VALIDATION_FAILED', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'The keys, users, routes or signed agents with the most requests, or the most refusals, over a window',
      description: 'Counted by every gateway on the store (KEYGATE_USAGE_ANALYTICS), business routes only, flushed every ' +
        'KEYGATE_USAGE_FLUSH_MS: the last seconds may not be in yet. Windows up to 6h are read in minute buckets, longer ones ' +
        '(up to 14d) in hour buckets, the current one included.',
      tags: ['usage'],
      querystring: TopQuery,
      response: { 200: TopUsage }
    }
  }, async (request) => {
    const { by, order = 'requests', since = '1h', limit = '10' } = request.query
    return await topUsage(analytics, { by, order, since, windowMs: windowOf(since), limit: Number(limit) })
  })

  app.get('/v1/usage/series', {
    config: { problems: ['VALIDATION_FAILED', 'API_KEY_NOT_FOUND', 'USER_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'One key\'s, user\'s, route\'s or signed agent\'s requests over a window, bucket by bucket',
      description: 'Exactly one of `key`, `user`, `route` and `agent` (a directory origin). Every bucket of the window, zeros included: minute buckets for ' +
        'windows up to 6h, hour buckets beyond (up to 14d). An unknown key or user is a 404; a route is any name (a route ' +
        'removed from the file keeps its history), and so is an agent.',
      tags: ['usage'],
      querystring: SeriesQuery,
      response: { 200: UsageSeries }
    }
  }, async (request) => {
    const { key, user, route, agent, since = '6h' } = request.query
    const given = [['key', key], ['user', user], ['route', route], ['agent', agent]]
      .filter(([, value]) => value !== undefined) as Array<[UsageDimension, string]>
    const [subject] = given
    if (subject === undefined || given.length > 1) {
      throw new GatewayError('VALIDATION_FAILED', 'Give exactly one of ?key=APIKEY, ?user=NAME, ?route=NAME and ?agent=ORIGIN', {
        extra: { errors: [{ field: subject?.[0] ?? 'key', message: 'give exactly one of key, user, route and agent' }] }
      })
    }
    const windowMs = windowOf(since)
    if (key !== undefined && await operations.getKey(key) === null) throw noSuchKey(key)
    if (user !== undefined && await operations.getUser(user) === null) throw noSuchUser(user)
    return await usageSeries(analytics, { by: subject[0], name: subject[1], since, windowMs })
  })
}
