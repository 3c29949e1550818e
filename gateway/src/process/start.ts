// One gateway: the app (app.ts) listening on its port, the metrics listener beside it, and a
// close that stops both. main.ts runs it as a process (and as each worker of a cluster, whose
// primary holds the one metrics listener); the tests run it in theirs.
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { buildApp, type BuildAppOptions } from '../app.js'
import type { GatewayConfig } from '../config/env.js'
import { startMetricsServer, type MetricsServer } from '../http/metrics-server.js'
import { keygateCommand } from '../lib/command-name.js'

export interface StartGatewayOptions {
  config: GatewayConfig
  logger?: BuildAppOptions['logger']
  /** when the store holds no user at all, create `demo` with a random password and print it once */
  createDemoUser?: boolean
  /** the routes when there is no route file (BuildAppOptions.routes) */
  routes?: BuildAppOptions['routes']
  /**
   * false: no metrics listener even with KEYGATE_METRICS_PORT, as in a cluster worker, whose
   * metrics the primary gathers (default true)
   */
  metricsListener?: boolean
}

export interface RunningGateway {
  app: FastifyInstance
  url: string
  /** the Prometheus listener's address, when KEYGATE_METRICS_PORT is set */
  metricsUrl: string | undefined
  close: () => Promise<void>
}

export async function startGateway ({ config, logger, createDemoUser = false, routes, metricsListener = true }: StartGatewayOptions): Promise<RunningGateway> {
  const app = await buildApp({ config, ...(logger !== undefined && { logger }), ...(routes !== undefined && { routes }) })
  let metrics: MetricsServer | undefined
  try {
    if (createDemoUser) await ensureDemoUser(app)
    // before listening: a cluster's primary asks a worker for its metrics once it listens
    if (config.metrics.port !== undefined) app.keygate.metrics.includeProcessMetrics()
    const url = await app.listen({ port: config.port, host: config.host })
    if (config.metrics.port !== undefined && metricsListener) {
      metrics = await startMetricsServer(app.keygate.metrics.scrape, { port: config.metrics.port, host: config.metrics.host, log: app.log })
      app.log.info(`metrics for Prometheus at ${metrics.url}/metrics`)
    }
    const close = async (): Promise<void> => {
      await app.close()
      await metrics?.close()
    }
    return { app, url, metricsUrl: metrics?.url, close }
  } catch (err) {
    await app.close()
    await metrics?.close()
    throw err
  }
}

/** No default password is ever built in: a fresh store gets a random one, shown once. */
async function ensureDemoUser (app: FastifyInstance): Promise<void> {
  const { store, users } = app.keygate
  if (await store.countUsers() > 0) return
  const password = randomBytes(12).toString('base64url')
  await users.upsert('demo', password)
  process.stderr.write([
    '',
    '  No user existed, so keygate created one for you to try the README walkthrough:',
    '',
    '    username: demo',
    `    password: ${password}`,
    '',
    '  It is shown only this once. Add real users with KEYGATE_BOOTSTRAP_USERS or',
    `  \`${keygateCommand()} users add NAME\`.`,
    '',
    ''
  ].join('\n'))
}
