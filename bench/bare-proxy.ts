// Configuration (b) of the compare mode: the floor keygate is measured against. Fastify 5 and
// @fastify/http-proxy with their defaults, no auth, no logging, forwarding every request to the
// upstream as it came. Whatever keygate costs beyond this is the price of its auth layer and of
// the way it forwards.
import Fastify, { type FastifyInstance } from 'fastify'
import httpProxy from '@fastify/http-proxy'

export async function buildBareProxy (upstream: string): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  await app.register(httpProxy, { upstream })
  return app
}
