// A reload of every file keygate can re-read without a restart (docs/routes.md#reloading): the
// route file (KEYGATE_ROUTES), the issuers file (KEYGATE_ISSUERS) and the agents file
// (KEYGATE_AGENT_DIRECTORIES), all or nothing. Each is read and checked first; one with a mistake
// refuses the whole reload (every problem of every file named) and all three files in force stay.
// Then the new issuers' keys are fetched, and the three are put in force together, in one turn of
// the event loop: no request sees new routes with old issuers. SIGHUP, `keygate reload` and the
// admin API's POST /v1/reload run it; POST /v1/routes/reload still reloads the routes alone.
import type { FastifyBaseLogger } from 'fastify'
import type { AgentsInForce } from '../agents/agents-in-force.js'
import { loadAgentsFile, type AgentsSettings } from '../agents/agents-file.js'
import type { IssuersInForce, PreparedIssuers } from '../idp/issuers-in-force.js'
import { loadIssuersFile, type IssuerConfig } from '../idp/issuers.js'
import { changesByName, type Changes } from '../lib/changes.js'
import { resourceIssuerProblems } from '../resources/resource.js'
import type { RouteConfig } from './route.js'
import type { RouteRegistry } from './route-registry.js'

/** one file's part of a reload: the file (null: none is configured, nothing to reload) and what changed, by name */
export interface FileChanges extends Changes {
  file: string | null
}

/** What a reload did (plain data: it crosses the cluster's IPC channel). */
export type ConfigReload =
  | { outcome: 'reloaded'; routes: FileChanges; issuers: FileChanges; agents: FileChanges }
  /** nothing was put in force. `files`: those refused; `problems`: one line each, naming the file and the field */
  | { outcome: 'invalid'; files: string[]; problems: string[] }

export interface ConfigReloader {
  reload: () => Promise<ConfigReload>
}

export interface ConfigReloaderOptions {
  routes: RouteRegistry
  /** KEYGATE_ISSUERS and the issuers in force (undefined: none can be, KEYGATE_ISSUERS and KEYGATE_OIDC_* unset) */
  issuers: { file: string | undefined; inForce: IssuersInForce | undefined }
  agents: AgentsInForce
  log: FastifyBaseLogger
}

const NOTHING: Changes = { added: [], removed: [], changed: [] }

/** every problem of a refused file, each naming the file */
function problemsOf (file: string, err: unknown): string[] {
  const listed = (err as { problems?: unknown }).problems
  return Array.isArray(listed) ? listed.map((problem) => `${file}: ${String(problem)}`) : [`${file}: ${(err as Error).message}`]
}

/** a file's read: its content, nothing (no such file configured), or why it was refused */
type Read<T> = { file: string; value: T } | { file: undefined } | { file: string; error: unknown }

async function read<T> (file: string | undefined, load: (file: string) => Promise<T>): Promise<Read<T>> {
  if (file === undefined) return { file }
  try {
    return { file, value: await load(file) }
  } catch (error) {
    return { file, error }
  }
}

export function createConfigReloader ({ routes, issuers, agents, log }: ConfigReloaderOptions): ConfigReloader {
  const reloadNow = async (): Promise<ConfigReload> => {
    const [routesRead, issuersRead, agentsRead] = await Promise.all([
      read<readonly RouteConfig[]>(routes.file, async () => await routes.read()),
      read<IssuerConfig[]>(issuers.inForce === undefined ? undefined : issuers.file, loadIssuersFile),
      read<AgentsSettings>(agents.file, loadAgentsFile)
    ])
    const refused = [routesRead, issuersRead, agentsRead].filter((r): r is { file: string; error: unknown } => 'error' in r)
    if (refused.length > 0) {
      const problems = refused.flatMap((r) => problemsOf(r.file, r.error))
      log.error({ files: refused.map((r) => r.file), problems }, 'configuration reload refused; the files in force stay')
      return { outcome: 'invalid', files: refused.map((r) => r.file), problems }
    }
    // the route file's resources name issuers: the routes and issuers that would be in force, checked together
    const nextRoutes = 'value' in routesRead ? routesRead.value : routes.current.routes
    const crossed = resourceIssuerProblems(nextRoutes, 'value' in issuersRead ? issuersRead.value : issuers.inForce?.issuers ?? [])
    if (crossed.length > 0) {
      const file = routes.file ?? 'routes'
      const problems = crossed.map((problem) => `${file}: ${problem}`)
      log.error({ files: [file], problems }, 'configuration reload refused; the files in force stay')
      return { outcome: 'invalid', files: [file], problems }
    }
    let prepared: PreparedIssuers | undefined
    if ('value' in issuersRead) prepared = await (issuers.inForce as IssuersInForce).prepare(issuersRead.value)
    // all read and checked, the new issuers' keys fetched: in force together, in this one turn
    const routeChanges = 'value' in routesRead
      ? changesByName(routes.current.routes, routesRead.value, (route) => route.name, (route) => JSON.stringify(route))
      : NOTHING
    if ('value' in routesRead) routes.install(routesRead.value)
    const agentChanges = 'value' in agentsRead ? agents.swap(agentsRead.value) : NOTHING
    prepared?.commit()
    const answer: ConfigReload = {
      outcome: 'reloaded',
      routes: { file: routes.file ?? null, ...routeChanges },
      issuers: { file: issuers.inForce === undefined ? null : issuers.file ?? null, ...prepared?.changes ?? NOTHING },
      agents: { file: agents.file ?? null, ...agentChanges }
    }
    log.info({ routes: answer.routes, issuers: answer.issuers, agents: answer.agents }, 'configuration reloaded')
    return answer
  }
  // one reload at a time, in order: the last write of a file is the one that wins
  let queue: Promise<unknown> = Promise.resolve()
  return {
    async reload () {
      const next = queue.then(reloadNow)
      queue = next.catch(() => {})
      return await next
    }
  }
}
