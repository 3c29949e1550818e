// The metrics listener: GET /metrics on a port of its own (KEYGATE_METRICS_PORT), on 127.0.0.1
// unless KEYGATE_METRICS_HOST says otherwise. A scraper needs no keygate credentials, and the
// metrics never share the public port: what reaches them is decided by where this one listens.
// It serves whatever `scrape` produces: one gateway's registry, or, in a cluster's primary, every
// worker's added up (process/cluster.ts).
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify'
import { problemsPlugin } from './plugins/problems.js'

/** the exposition text and its content type */
export type Scrape = () => Promise<{ contentType: string; body: string }>

export interface MetricsServer {
  url: string
  close: () => Promise<void>
}

export async function startMetricsServer (scrape: Scrape, options: { port: number; host: string; log?: FastifyBaseLogger }): Promise<MetricsServer> {
  const app = Fastify({ ...(options.log !== undefined && { loggerInstance: options.log }), logController: new LogController({ disableRequestLogging: true }) })
  await app.register(problemsPlugin)
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await scrape()
    reply.header('cache-control', 'no-store').type(contentType)
    return body
  })
  const listening = await app.listen({ port: options.port, host: options.host })
  return { url: listening, close: async () => { await app.close() } }
}
