import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { authenticate, type Authenticator } from '../../auth/authenticate.js'
import { decodeCursor, pageOf } from '../../lib/paging.js'
import { allowedRoutes, offeredRoute } from '../../proxy/route-offer.js'
import type { RouteRegistry } from '../../proxy/route-registry.js'
import { pageAnswer, PageQuery, pageRequestOf } from '../schemas/paging.js'
import { OfferedRouteList } from '../schemas/routes.js'
import { bearerCaller } from './caller.js'
import { BEARER_PROBLEMS } from '../../auth/bearer.js'

/**
 * GET /v1/routes, bearer token only: the business routes the caller's user may call, as they call
 * them, for a client (or the developer portal) to offer; nothing of where a route forwards.
 */
export const routeListRoutes: FastifyPluginAsyncTypebox<{ routes: RouteRegistry; authenticator: Authenticator }> = async (app, { routes, authenticator }) => {
  const bearer = authenticate(authenticator, 'bearer')
  app.addHook('onRequest', bearer.onRequest)
  app.addHook('preHandler', bearer.preHandler)

  app.get('/v1/routes', {
    config: { authenticates: true, problems: [...BEARER_PROBLEMS, 'VALIDATION_FAILED'] },
    schema: {
      summary: 'The routes you may call',
      description: 'The business routes in force whose required `scopes` your user has (a route requiring a scope your user lacks is left out; ' +
        'a key registered with fewer scopes may call fewer: GET /v1/api-keys shows its scopes), in route-file order, each with its path, ' +
        'methods, tier, scopes, signature schemes and rate limits. A page at a time: `limit` (1 to 1000, default 100) and `cursor` ' +
        '(the `next_cursor` of the page before); `next_cursor` is null on the last page. The cursor names the last route given: ' +
        'a reload of the routes between pages goes on after that route if it is still there, else at its place.',
      tags: ['account'],
      security: [{ bearerAuth: [] }],
      querystring: PageQuery,
      response: { 200: OfferedRouteList }
    }
  }, async (request) => {
    const allowed = allowedRoutes(routes.current.routes, bearerCaller(request).scopes.set)
    const asked = pageRequestOf(request.query)
    let from = 0
    if (asked.cursor !== undefined) {
      // [position, name] of the last route given: after that route, or after its place if a reload took it away
      const [position, name] = decodeCursor(asked.cursor, 2, (part, i) => i === 1 || /^\d{1,9}$/.test(part))
      const at = Number(position)
      const found = allowed[at]?.name === name ? at : allowed.findIndex((route) => route.name === name)
      from = (found === -1 ? at : found) + 1
    }
    const page = pageOf(allowed.slice(from).map((route, i) => ({ route, at: from + i })), asked, ({ route, at }) => [String(at), route.name], undefined)
    return pageAnswer({ items: page.items.map(({ route }) => offeredRoute(route)), nextCursor: page.nextCursor })
  })
}
