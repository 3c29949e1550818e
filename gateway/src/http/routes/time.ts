import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsync } from 'fastify'

export const TimeResponse = Type.Object({
  serverTime: Type.Integer({ description: 'the gateway\'s clock: milliseconds since the Unix epoch, the unit of X-API-Timestamp' })
})

/**
 * GET /v1/time (public): the clock the timestamp check compares X-API-Timestamp with, so a client
 * whose clock is off can correct it. Never cached: a stale time is a wrong time.
 */
export const timeRoutes: FastifyPluginAsync<{ now?: () => number }> = async (app, { now = Date.now }) => {
  app.get('/v1/time', { schema: { response: { 200: TimeResponse } } }, async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    return { serverTime: now() }
  })
}
