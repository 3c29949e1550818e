// The live route table: loaded at start, swapped whole on reload (SIGHUP, or a change of the file
// when watching). A reload that fails leaves the running table in place and says why; requests
// in flight keep the route they were matched to. Each load logs its warnings (a weaker route
// forwarding into a stronger one's path space: route-aliases.ts; a route opting out of a default
// rule: route-opt-outs.ts) and goes ahead.
import { watch, type FSWatcher } from 'node:fs'
import { basename, dirname } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { GatewayConfig } from '../config/env.js'
import { defaultRoutes, type RouteConfig } from './route.js'
import { routeWarnings } from './route-aliases.js'
import { loadRouteFile, RouteFileError } from './route-file.js'
import { routeOptOuts } from './route-opt-outs.js'
import { RouteTable } from './route-table.js'

export type ReloadResult = { ok: true; routes: readonly RouteConfig[] } | { ok: false; error: Error }

export interface RouteRegistry {
  readonly current: RouteTable
  readonly file: string | undefined
  /** re-reads the route file; without one, there is nothing to reload */
  reload: () => Promise<ReloadResult>
  /** the route file read and checked, nothing put in force (a reload of every file: config-reload.ts); throws RouteFileError */
  read: () => Promise<readonly RouteConfig[]>
  /** routes read() gave, put in force, and logged as a reload is */
  install: (routes: readonly RouteConfig[]) => void
  /**
   * What the route file must agree with in other files (its resources' issuers): checked now, on
   * the routes in force (a RouteFileError with the problems), and on each reload of the routes alone
   */
  checkWith: (check: (routes: readonly RouteConfig[]) => string[]) => void
  close: () => void
}

const WATCH_DEBOUNCE_MS = 100

/** `builtIn`: the routes without a route file; default: defaultRoutes() of the environment's defaults. */
export async function createRouteRegistry (config: Pick<GatewayConfig, 'routesFile' | 'routeDefaults' | 'watchRoutes'>, log: FastifyBaseLogger,
  builtIn: readonly RouteConfig[] = defaultRoutes(config.routeDefaults)): Promise<RouteRegistry> {
  const file = config.routesFile
  const warn = (routes: readonly RouteConfig[]): void => {
    for (const { weak, strong, text } of routeWarnings(routes)) log.warn({ file, route: weak.name, stronger: strong.name }, `route warning: ${text}`)
    for (const { route, text } of routeOptOuts(routes)) log.warn({ file, route: route.name }, `route warning: ${text}`)
  }
  const loaded = file === undefined ? builtIn : await loadRouteFile(file, config.routeDefaults)
  warn(loaded)
  let current = new RouteTable(loaded)
  let watcher: FSWatcher | undefined
  // Reloads run one at a time, in order, so the last write of the file is the one that wins.
  let queue: Promise<unknown> = Promise.resolve()
  let crossCheck: (routes: readonly RouteConfig[]) => string[] = () => []
  const checked = (routes: readonly RouteConfig[]): readonly RouteConfig[] => {
    const problems = crossCheck(routes)
    if (problems.length > 0) throw new RouteFileError(file ?? 'the routes', problems)
    return routes
  }

  const read = async (): Promise<readonly RouteConfig[]> => file === undefined ? current.routes : await loadRouteFile(file, config.routeDefaults)
  const install = (routes: readonly RouteConfig[]): void => {
    current = new RouteTable(routes)
    log.info({ file, routes: routes.map((r) => r.name) }, 'routes reloaded')
    warn(routes)
  }
  const reloadNow = async (): Promise<ReloadResult> => {
    if (file === undefined) return { ok: true, routes: current.routes }
    try {
      const routes = checked(await read())
      install(routes)
      return { ok: true, routes }
    } catch (err) {
      log.error({ file, err: { message: (err as Error).message } }, 'route reload refused; the previous routes stay in force')
      return { ok: false, error: err as Error }
    }
  }

  const registry: RouteRegistry = {
    get current () { return current },
    file,
    async reload () {
      const next = queue.then(reloadNow)
      queue = next
      return await next
    },
    read,
    install,
    checkWith (check) {
      crossCheck = check
      checked(current.routes)
    },
    close () { watcher?.close() }
  }

  if (file !== undefined && config.watchRoutes) {
    // Watch the folder, not the file: editors save by replacing the file, which ends a file watch.
    let timer: NodeJS.Timeout | undefined
    watcher = watch(dirname(file), (_event, changed) => {
      if (changed !== null && changed.toString() !== basename(file)) return
      clearTimeout(timer)
      timer = setTimeout(() => { void registry.reload() }, WATCH_DEBOUNCE_MS)
    })
  }
  return registry
}
