// Graceful shutdown: once the gateway is closing, requests already in flight finish, and a new
// request on a kept-alive connection gets 503 SHUTTING_DOWN (problem+json, Connection: close)
// instead of Fastify's bare 503, so a client or load balancer knows to go elsewhere.
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { GatewayError } from '../../errors.js'

const shutdown: FastifyPluginAsync = async (app) => {
  let closing = false
  app.addHook('preClose', async () => { closing = true })
  // A kept-alive connection would keep the process alive after its last answer: close each one
  // as its in-flight request completes.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close')
    done(null, payload)
  })
  app.addHook('onRequest', (_request, _reply, done) => {
    done(closing
      ? new GatewayError('SHUTTING_DOWN', 'The gateway is shutting down; retry on another instance or shortly', {
        headers: { 'retry-after': '1', connection: 'close' }
      })
      : undefined)
  })
}

export const shutdownPlugin = fp(shutdown, { name: 'keygate-shutdown', fastify: '5.x', dependencies: ['keygate-problems'] })
