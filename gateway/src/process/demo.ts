// `keygate demo` and `npm start`: the example clients service and keygate in front of it, in one
// process, so a newcomer can follow the README walkthrough. Ctrl-C or SIGTERM stops both, gateway
// first. Always one gateway process (KEYGATE_WORKERS is for serve): the demo user is made when the
// store has no user, which one process can decide alone.
import { identityTokenFromEnv } from '../../../upstream-stub/src/identity-token.js'
import { startUpstream } from '../../../upstream-stub/src/server.js'
import { DEFAULT_UPSTREAM_PORT, loadConfig } from '../config/env.js'
import { logDestination } from '../lib/log-format.js'
import { pidFileAt } from './pid-file.js'
import { closeOnSignals, reloadOnSighup } from './signals.js'
import { startGateway } from './start.js'
import { startupLine } from './startup-line.js'

export async function demo (): Promise<void> {
  const loaded = loadConfig()
  const pidFile = pidFileAt(loaded.pidFile)
  const stream = logDestination(loaded.logFormat)
  const upstreamPort = Number(process.env.UPSTREAM_PORT ?? DEFAULT_UPSTREAM_PORT)
  const upstream = await startUpstream({
    port: upstreamPort,
    host: '127.0.0.1',
    // the example service's lines beside the gateway's, in the same format
    logger: { level: loaded.logLevel, ...(stream !== undefined && { stream }) },
    identityToken: identityTokenFromEnv(process.env)
  })
  // Without UPSTREAM_URL the routes go to the stub just started (UPSTREAM_PORT=0 picks a free port).
  const config = process.env.UPSTREAM_URL === undefined
    ? { ...loaded, routeDefaults: { ...loaded.routeDefaults, upstream: upstream.url } }
    : loaded
  let gateway
  try {
    gateway = await startGateway({ config, createDemoUser: true })
  } catch (err) {
    await upstream.close()
    throw err
  }
  const { app } = gateway
  if (config.workers.count > 1) {
    app.log.warn(`the demo runs one gateway process, beside the example service; KEYGATE_WORKERS=${config.workers.requested} ` +
      'applies to npm run start:gateway and keygate serve')
  }
  reloadOnSighup(app)
  closeOnSignals(async () => {
    await gateway.close()
    await upstream.close()
  }, (message, err) => { app.log.info({ err }, message) }, config.server.shutdownGraceMs)
  // before the startup line: once it is logged, the PID file is there, and the signals are handled
  pidFile.write()
  const routes = app.keygate.routes.current.routes
  const line = startupLine(config, { url: gateway.url, routes: routes.length, workers: 1, metricsUrl: gateway.metricsUrl, adminUrl: gateway.adminUrl })
  app.log.info(line.fields, line.message)
  // where the example service landed (UPSTREAM_PORT=0 picks a free port)
  app.log.info(`forwarding ${routes.map((r) => `${r.prefix} to ${r.upstream}`).join(', ')}`)
  if (config.portalPrefix !== undefined) {
    app.log.info(`developer portal: ${gateway.url}${config.portalPrefix}/ in a browser (log in as demo, make a key in the page, try a signed request)`)
  }
}
