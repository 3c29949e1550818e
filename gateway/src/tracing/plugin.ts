// The SERVER span of each request of a listener (tracing/tracer.ts), registered only when tracing
// is on: with it off, no hook exists and a request pays nothing.
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { NO_ROUTE, routeLabel } from '../http/plugins/metrics.js'
import type { Tracing } from './tracer.js'

export interface TracingPluginOptions {
  tracing: Tracing
  /** the public port (its pipeline describes the request itself); false: decision mode */
  inline: boolean
}

const tracingHooks: FastifyPluginAsync<TracingPluginOptions> = async (app, { tracing, inline }) => {
  app.addHook('onRequest', (request, _reply, done) => {
    tracing.onRequest(request, inline)
    done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    // the span's name: the route table's name, or keygate's own endpoint's URL pattern (never the client's URL)
    const label = routeLabel(request)
    const name = label === NO_ROUTE ? undefined : label
    const route = request.forward?.route
    const pattern = route === undefined ? name : route.exact ? route.prefix : `${route.prefix}*`
    tracing.onResponse(request, reply, name, pattern)
    done()
  })
}

export const tracingPlugin = fp(tracingHooks, { name: 'keygate-tracing', fastify: '5.x', dependencies: ['keygate-problems'] })
