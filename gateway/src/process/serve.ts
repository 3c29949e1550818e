// `keygate serve` and `npm run start:gateway`: the gateway as configured by its environment, one
// process, or with KEYGATE_WORKERS > 1 a cluster's primary (whose workers run main.ts, which comes
// back here as a worker). The process handles its own signals: SIGTERM and Ctrl-C finish the
// in-flight requests, SIGHUP reloads the route, issuers and agents files; with KEYGATE_PID_FILE it says where it is.
import cluster from 'node:cluster'
import { loadConfig, type GatewayConfig } from '../config/env.js'
import { pidFileAt } from './pid-file.js'
import { runPrimary } from './primary.js'
import { runWorker } from './worker.js'
import { closeOnSignals, reloadOnSighup } from './signals.js'
import { startGateway } from './start.js'
import { startupLine } from './startup-line.js'

export async function serve (config: GatewayConfig = loadConfig()): Promise<void> {
  if (cluster.isWorker) {
    await runWorker(config)
    return
  }
  if (config.workers.count > 1) {
    await runPrimary(config)
    return
  }
  const pidFile = pidFileAt(config.pidFile)
  const gateway = await startGateway({ config })
  reloadOnSighup(gateway.app)
  closeOnSignals(gateway.close, (message, err) => { gateway.app.log.info({ err }, message) }, config.server.shutdownGraceMs)
  // before the startup line: once it is logged, the PID file is there, and the signals are handled
  pidFile.write()
  const line = startupLine(config, {
    url: gateway.url,
    routes: gateway.app.keygate.routes.current.routes.length,
    workers: 1,
    metricsUrl: gateway.metricsUrl,
    adminUrl: gateway.adminUrl,
    decisionUrl: gateway.decisionUrl
  })
  gateway.app.log.info(line.fields, line.message)
  if (config.workers.requested === 'auto' && config.redisUrl === undefined && config.redisTopology === undefined) {
    gateway.app.log.warn('KEYGATE_WORKERS=auto: one process only, since the embedded store cannot be shared between processes; ' +
      'set REDIS_URL to run one per core')
  }
}
