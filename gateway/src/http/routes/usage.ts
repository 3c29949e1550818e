import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { API_KEY_PATTERN } from '#client/protocol'
import { Type } from '@sinclair/typebox'
import { usageSeries, windowOf } from '../../analytics/read.js'
import { authenticate, type Authenticator } from '../../auth/authenticate.js'
import { GatewayError } from '../../errors.js'
import type { KeyRegistry } from '../../keys/key-registry.js'
import { readUsage } from '../../limits/usage.js'
import { allowedRoutes, callableByKey } from '../../proxy/route-offer.js'
import type { RouteRegistry } from '../../proxy/route-registry.js'
import type { Store } from '../../store/index.js'
import { ApiKeyParams } from '../schemas/api-keys.js'
import { KeyUsage, UserUsage } from '../schemas/usage.js'
import { Since, UsageSeries } from '../schemas/usage-analytics.js'
import { intersectScopes, scopeSet } from '../../users/scopes.js'
import { bearerCaller } from './caller.js'
import { BEARER_PROBLEMS } from '../../auth/bearer.js'

export interface UsageRoutesOptions {
  keys: KeyRegistry
  routes: RouteRegistry
  store: Pick<Store, 'peekRate' | 'readUsageCounts'>
  authenticator: Authenticator
}

/**
 * Where the caller stands against the rate limits and quotas of the routes they may call, read
 * without counting (limits/usage.ts, as the admin API's GET /v1/usage), bearer token only:
 *   GET /v1/api-keys/:apiKey/usage  one of the caller's keys: its per-key limits
 *   GET /v1/usage                   the caller: their per-user limits
 *   GET /v1/api-keys/:apiKey/usage/series  one of the caller's keys: its requests over time (analytics/)
 * Only routes the caller may call are read, so no answer names a route GET /v1/routes does not list.
 */
export const usageRoutes: FastifyPluginAsyncTypebox<UsageRoutesOptions> = async (app, { keys, routes, store, authenticator }) => {
  const bearer = authenticate(authenticator, 'bearer')
  app.addHook('onRequest', bearer.onRequest)
  app.addHook('preHandler', bearer.preHandler)

  app.get('/v1/api-keys/:apiKey/usage', {
    config: { authenticates: true, problems: [...BEARER_PROBLEMS, 'API_KEY_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Where one of your API keys stands against its rate limits and quotas',
      description: 'Every limit counted per key of the signed routes this key may call (those whose scopes are among the key\'s that your user ' +
        'still has), with what is used and what remains now; reading counts nothing. Limits per user: GET /v1/usage. ' +
        'A key of another user, an unknown key and anything that is not an apiKey all get the same 404 API_KEY_NOT_FOUND.',
      tags: ['account'],
      security: [{ bearerAuth: [] }],
      params: ApiKeyParams,
      response: { 200: KeyUsage }
    }
  }, async (request) => {
    const { user, scopes } = bearerCaller(request)
    const { apiKey } = request.params
    // Unknown, malformed and other users' keys get the same answer: nothing says a key exists.
    const record = API_KEY_PATTERN.test(apiKey) ? await keys.get(apiKey) : null
    if (record === null || record.owner !== user) {
      throw new GatewayError('API_KEY_NOT_FOUND', 'You have no API key with this apiKey; GET /v1/api-keys lists yours')
    }
    // what a request signed by this key may do: its scopes its user still has (a key without a list: all of them), as the scope stage judges
    const keyScopes = record.scopes === undefined ? scopes : intersectScopes(scopeSet(record.scopes), scopes)
    return { apiKey, items: await readUsage(callableByKey(routes.current.routes, keyScopes.set), store, { key: apiKey }) }
  })

  app.get('/v1/api-keys/:apiKey/usage/series', {
    config: { authenticates: true, problems: [...BEARER_PROBLEMS, 'API_KEY_NOT_FOUND', 'VALIDATION_FAILED', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'One of your API keys\' requests over time, bucket by bucket',
      description: 'The requests signed with this key that business routes answered, as every gateway counted them: by status class, ' +
        'and refusals by error code. Minute buckets for windows up to 6h, hour buckets beyond (up to 14d); every bucket of the window, ' +
        'zeros included; the last few seconds may not be counted yet. A key of another user, an unknown key and anything that is ' +
        'not an apiKey all get the same 404 API_KEY_NOT_FOUND.',
      tags: ['account'],
      security: [{ bearerAuth: [] }],
      params: ApiKeyParams,
      querystring: Type.Object({
        since: Type.Optional(Since('6h'))
      }, { additionalProperties: false }),
      response: { 200: UsageSeries }
    }
  }, async (request) => {
    const { user } = bearerCaller(request)
    const { apiKey } = request.params
    const record = API_KEY_PATTERN.test(apiKey) ? await keys.get(apiKey) : null
    if (record === null || record.owner !== user) {
      throw new GatewayError('API_KEY_NOT_FOUND', 'You have no API key with this apiKey; GET /v1/api-keys lists yours')
    }
    const since = request.query.since ?? '6h'
    return await usageSeries(store, { by: 'key', name: apiKey, since, windowMs: windowOf(since) })
  })

  app.get('/v1/usage', {
    config: { authenticates: true, problems: [...BEARER_PROBLEMS, 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Where you stand against your rate limits and quotas',
      description: 'Every limit counted per user of the routes your user may call (those whose scopes your user has), with what is used and ' +
        'what remains now, over the requests of all your keys and bearer token together; reading counts nothing. A quota shared through ' +
        'a bucket is listed once, with the routes that share it. Limits per key: GET /v1/api-keys/{apiKey}/usage; limits per address are not listed.',
      tags: ['account'],
      security: [{ bearerAuth: [] }],
      response: { 200: UserUsage }
    }
  }, async (request) => {
    const { user, scopes } = bearerCaller(request)
    return { user, items: await readUsage(allowedRoutes(routes.current.routes, scopes.set), store, { user }) }
  })
}
