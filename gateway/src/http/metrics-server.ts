// The metrics listener: GET /metrics on a port of its own (KEYGATE_METRICS_PORT), on 127.0.0.1
// unless KEYGATE_METRICS_HOST says otherwise. A scraper needs no keygate credentials, and the
// metrics never share the public port: what reaches them is decided by where this one listens.
// It serves whatever `scrape` produces: one gateway's registry, or, in a cluster's primary, every
// worker's added up (process/primary.ts).
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify'
import { mediaTypeParts } from '../lib/http-headers.js'
import { problemsPlugin } from './plugins/problems.js'

/** the exposition text and its content type: OpenMetrics (with exemplars) when asked, the classic text otherwise */
export type Scrape = (openMetrics: boolean) => Promise<{ contentType: string; body: string }>

/**
 * Whether an Accept header prefers OpenMetrics (as Prometheus's does) to the classic text: an
 * application/openmetrics-text entry whose q is above 0 and at least any text/plain or wildcard's.
 */
export function prefersOpenMetrics (accept: string | undefined): boolean {
  if (accept === undefined) return false
  let openMetrics = 0
  let other = 0
  for (const entry of accept.split(',')) {
    const [type = '', ...parameters] = mediaTypeParts(entry)
    const q = Number(parameters.find((p) => p.startsWith('q='))?.slice(2) ?? 1)
    if (type === 'application/openmetrics-text') openMetrics = Math.max(openMetrics, q)
    else if (type === 'text/plain' || type === 'text/*' || type === '*/*') other = Math.max(other, q)
  }
  return openMetrics > 0 && openMetrics >= other
}

export interface MetricsServer {
  url: string
  close: () => Promise<void>
}

export async function startMetricsServer (scrape: Scrape, options: { port: number; host: string; log?: FastifyBaseLogger }): Promise<MetricsServer> {
  const app = Fastify({ ...(options.log !== undefined && { loggerInstance: options.log }), logController: new LogController({ disableRequestLogging: true }) })
  await app.register(problemsPlugin)
  app.get('/metrics', async (request, reply) => {
    const { contentType, body } = await scrape(prefersOpenMetrics(request.headers.accept))
    reply.header('cache-control', 'no-store').header('vary', 'accept').type(contentType)
    return body
  })
  const listening = await app.listen({ port: options.port, host: options.host })
  return { url: listening, close: async () => { await app.close() } }
}
