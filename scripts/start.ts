// `npm start`: the example clients service and keygate in front of it, in one process, so a
// newcomer can follow the README walkthrough. Ctrl-C or SIGTERM stops both, gateway first.
import { loadConfig } from '../gateway/src/config.js'
import { closeOnSignals, exitWithStartupError, startGateway } from '../gateway/src/server.js'
import { startUpstream } from '../upstream-stub/src/server.js'
import { DEFAULT_UPSTREAM_PORT } from '../gateway/src/config.js'

async function main (): Promise<void> {
  const config = loadConfig()
  const upstreamPort = Number(process.env.UPSTREAM_PORT ?? DEFAULT_UPSTREAM_PORT)
  const upstream = await startUpstream({ port: upstreamPort, host: '127.0.0.1', logger: { level: config.logLevel } })
  let gateway
  try {
    gateway = await startGateway({ config, createDemoUser: true })
  } catch (err) {
    await upstream.close()
    throw err
  }
  const { app } = gateway
  app.log.info(`keygate listens on ${gateway.url} and forwards ${config.routes.map((r) => r.prefix).join(', ')} to ${config.routes[0]?.upstream ?? '(none)'}`)
  closeOnSignals(async () => {
    await gateway.close()
    await upstream.close()
  }, (message, err) => { app.log.info({ err }, message) })
}

main().catch(exitWithStartupError)
