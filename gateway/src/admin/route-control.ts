// The routes as the admin API reaches them: the table in force, and a reload of the route file.
// A single gateway answers from its own route registry (routeControlOf); a cluster's primary,
// which loads no routes itself, asks its workers over IPC (process/worker-requests.ts), each of which
// answers from its registry with what reloadOutcome makes of a reload.
import type { RouteConfig } from '../proxy/route.js'
import { RouteFileError } from '../proxy/route-file.js'
import type { ReloadResult, RouteRegistry } from '../proxy/route-registry.js'

export interface RoutesInForce {
  /** KEYGATE_ROUTES; undefined: the built-in routes */
  file: string | undefined
  routes: readonly RouteConfig[]
}

/** What a reload did, in terms an operator acts on. */
export type RoutesReload =
  | { outcome: 'reloaded'; file: string; routes: readonly RouteConfig[] }
  /** no KEYGATE_ROUTES: there is nothing to reload */
  | { outcome: 'no-file' }
  /** the file was refused; the routes in force stay. `problems`: one line each, naming file, route and field */
  | { outcome: 'invalid'; file: string; problems: string[] }

export interface RouteControl {
  current: () => Promise<RoutesInForce>
  /** with workers: every worker reloads, and the answer is theirs together */
  reload: () => Promise<RoutesReload & { workers?: number }>
}

/** A registry's reload result, as a RoutesReload (plain data: it crosses the cluster's IPC channel). */
export function reloadOutcome (file: string | undefined, result: ReloadResult): RoutesReload {
  if (file === undefined) return { outcome: 'no-file' }
  if (result.ok) return { outcome: 'reloaded', file, routes: result.routes }
  // RouteFileError lists every mistake; anything else (a file that cannot be read) is one
  const { error } = result
  const problems = error instanceof RouteFileError ? error.problems.map((problem) => `${error.file}: ${problem}`) : [error.message]
  return { outcome: 'invalid', file, problems }
}

/** One gateway's routes: its own registry. */
export function routeControlOf (registry: RouteRegistry): RouteControl {
  return {
    async current () {
      return { file: registry.file, routes: registry.current.routes }
    },
    async reload () {
      if (registry.file === undefined) return { outcome: 'no-file' }
      return reloadOutcome(registry.file, await registry.reload())
    }
  }
}
