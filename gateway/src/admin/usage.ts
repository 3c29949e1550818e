// The admin API's usage: where one API key (?key=) or one user (?user=) stands against every rate
// limit and quota of the routes in force that counts per key or per user, read without counting
// (limits/usage.ts). An unknown key or user is a 404, so a typo is not read as "nothing used".
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { GatewayError } from '../errors.js'
import type { LimitUsage, UsageSubject } from '../limits/usage.js'
import { noSuchKey } from './keys.js'
import type { Operations } from './operations.js'
import { Usage, UsageQuery } from './schemas/usage.js'
import { noSuchUser } from './users.js'

/** The usage of a key or a user against the limits of the routes in force. */
export type UsageReader = (subject: UsageSubject) => Promise<LimitUsage[]>

export const adminUsageRoutes: FastifyPluginAsyncTypebox<{ usage: UsageReader; operations: Operations }> = async (app, { usage, operations }) => {
  app.get('/v1/usage', {
    config: { problems: ['VALIDATION_FAILED', 'API_KEY_NOT_FOUND', 'USER_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Where a key or a user stands against its rate limits and quotas',
      description: 'Exactly one of `key` and `user`. Lists every limit of the routes in force that counts per key (or per user), ' +
        'with what is used and what remains now; reading counts nothing. A limit shared through a `bucket` is listed once, with ' +
        'every route that shares it. Limits by address are not listed.',
      tags: ['usage'],
      querystring: UsageQuery,
      response: { 200: Usage }
    }
  }, async (request) => {
    const { key, user } = request.query
    if ((key === undefined) === (user === undefined)) {
      throw new GatewayError('VALIDATION_FAILED', 'Give exactly one of ?key=APIKEY and ?user=NAME', {
        extra: { errors: [{ field: key === undefined ? 'key' : 'user', message: 'give exactly one of key and user' }] }
      })
    }
    if (key !== undefined) {
      if (await operations.getKey(key) === null) throw noSuchKey(key)
      return { key, items: await usage({ key }) }
    }
    const name = user as string
    if (await operations.getUser(name) === null) throw noSuchUser(name)
    return { user: name, items: await usage({ user: name }) }
  })
}
