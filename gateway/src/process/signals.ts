// What a gateway process does on signals: finish in-flight requests and exit on SIGTERM/Ctrl-C,
// re-read the route, issuers and agents files on SIGHUP (proxy/config-reload.ts); and how it
// reports a configuration error before exiting.
import type { FastifyInstance } from 'fastify'
import { ConfigError, DEFAULT_SHUTDOWN_GRACE_MS } from '../config/env.js'

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
export function closeOnSignals (
  close: () => Promise<void>,
  log: (message: string, err?: unknown) => void,
  graceMs = DEFAULT_SHUTDOWN_GRACE_MS,
  options: CloseOnSignalsOptions = {}
): void {
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

/** SIGHUP re-reads the route, issuers and agents files, all or nothing: a bad file is refused and every file in force stays. */
export function reloadOnSighup (app: FastifyInstance): void {
  process.on('SIGHUP', () => { reloadFiles(app, 'SIGHUP') })
}

/** The reload logs what it did (configuration reloaded) or why not (configuration reload refused). */
export function reloadFiles (app: FastifyInstance, cause: string): void {
  app.log.info(`${cause}: re-reading the route, issuers and agents files`)
  void app.keygate.reloader.reload()
}

/** Prints a configuration or startup error the way an operator can act on it, and exits. */
export function exitWithStartupError (err: unknown): never {
  const message = err instanceof ConfigError ? `configuration error: ${err.message}` : `keygate could not start: ${(err as Error).message}`
  process.stderr.write(`${message}\n`)
  process.exit(1)
}
