// The gateway process: configuration, logger, listen, graceful close. Everything else is app.ts.
// With KEYGATE_WORKERS > 1 this file runs twice over: as the cluster's primary (cluster.ts), and
// in each worker it forks, where it starts the gateway exactly as a single process does.
import cluster from 'node:cluster'
import { randomBytes } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import { buildApp, type BuildAppOptions } from './app.js'
import { RELOAD_ROUTES, startCluster, type WorkerMessage } from './cluster.js'
import { ConfigError, DEFAULT_SHUTDOWN_GRACE_MS, loadConfig, type GatewayConfig } from './config.js'
import { startMetricsServer, type MetricsServer } from './metrics/server.js'

export interface StartGatewayOptions {
  config: GatewayConfig
  logger?: BuildAppOptions['logger']
  /** when the store holds no user at all, create `demo` with a random password and print it once */
  createDemoUser?: boolean
}

export interface RunningGateway {
  app: FastifyInstance
  url: string
  /** the Prometheus listener's address, when KEYGATE_METRICS_PORT is set */
  metricsUrl: string | undefined
  close: () => Promise<void>
}

export async function startGateway ({ config, logger, createDemoUser = false }: StartGatewayOptions): Promise<RunningGateway> {
  const app = await buildApp({ config, ...(logger !== undefined && { logger }) })
  let metrics: MetricsServer | undefined
  try {
    if (createDemoUser) await ensureDemoUser(app)
    const url = await app.listen({ port: config.port, host: config.host })
    if (config.metrics.port !== undefined) {
      metrics = await startMetricsServer(app.keygate.metrics, { port: config.metrics.port, host: config.metrics.host, log: app.log })
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
    '  `npm run keygate -- users add NAME`.',
    '',
    ''
  ].join('\n'))
}

export interface CloseOnSignalsOptions {
  /**
   * A second signal exits at once (default). A cluster worker ignores it instead: Ctrl-C reaches
   * the worker and the primary, which then sends a SIGTERM of its own; the primary is the one
   * that answers a second Ctrl-C.
   */
  secondSignalExits?: boolean
  /** the line logged on the first signal; default: in-flight requests have graceMs to finish */
  announce?: (signal: NodeJS.Signals) => string
}

/**
 * Ctrl-C or SIGTERM: stop accepting, let in-flight requests finish, exit 0. Past the grace
 * period, or on a second signal, exit 1 at once.
 */
export function closeOnSignals (close: () => Promise<void>, log: (message: string, err?: unknown) => void, graceMs = DEFAULT_SHUTDOWN_GRACE_MS, options: CloseOnSignalsOptions = {}): void {
  const secondSignalExits = options.secondSignalExits ?? true
  let closing = false
  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) {
      if (secondSignalExits) process.exit(1)
      return
    }
    closing = true
    log(options.announce?.(signal) ?? `${signal}: shutting down; in-flight requests have ${graceMs} ms to finish`)
    setTimeout(() => {
      log(`requests still in flight after ${graceMs} ms; exiting anyway`)
      process.exit(1)
    }, graceMs).unref()
    close().then(() => process.exit(0), (err: unknown) => {
      log('shutdown failed', err)
      process.exit(1)
    })
  }
  process.on('SIGINT', shutdown)
  process.on('SIGTERM', shutdown)
}

/** SIGHUP re-reads the route file; a bad file is refused and the running routes stay. */
export function reloadRoutesOnSighup (app: FastifyInstance): void {
  process.on('SIGHUP', () => { reloadRoutes(app, 'SIGHUP') })
}

function reloadRoutes (app: FastifyInstance, cause: string): void {
  if (app.keygate.routes.file === undefined) {
    app.log.info(`${cause}: no KEYGATE_ROUTES file to reload`)
    return
  }
  void app.keygate.routes.reload()
}

export function isMainModule (metaUrl: string): boolean {
  const entry = process.argv[1]
  if (entry === undefined) return false
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(metaUrl))
  } catch {
    return false
  }
}

/** Prints a configuration or startup error the way an operator can act on it, and exits. */
export function exitWithStartupError (err: unknown): never {
  const message = err instanceof ConfigError ? `configuration error: ${err.message}` : `keygate could not start: ${(err as Error).message}`
  process.stderr.write(`${message}\n`)
  process.exit(1)
}

/** the primary waits this much longer than its workers' grace period before it kills them */
const PRIMARY_GRACE_MARGIN_MS = 2000

/**
 * KEYGATE_WORKERS > 1: fork the workers and mind them (cluster.ts). SIGHUP goes on to every
 * worker; SIGTERM or Ctrl-C makes every worker finish its requests, and the primary exits 0 once
 * all have exited cleanly.
 */
export async function runPrimary (config: GatewayConfig): Promise<void> {
  // the primary logs only its own events (workers starting, exiting, signals): nothing to redact
  const log = pino({ level: config.logLevel, name: 'keygate-primary' })
  const workers = await startCluster({ workers: config.workers.count, log })
  log.info({ workers: workers.pids() }, `keygate listens on ${workers.url} with ${config.workers.count} worker processes`)
  process.on('SIGHUP', () => {
    log.info({ workers: workers.pids() }, 'SIGHUP: every worker reloads its routes')
    workers.reloadRoutes()
  })
  closeOnSignals(async () => {
    if (!await workers.close()) throw new Error('a worker did not shut down cleanly')
  }, (message, err) => { log.info({ err }, message) }, config.server.shutdownGraceMs + PRIMARY_GRACE_MARGIN_MS, {
    announce: (signal) => `${signal}: shutting down; every worker's in-flight requests have ${config.server.shutdownGraceMs} ms to finish`
  })
}

/** A cluster worker: the gateway as a single process runs it, told what to do by the primary. */
export async function runWorker (config: GatewayConfig): Promise<void> {
  // Both handlers are in place before the gateway starts: a shutdown or a reload may come meanwhile.
  let gateway: RunningGateway | undefined
  let reloadPending = false
  process.on('message', (message: unknown) => {
    if ((message as Partial<WorkerMessage> | null)?.type !== RELOAD_ROUTES.type) return
    if (gateway === undefined) reloadPending = true
    else reloadRoutes(gateway.app, 'reload from the primary')
  })
  const starting = startGateway({ config })
  closeOnSignals(async () => { await (await starting).close() }, (message, err) => { gateway?.app.log.info({ err }, message) },
    config.server.shutdownGraceMs, { secondSignalExits: false })
  gateway = await starting
  reloadRoutesOnSighup(gateway.app)
  if (reloadPending) reloadRoutes(gateway.app, 'reload from the primary')
}

async function main (): Promise<void> {
  const config = loadConfig()
  if (cluster.isWorker) {
    await runWorker(config)
    return
  }
  if (config.workers.count > 1) {
    await runPrimary(config)
    return
  }
  const gateway = await startGateway({ config })
  if (config.workers.requested === 'auto' && config.redisUrl === undefined && config.redisTopology === undefined) {
    gateway.app.log.warn('KEYGATE_WORKERS=auto: one process only, since the embedded store cannot be shared between processes; set REDIS_URL to run one per core')
  }
  reloadRoutesOnSighup(gateway.app)
  closeOnSignals(gateway.close, (message, err) => { gateway.app.log.info({ err }, message) }, config.server.shutdownGraceMs)
}

if (isMainModule(import.meta.url)) main().catch(exitWithStartupError)
