// KEYGATE_WORKERS > 1, the primary's process: it forks and minds the workers (cluster.ts), passes
// SIGHUP on to them, shuts them down on SIGTERM or Ctrl-C, and holds the listeners the workers
// share: with KEYGATE_METRICS_PORT the one metrics listener (every worker's registry, asked over
// IPC and added up), with KEYGATE_ADMIN_PORT the admin API, on a store connection of its own,
// its route endpoints answered by the workers.
import { pino } from 'pino'
import { createOperations } from '../admin/operations.js'
import { startAdminServer, type AdminServer } from '../admin/server.js'
import type { UsageReader } from '../admin/usage.js'
import type { GatewayConfig } from '../config/env.js'
import { startMetricsServer, type MetricsServer } from '../http/metrics-server.js'
import { createKeyRegistry, keyPolicy } from '../keys/key-registry.js'
import { logDestination } from '../lib/log-format.js'
import { REDACTED, REDACTED_PATHS } from '../lib/redact-url.js'
import { readUsage } from '../limits/usage.js'
import { aggregateMetrics } from '../metrics/aggregate.js'
import { createClusterMetrics } from '../metrics/metrics.js'
import { createStore } from '../store/index.js'
import { createUserService } from '../users/user-service.js'
import { startCluster, type RunningCluster } from './cluster.js'
import { pidFileAt } from './pid-file.js'
import { closeOnSignals } from './signals.js'
import { countRoutes, startupLine } from './startup-line.js'

/** the primary waits this much longer than its workers' grace period before it kills them */
const PRIMARY_GRACE_MARGIN_MS = 2000

/**
 * KEYGATE_WORKERS > 1: fork the workers and mind them (startCluster). SIGHUP goes on to every
 * worker; SIGTERM or Ctrl-C makes every worker finish its requests, and the primary exits 0 once
 * all have exited cleanly.
 */
export async function runPrimary (config: GatewayConfig): Promise<void> {
  // the primary logs its own events (workers starting, exiting, signals) and the admin API's;
  // redacted as a gateway's log is, should anything log a request's credentials
  const log = pino({ level: config.logLevel, name: 'keygate-primary', redact: { paths: REDACTED_PATHS, censor: REDACTED } }, logDestination(config.logFormat))
  // the primary's PID: it is the process that takes the signals
  const pidFile = pidFileAt(config.pidFile)
  const workers = await startCluster({ workers: config.workers.count, log })
  let metricsServer: MetricsServer | undefined
  let admin: { server: AdminServer; close: () => Promise<void> } | undefined
  try {
    if (config.metrics.port !== undefined) {
      // the workers' registries and the primary's own (its count of worker restarts), added up
      const own = createClusterMetrics(workers)
      const scrape = async (openMetrics: boolean): Promise<{ contentType: string; body: string }> =>
        await aggregateMetrics([...await workers.metrics(), await own.getMetricsAsJSON()], openMetrics)
      metricsServer = await startMetricsServer(scrape,
        { port: config.metrics.port, host: config.metrics.host, log })
      log.info(`metrics for Prometheus at ${metricsServer.url}/metrics, every worker's added up`)
    }
    if (config.admin.port !== undefined && config.admin.token !== undefined) admin = await startPrimaryAdmin(config, workers, log)
  } catch (err) {
    // as a single gateway does: a metrics or admin port that cannot be had stops the start
    await metricsServer?.close()
    await workers.close()
    throw err
  }
  process.on('SIGHUP', () => {
    log.info({ workers: workers.pids() }, 'SIGHUP: every worker reloads its route, issuers and agents files')
    workers.reload()
  })
  closeOnSignals(async () => {
    await admin?.close()
    await metricsServer?.close()
    if (!await workers.close()) throw new Error('a worker did not shut down cleanly')
  }, (message, err) => { log.info({ err }, message) }, config.server.shutdownGraceMs + PRIMARY_GRACE_MARGIN_MS, {
    announce: (signal) => `${signal}: shutting down; every worker's in-flight requests have ${config.server.shutdownGraceMs} ms to finish`
  })
  // before the startup line: once it is logged, the PID file is there, and the signals are handled
  pidFile.write()
  const line = startupLine(config, {
    url: workers.url,
    routes: await countRoutes(config),
    workers: config.workers.count,
    metricsUrl: metricsServer?.url,
    adminUrl: admin?.server.url,
    // every worker listens on the decision port (a port 0 of each would differ: then unknown here)
    decisionUrl: config.decision.port === undefined || config.decision.port === 0 ? undefined : `http://${config.decision.host}:${config.decision.port}`
  })
  log.info({ ...line.fields, workers: workers.pids() }, line.message)
}

/**
 * The primary's admin API: users and keys on a store connection of its own (the workers' store:
 * revocations reach them as any gateway's do), routes through the workers.
 */
async function startPrimaryAdmin (config: GatewayConfig, workers: RunningCluster, log: pino.Logger):
Promise<{ server: AdminServer; close: () => Promise<void> }> {
  const store = await createStore(config)
  try {
    // it serves no signed request: no key cache, and no need to hear of revocations
    const keys = createKeyRegistry(store, { cacheSize: 0, ...keyPolicy(config), watch: false })
    const operations = createOperations({ users: createUserService(store, { scryptLogN: config.passwordScryptLogN }), keys })
    const { port, host, token } = config.admin as { port: number; host: string; token: string }
    // the workers' routes (they load them; the primary does not), counted in the shared store
    const usage: UsageReader = async (subject) => await readUsage((await workers.routes.current()).routes, store, subject)
    const server = await startAdminServer({ operations, routes: workers.routes, files: workers.files, usage, analytics: store }, { port, host, token, log })
    log.info(`admin API at ${server.url}, for every worker`)
    return {
      server,
      close: async () => {
        await server.close()
        await keys.close()
        await store.close()
      }
    }
  } catch (err) {
    await store.close()
    throw err
  }
}
