// The gateway process: configuration, logger, listen, graceful close. Everything else is app.ts.
import { randomBytes } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { buildApp, type BuildAppOptions } from './app.js'
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

/**
 * Ctrl-C or SIGTERM: stop accepting, let in-flight requests finish, exit 0. Past the grace
 * period, or on a second signal, exit 1 at once.
 */
export function closeOnSignals (close: () => Promise<void>, log: (message: string, err?: unknown) => void, graceMs = DEFAULT_SHUTDOWN_GRACE_MS): void {
  let closing = false
  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) process.exit(1)
    closing = true
    log(`${signal}: shutting down; in-flight requests have ${graceMs} ms to finish`)
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
  process.on('SIGHUP', () => {
    if (app.keygate.routes.file === undefined) {
      app.log.info('SIGHUP: no KEYGATE_ROUTES file to reload')
      return
    }
    void app.keygate.routes.reload()
  })
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

async function main (): Promise<void> {
  const config = loadConfig()
  const gateway = await startGateway({ config })
  reloadRoutesOnSighup(gateway.app)
  closeOnSignals(gateway.close, (message, err) => { gateway.app.log.info({ err }, message) }, config.server.shutdownGraceMs)
}

if (isMainModule(import.meta.url)) main().catch(exitWithStartupError)
