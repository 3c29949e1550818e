// The admin API's routes: the table in force, and a reload of the route file. A file with mistakes
// is refused whole (422 ROUTE_FILE_INVALID, every mistake listed) and the routes in force stay;
// without a route file there is nothing to reload (409 NO_ROUTE_FILE).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { GatewayError } from '../errors.js'
import { routeView } from '../proxy/route.js'
import type { RouteControl } from './route-control.js'
import { RoutesInForce, RoutesReloaded } from './schemas/routes.js'

const TAG = 'routes'

export const adminRouteRoutes: FastifyPluginAsyncTypebox<{ routes: RouteControl }> = async (app, { routes }) => {
  app.get('/v1/routes', {
    config: { problems: [] },
    schema: { summary: 'The routes in force', tags: [TAG], response: { 200: RoutesInForce } }
  }, async () => {
    const { file, routes: table } = await routes.current()
    return { file: file ?? null, items: table.map(routeView) }
  })

  app.post('/v1/routes/reload', {
    config: { audit: 'routes.reload', problems: ['NO_ROUTE_FILE', 'ROUTE_FILE_INVALID'] },
    schema: {
      summary: 'Re-read the route file',
      description: 'As SIGHUP does, and with an answer: the new routes, or every mistake in the file (the routes in force then stay). ' +
        'With KEYGATE_WORKERS, every worker reloads before the answer.',
      tags: [TAG],
      response: { 200: RoutesReloaded }
    }
  }, async (request) => {
    const result = await routes.reload()
    if (result.outcome === 'no-file') {
      request.auditOutcome = { outcome: 'no-file' }
      throw new GatewayError('NO_ROUTE_FILE', 'KEYGATE_ROUTES is not set: the gateway runs its built-in routes, and there is no file to reload')
    }
    if (result.outcome === 'invalid') {
      request.auditOutcome = { outcome: 'invalid', file: result.file, problems: result.problems.length }
      throw new GatewayError('ROUTE_FILE_INVALID', `${result.file} was refused (${result.problems.length} ` +
        `mistake${result.problems.length === 1 ? '' : 's'}); the routes in force stay: ${result.problems.join('; ')}`, {
        extra: { file: result.file, problems: result.problems }
      })
    }
    request.auditOutcome = { outcome: 'reloaded', file: result.file, routes: result.routes.length }
    return { file: result.file, items: result.routes.map(routeView), ...(result.workers !== undefined && { workers: result.workers }) }
  })
}
