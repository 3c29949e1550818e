// The one line a gateway logs once it serves, whichever way it was started (main.ts alone, a
// cluster's primary, npm start): where it listens and what it runs with, so the first screen of
// a log answers "which store, which routes, how many processes, which ports" without a lookup.
import type { GatewayConfig } from '../config/env.js'
import { loadRouteFile } from '../proxy/route-file.js'
import { defaultRoutes } from '../proxy/route.js'
import { describeRedis } from '../store/redis-connection.js'

export interface StartupFacts {
  /** where clients connect */
  url: string
  /** the Redis, never with its password (describeRedis), or `embedded` */
  store: string
  /** the routes in force; undefined when the primary could not read the route file its workers read */
  routes: number | undefined
  /** gateway processes serving the port */
  workers: number
  /** the Prometheus listener's port, or off */
  metricsPort: number | 'off'
  /** the admin API's port, or off */
  adminPort: number | 'off'
  /** decision mode's listener's port, or off */
  decisionPort: number | 'off'
}

export interface StartupLine {
  /** logged under `startup`, beside the pino line's own fields */
  fields: { startup: StartupFacts }
  message: string
}

/** The store as the startup line names it. */
function storeOf (config: Pick<GatewayConfig, 'redisUrl' | 'redisTopology'>): string {
  const connection = config.redisUrl ?? config.redisTopology
  return connection === undefined ? 'embedded' : describeRedis(connection)
}

/**
 * The startup line. `metricsUrl`, `adminUrl`, `decisionUrl`: the metrics listener's, the admin API's and the decision listener's addresses
 * once they listen (their ports may have been 0, a free one), undefined when there is none.
 */
export function startupLine (config: Pick<GatewayConfig, 'redisUrl' | 'redisTopology'>,
  running: {
    url: string; routes: number | undefined; workers: number; metricsUrl: string | undefined; adminUrl?: string | undefined; decisionUrl?: string | undefined
  }
): StartupLine {
  const portOf = (url: string | undefined): number | 'off' => url === undefined ? 'off' : Number(new URL(url).port)
  const startup: StartupFacts = {
    url: running.url,
    store: storeOf(config),
    routes: running.routes,
    workers: running.workers,
    metricsPort: portOf(running.metricsUrl),
    adminPort: portOf(running.adminUrl),
    decisionPort: portOf(running.decisionUrl)
  }
  const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`
  const message = `keygate listens on ${startup.url} (store ${startup.store}, ` +
    `${startup.routes === undefined ? 'routes unknown' : plural(startup.routes, 'route')}, ${plural(startup.workers, 'worker')}, ` +
    `metrics ${startup.metricsPort === 'off' ? 'off' : `on port ${startup.metricsPort}`}, ` +
    `admin ${startup.adminPort === 'off' ? 'off' : `on port ${startup.adminPort}`}` +
    `${startup.decisionPort === 'off' ? '' : `, decisions on port ${startup.decisionPort}`})`
  return { fields: { startup }, message }
}

/**
 * How many routes the workers of a cluster run with, read by the primary (which loads no routes
 * of its own): the route file's, or the built-in ones. Undefined when the file cannot be read
 * now; the workers have read it, so that is not worth failing for.
 */
export async function countRoutes (config: Pick<GatewayConfig, 'routesFile' | 'routeDefaults'>): Promise<number | undefined> {
  if (config.routesFile === undefined) return defaultRoutes(config.routeDefaults).length
  try {
    return (await loadRouteFile(config.routesFile, config.routeDefaults)).length
  } catch {
    return undefined
  }
}
