// One gateway: the app (app.ts) listening on its port, the metrics listener and the admin API
// beside it, and a close that stops all three. main.ts runs it as a process (and as each worker of
// a cluster, whose primary holds the one metrics listener and the admin API); the tests run it in
// theirs.
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { createOperations } from '../admin/operations.js'
import { routeControlOf } from '../admin/route-control.js'
import { startAdminServer, type AdminServer } from '../admin/server.js'
import type { UsageReader } from '../admin/usage.js'
import { buildApp, type BuildAppOptions } from '../app.js'
import type { GatewayConfig } from '../config/env.js'
import { startMetricsServer, type MetricsServer } from '../http/metrics-server.js'
import { readUsage } from '../limits/usage.js'
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
  /** false: no admin API even with KEYGATE_ADMIN_PORT, as in a cluster worker (default true) */
  adminListener?: boolean
}

export interface RunningGateway {
  app: FastifyInstance
  url: string
  /** the Prometheus listener's address, when KEYGATE_METRICS_PORT is set */
  metricsUrl: string | undefined
  /** the admin API's address, when KEYGATE_ADMIN_PORT is set */
  adminUrl: string | undefined
  /** the decision listener's address, when KEYGATE_DECISION_PORT is set */
  decisionUrl: string | undefined
  close: () => Promise<void>
}

export async function startGateway (options: StartGatewayOptions): Promise<RunningGateway> {
  const { config, logger, createDemoUser = false, routes, metricsListener = true, adminListener = true } = options
  const app = await buildApp({ config, ...(logger !== undefined && { logger }), ...(routes !== undefined && { routes }) })
  let metrics: MetricsServer | undefined
  let admin: AdminServer | undefined
  try {
    if (createDemoUser) await ensureDemoUser(app)
    // before listening: a cluster's primary asks a worker for its metrics once it listens
    if (config.metrics.port !== undefined) app.keygate.metrics.includeProcessMetrics()
    const url = await app.listen({ port: config.port, host: config.host })
    if (config.metrics.port !== undefined && metricsListener) {
      metrics = await startMetricsServer(app.keygate.metrics.scrape, { port: config.metrics.port, host: config.metrics.host, log: app.log })
      app.log.info(`metrics for Prometheus at ${metrics.url}/metrics`)
    }
    const decisions = app.keygate.decisions
    let decisionUrl: string | undefined
    if (decisions !== undefined && config.decision.port !== undefined) {
      decisionUrl = await decisions.listen({ port: config.decision.port, host: config.decision.host })
      app.log.info(`decisions for ${config.decision.trustedProxies.join(', ')} at ${decisionUrl}/decide/<nginx|ingress-nginx|traefik|caddy|envoy>`)
    }
    if (config.admin.port !== undefined && config.admin.token !== undefined && adminListener) {
      const { users, keys, routes: registry, store, reloader } = app.keygate
      const usage: UsageReader = async (subject) => await readUsage(registry.current.routes, store, subject)
      const services = { operations: createOperations({ users, keys }), routes: routeControlOf(registry), files: reloader, usage, analytics: store }
      admin = await startAdminServer(services,
        { port: config.admin.port, host: config.admin.host, token: config.admin.token, log: app.log })
      app.log.info(`admin API at ${admin.url}`)
    }
    const close = async (): Promise<void> => {
      // the admin API first: it uses the app's services
      await admin?.close()
      await app.close()
      await metrics?.close()
    }
    return { app, url, metricsUrl: metrics?.url, adminUrl: admin?.url, decisionUrl, close }
  } catch (err) {
    await admin?.close()
    await app.close()
    await metrics?.close()
    throw err
  }
}

/** No default password is ever built in: a fresh store gets a random one, shown once. */
async function ensureDemoUser (app: FastifyInstance): Promise<void> {
  const { store, users } = app.keygate
  if (await store.countUsers() > 0) return
  // hex, 128 bits: base64url's '-' as the first character made `keygate login --password X`
  // take it for an option (1 start in 64), and neither '-' nor '_' is easy to select and copy
  const password = randomBytes(16).toString('hex')
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
