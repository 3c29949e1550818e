// The gateway process: `npm run start:gateway`. One process serves the port, or, with
// KEYGATE_WORKERS > 1, this file runs twice over: as the cluster's primary, and in each worker it
// forks, where it starts the gateway exactly as a single process does.
import cluster from 'node:cluster'
import { loadConfig } from './config/env.js'
import { isMainModule } from './lib/is-main-module.js'
import { runPrimary, runWorker } from './process/cluster.js'
import { closeOnSignals, exitWithStartupError, reloadRoutesOnSighup } from './process/signals.js'
import { startGateway } from './process/start.js'
import { startupLine } from './process/startup-line.js'

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
  const line = startupLine(config, { url: gateway.url, routes: gateway.app.keygate.routes.current.routes.length, workers: 1, metricsUrl: gateway.metricsUrl })
  gateway.app.log.info(line.fields, line.message)
  if (config.workers.requested === 'auto' && config.redisUrl === undefined && config.redisTopology === undefined) {
    gateway.app.log.warn('KEYGATE_WORKERS=auto: one process only, since the embedded store cannot be shared between processes; ' +
      'set REDIS_URL to run one per core')
  }
  reloadRoutesOnSighup(gateway.app)
  closeOnSignals(gateway.close, (message, err) => { gateway.app.log.info({ err }, message) }, config.server.shutdownGraceMs)
}

if (isMainModule(import.meta.url)) main().catch(exitWithStartupError)
