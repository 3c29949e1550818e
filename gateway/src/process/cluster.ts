// KEYGATE_WORKERS > 1: the primary of a node:cluster. It serves no requests itself: it forks the
// workers, each a whole gateway as main.ts runs it alone, on one shared port (Node hands the
// connections out round-robin on Linux). Workers share nothing but the store, exactly as several
// gateways on one Redis do. The primary forwards SIGHUP (reload the route file) and
// SIGTERM/SIGINT (finish in-flight requests, then exit) to every worker, replaces a worker that
// dies unexpectedly (after a growing delay, so a crash loop does not spin), and, when shutting
// down, exits once every worker has. With KEYGATE_METRICS_PORT, the primary holds the one metrics
// listener: a scrape asks every worker for its registry over IPC and serves them added up. With
// KEYGATE_ADMIN_PORT, the primary serves the admin API, on a store connection of its own; its
// route endpoints ask the workers over IPC (the table in force: one worker's; a reload: every
// worker reloads, and the answer is theirs together).
import cluster, { type Worker } from 'node:cluster'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { createOperations } from '../admin/operations.js'
import { reloadOutcome, type RouteControl, type RoutesInForce, type RoutesReload } from '../admin/route-control.js'
import { startAdminServer, type AdminServer } from '../admin/server.js'
import type { UsageReader } from '../admin/usage.js'
import { readUsage } from '../limits/usage.js'
import type { GatewayConfig } from '../config/env.js'
import { startMetricsServer, type MetricsServer } from '../http/metrics-server.js'
import { createKeyRegistry, keyPolicy } from '../keys/key-registry.js'
import { logDestination } from '../lib/log-format.js'
import { REDACTED, REDACTED_PATHS } from '../lib/redact-url.js'
import { aggregateMetrics, type MetricsSnapshot } from '../metrics/aggregate.js'
import { createClusterMetrics } from '../metrics/metrics.js'
import { createStore } from '../store/index.js'
import { createUserService } from '../users/user-service.js'
import { pidFileAt } from './pid-file.js'
import { startGateway, type RunningGateway } from './start.js'
import { closeOnSignals, reloadRoutes, reloadRoutesOnSighup } from './signals.js'
import { countRoutes, startupLine } from './startup-line.js'

/**
 * primary -> worker, over the cluster's IPC channel. A reload with an `id` (the admin API's) is
 * answered with what it did; without one (SIGHUP), it is not.
 */
export type WorkerMessage =
  | { type: 'keygate:reload-routes'; id?: number }
  | { type: 'keygate:metrics-request'; id: number }
  | { type: 'keygate:routes-request'; id: number }
export const RELOAD_ROUTES: WorkerMessage = { type: 'keygate:reload-routes' }
export const METRICS_REQUEST = 'keygate:metrics-request'
export const ROUTES_REQUEST = 'keygate:routes-request'

/** worker -> primary: its registry, or why it could not read it */
export type MetricsAnswer = { type: 'keygate:metrics'; id: number } & ({ metrics: MetricsSnapshot } | { error: string })
export const METRICS_ANSWER = 'keygate:metrics'

/** worker -> primary: its routes in force, or what a reload did, or why it could not say */
export type RoutesAnswer = { type: 'keygate:routes'; id: number } & ({ routes: RoutesInForce } | { reload: RoutesReload } | { error: string })
export const ROUTES_ANSWER = 'keygate:routes'

/** a scrape fails when a worker has not sent its metrics within this (Prometheus's own timeout is 10 s) */
export const METRICS_TIMEOUT_MS = 5000
/** an admin request about routes fails when a worker has not answered within this */
export const ROUTES_TIMEOUT_MS = 10_000

/** a worker that dies within this of its start counts as crashing, and its replacement waits */
export const STABLE_AFTER_MS = 10_000
export const RESTART_MIN_DELAY_MS = 250
export const RESTART_MAX_DELAY_MS = 30_000

/**
 * How long to wait before replacing a worker, given how many times in a row its slot's worker
 * died within STABLE_AFTER_MS of starting: at once after a worker that had run a while, then
 * 250 ms, 0.5 s, 1 s, ... up to 30 s.
 */
export function restartDelayMs (quickExits: number): number {
  if (quickExits <= 0) return 0
  return Math.min(RESTART_MIN_DELAY_MS * 2 ** (quickExits - 1), RESTART_MAX_DELAY_MS)
}

interface ClusterLog {
  info: (fields: object, message: string) => void
  warn: (fields: object, message: string) => void
  error: (fields: object, message: string) => void
}

export interface ClusterOptions {
  workers: number
  log: ClusterLog
  /** the script every worker runs; default main.ts, which serves as a worker when forked by a cluster */
  exec?: string
}

export interface RunningCluster {
  /** where the workers listen */
  url: string
  /** the pids of the workers running now */
  pids: () => number[]
  /** workers that exited unexpectedly (and were replaced) so far */
  readonly restarts: number
  /** every worker re-reads the route file (one still starting does once it listens) */
  reloadRoutes: () => void
  /**
   * The registry of every worker that listens, asked over IPC. A worker that exits before it
   * answers is left out (its counts went with it); one that does not answer within
   * METRICS_TIMEOUT_MS, or fails to, fails the whole: a sum without it would look to Prometheus
   * like counters going back.
   */
  metrics: () => Promise<MetricsSnapshot[]>
  /** the routes as the workers have them, for the admin API: one worker's table; a reload by every worker */
  routes: RouteControl
  /**
   * Every worker finishes its in-flight requests and exits (each within its own
   * KEYGATE_SHUTDOWN_GRACE_MS); resolves true when all exited cleanly. No worker is replaced
   * from here on.
   */
  close: () => Promise<boolean>
  /** SIGKILL every worker now (a second Ctrl-C, a primary past its grace period) */
  kill: () => void
}

/** main.ts, in whichever form (.ts under tsx, .js when built) this one runs */
const SERVER_ENTRY = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../main.ts' : '../main.js', import.meta.url))

interface Slot {
  index: number
  startedAt: number
  /** exits in a row of this slot's workers, each within STABLE_AFTER_MS of its start */
  quickExits: number
  listening: boolean
  reloadPending: boolean
}

function urlOf (address: { address: string; port: number; addressType: number | string }): string {
  const host = address.addressType === 6 || address.addressType === 'udp6' || address.address.includes(':') ? `[${address.address}]` : address.address
  return `http://${host}:${address.port}`
}

/** Forks the workers; resolves once every one listens, rejects if one exits before it does. */
export async function startCluster (options: ClusterOptions): Promise<RunningCluster> {
  if (!cluster.isPrimary) throw new Error('startCluster runs in the primary process only')
  const { log } = options
  cluster.setupPrimary({ exec: options.exec ?? SERVER_ENTRY })

  const slots = new Map<Worker, Slot>()
  const timers = new Set<NodeJS.Timeout>()
  let state: 'starting' | 'running' | 'closing' | 'failed' = 'starting'
  let clean = true
  let onAllExited: (() => void) | undefined
  let startup!: { resolve: (url: string) => void; reject: (err: Error) => void }
  const started = new Promise<string>((resolve, reject) => { startup = { resolve, reject } })
  /** requests to workers in flight (metrics, routes): the workers yet to answer, and what those that did sent */
  const requests = new Map<number, { waiting: Set<Worker>; answers: unknown[]; finish: (err?: Error) => void }>()
  let requestId = 0
  let restarts = 0

  const kill = (): void => {
    for (const worker of slots.keys()) worker.process.kill('SIGKILL')
  }
  // However the primary ends, no worker outlives it (they would also exit when their IPC channel
  // closes; this makes it immediate).
  process.once('exit', kill)

  const fork = (index: number, quickExits: number): void => {
    const worker = cluster.fork()
    const slot: Slot = { index, startedAt: performance.now(), quickExits, listening: false, reloadPending: false }
    slots.set(worker, slot)
    worker.on('listening', (address) => {
      if (slot.listening) return
      slot.listening = true
      if (state === 'closing' || state === 'failed') {
        worker.process.kill('SIGTERM')
        return
      }
      if (slot.reloadPending) send(worker)
      if (state === 'running') log.info({ worker: worker.process.pid, slot: index }, 'replacement worker listening')
      if (state === 'starting' && [...slots.values()].every((s) => s.listening)) {
        state = 'running'
        startup.resolve(urlOf(address))
      }
    })
    worker.on('exit', (code, signal) => { onExit(worker, slot, code, signal) })
    worker.on('message', (message: unknown) => { onMessage(worker, message) })
    // a message to a worker that has just died: its exit is handled above
    worker.on('error', (err) => { log.warn({ worker: worker.process.pid, err: { message: err.message } }, 'worker IPC error') })
  }
  const send = (worker: Worker): void => {
    if (worker.isConnected()) worker.send(RELOAD_ROUTES)
  }

  const onMessage = (worker: Worker, message: unknown): void => {
    const answer = message as { type?: unknown; id?: unknown; error?: unknown } | null
    if ((answer?.type !== METRICS_ANSWER && answer?.type !== ROUTES_ANSWER) || typeof answer.id !== 'number') return
    const request = requests.get(answer.id)
    if (request === undefined || !request.waiting.delete(worker)) return
    if ('error' in answer) {
      request.finish(new Error(`worker ${worker.process.pid ?? '?'} could not answer: ${String(answer.error)}`))
      return
    }
    request.answers.push(answer)
    if (request.waiting.size === 0) request.finish()
  }

  /**
   * Sends `build(id)` to every worker that listens (`one`: to one of them) and resolves with their
   * answers; a worker that exits meanwhile is left out; one that fails to answer, or does not
   * within `timeoutMs`, fails the whole.
   */
  const ask = async <T>(build: (id: number) => WorkerMessage, options: { one?: boolean; timeoutMs: number; what: string }): Promise<T[]> =>
    await new Promise((resolve, reject) => {
      const id = requestId++
      // a worker still starting has nothing to say yet, and may not hear the request
      const listening = [...slots].filter(([worker, slot]) => slot.listening && worker.isConnected()).map(([worker]) => worker)
      const asked = options.one === true ? listening.slice(0, 1) : listening
      const answers: unknown[] = []
      const waiting = new Set(asked)
      const timer = setTimeout(() => {
        finish(new Error(`${waiting.size} of ${asked.length} workers did not send ${options.what} within ${options.timeoutMs} ms`))
      }, options.timeoutMs)
      const finish = (err?: Error): void => {
        clearTimeout(timer)
        requests.delete(id)
        if (err === undefined) resolve(answers as T[])
        else reject(err)
      }
      requests.set(id, { waiting, answers, finish })
      if (asked.length === 0) finish()
      for (const worker of asked) worker.send(build(id))
    })

  const metrics = async (): Promise<MetricsSnapshot[]> =>
    (await ask<{ metrics: MetricsSnapshot }>((id) => ({ type: METRICS_REQUEST, id }), { timeoutMs: METRICS_TIMEOUT_MS, what: 'their metrics' }))
      .map((answer) => answer.metrics)

  const routes: RouteControl = {
    async current () {
      const [answer] = await ask<{ routes: RoutesInForce }>((id) => ({ type: ROUTES_REQUEST, id }),
        { one: true, timeoutMs: ROUTES_TIMEOUT_MS, what: 'their routes' })
      if (answer === undefined) throw new Error('no worker listens yet to say which routes are in force')
      return answer.routes
    },
    async reload () {
      // a worker still starting reloads once it listens, as on SIGHUP; those that listen answer
      for (const slot of slots.values()) if (!slot.listening) slot.reloadPending = true
      const answers = (await ask<{ reload: RoutesReload }>((id) => ({ type: RELOAD_ROUTES.type, id }),
        { timeoutMs: ROUTES_TIMEOUT_MS, what: 'a reload\'s outcome' })).map((answer) => answer.reload)
      // every worker read the same file: the first refusal speaks for them (a file changed between two reads aside)
      const outcome = answers.find((answer) => answer.outcome !== 'reloaded') ?? answers[0]
      if (outcome === undefined) throw new Error('no worker listens yet to reload its routes')
      return { ...outcome, workers: answers.filter((answer) => answer.outcome === 'reloaded').length }
    }
  }

  const onExit = (worker: Worker, slot: Slot, code: number | null, signal: string | null): void => {
    slots.delete(worker)
    for (const request of requests.values()) {
      if (request.waiting.delete(worker) && request.waiting.size === 0) request.finish()
    }
    const pid = worker.process.pid
    if (state === 'failed') return
    if (state === 'closing') {
      // SIGTERM is what close() sent a worker still starting, before it had a handler for it
      if (code !== 0 && signal !== 'SIGTERM') {
        clean = false
        log.error({ worker: pid, code, signal }, 'worker did not shut down cleanly')
      }
      if (slots.size === 0) onAllExited?.()
      return
    }
    if (state === 'starting') {
      // as a single gateway does, give up at start: the worker printed why on stderr
      state = 'failed'
      kill()
      startup.reject(new Error(`worker ${pid ?? '?'} exited before it listened (${signal ?? `code ${code}`}); its error is above`))
      return
    }
    restarts++
    const quickExits = performance.now() - slot.startedAt < STABLE_AFTER_MS ? slot.quickExits + 1 : 0
    const delay = restartDelayMs(quickExits)
    log.error({ worker: pid, code, signal, slot: slot.index, restartInMs: delay }, 'worker exited unexpectedly; starting a replacement')
    const timer = setTimeout(() => {
      timers.delete(timer)
      if (state === 'running') fork(slot.index, quickExits)
    }, delay)
    timers.add(timer)
  }

  for (let index = 0; index < options.workers; index++) fork(index, 0)
  const url = await started

  let closing: Promise<boolean> | undefined
  return {
    url,
    pids: () => [...slots.keys()].map((w) => w.process.pid).filter((pid): pid is number => pid !== undefined),
    get restarts () { return restarts },
    reloadRoutes () {
      for (const [worker, slot] of slots) {
        if (slot.listening) send(worker)
        else slot.reloadPending = true
      }
    },
    metrics,
    routes,
    async close () {
      closing ??= new Promise<boolean>((resolve) => {
        state = 'closing'
        for (const timer of timers) clearTimeout(timer)
        timers.clear()
        if (slots.size === 0) { resolve(clean); return }
        onAllExited = () => { resolve(clean) }
        // A worker that listens has SIGTERM and SIGINT handlers (a graceful close); one still
        // starting has nothing in flight, and dies of it, or closes as it begins to listen.
        for (const worker of slots.keys()) worker.process.kill('SIGTERM')
      })
      return await closing
    },
    kill
  }
}

/** the primary waits this much longer than its workers' grace period before it kills them */
const PRIMARY_GRACE_MARGIN_MS = 2000

/**
 * KEYGATE_WORKERS > 1: fork the workers and mind them (startCluster). SIGHUP goes on to every
 * worker; SIGTERM or Ctrl-C makes every worker finish its requests, and the primary exits 0 once
 * all have exited cleanly.
 */
export async function runPrimary (config: GatewayConfig): Promise<void> {
  // the primary logs its own events (workers starting, exiting, signals) and the admin API's;
  // redacted as a gateway's log is, should anything log a request's credentials
  const log = pino({ level: config.logLevel, name: 'keygate-primary', redact: { paths: REDACTED_PATHS, censor: REDACTED } }, logDestination(config.logFormat))
  // the primary's PID: it is the process that takes the signals
  const pidFile = pidFileAt(config.pidFile)
  const workers = await startCluster({ workers: config.workers.count, log })
  let metricsServer: MetricsServer | undefined
  let admin: { server: AdminServer; close: () => Promise<void> } | undefined
  try {
    if (config.metrics.port !== undefined) {
      // the workers' registries and the primary's own (its count of worker restarts), added up
      const own = createClusterMetrics(workers)
      const scrape = async (openMetrics: boolean): Promise<{ contentType: string; body: string }> =>
        await aggregateMetrics([...await workers.metrics(), await own.getMetricsAsJSON()], openMetrics)
      metricsServer = await startMetricsServer(scrape,
        { port: config.metrics.port, host: config.metrics.host, log })
      log.info(`metrics for Prometheus at ${metricsServer.url}/metrics, every worker's added up`)
    }
    if (config.admin.port !== undefined && config.admin.token !== undefined) admin = await startPrimaryAdmin(config, workers, log)
  } catch (err) {
    // as a single gateway does: a metrics or admin port that cannot be had stops the start
    await metricsServer?.close()
    await workers.close()
    throw err
  }
  process.on('SIGHUP', () => {
    log.info({ workers: workers.pids() }, 'SIGHUP: every worker reloads its routes')
    workers.reloadRoutes()
  })
  closeOnSignals(async () => {
    await admin?.close()
    await metricsServer?.close()
    if (!await workers.close()) throw new Error('a worker did not shut down cleanly')
  }, (message, err) => { log.info({ err }, message) }, config.server.shutdownGraceMs + PRIMARY_GRACE_MARGIN_MS, {
    announce: (signal) => `${signal}: shutting down; every worker's in-flight requests have ${config.server.shutdownGraceMs} ms to finish`
  })
  // before the startup line: once it is logged, the PID file is there, and the signals are handled
  pidFile.write()
  const line = startupLine(config, {
    url: workers.url,
    routes: await countRoutes(config),
    workers: config.workers.count,
    metricsUrl: metricsServer?.url,
    adminUrl: admin?.server.url,
    // every worker listens on the decision port (a port 0 of each would differ: then unknown here)
    decisionUrl: config.decision.port === undefined || config.decision.port === 0 ? undefined : `http://${config.decision.host}:${config.decision.port}`
  })
  log.info({ ...line.fields, workers: workers.pids() }, line.message)
}

/**
 * The primary's admin API: users and keys on a store connection of its own (the workers' store:
 * revocations reach them as any gateway's do), routes through the workers.
 */
async function startPrimaryAdmin (config: GatewayConfig, workers: RunningCluster, log: pino.Logger):
Promise<{ server: AdminServer; close: () => Promise<void> }> {
  const store = await createStore(config)
  try {
    // it serves no signed request: no key cache, and no need to hear of revocations
    const keys = createKeyRegistry(store, { cacheSize: 0, ...keyPolicy(config), watch: false })
    const operations = createOperations({ users: createUserService(store, { scryptLogN: config.passwordScryptLogN }), keys })
    const { port, host, token } = config.admin as { port: number; host: string; token: string }
    // the workers' routes (they load them; the primary does not), counted in the shared store
    const usage: UsageReader = async (subject) => await readUsage((await workers.routes.current()).routes, store, subject)
    const server = await startAdminServer({ operations, routes: workers.routes, usage, analytics: store }, { port, host, token, log })
    log.info(`admin API at ${server.url}, for every worker`)
    return {
      server,
      close: async () => {
        await server.close()
        await keys.close()
        await store.close()
      }
    }
  } catch (err) {
    await store.close()
    throw err
  }
}

/** A cluster worker: the gateway as a single process runs it, told what to do by the primary. */
export async function runWorker (config: GatewayConfig): Promise<void> {
  // Both handlers are in place before the gateway starts: a shutdown or a reload may come meanwhile.
  let gateway: RunningGateway | undefined
  let reloadPending = false
  process.on('message', (message: unknown) => {
    const request = message as Partial<WorkerMessage> | null
    if (request?.type === METRICS_REQUEST && 'id' in request && request.id !== undefined) {
      void sendMetrics(request.id)
      return
    }
    if ((request?.type === ROUTES_REQUEST || request?.type === RELOAD_ROUTES.type) && typeof request.id === 'number') {
      void answerRoutes(request.type, request.id)
      return
    }
    if (request?.type !== RELOAD_ROUTES.type) return
    if (gateway === undefined) reloadPending = true
    else reloadRoutes(gateway.app, 'reload from the primary')
  })
  // the primary serves KEYGATE_METRICS_PORT for all workers
  const starting = startGateway({ config, metricsListener: false, adminListener: false })
  // The primary asks only workers that listen, so `starting` has all but resolved by then.
  const sendMetrics = async (id: number): Promise<void> => {
    let answer: MetricsAnswer
    try {
      answer = { type: METRICS_ANSWER, id, metrics: await (await starting).app.keygate.metrics.registry.getMetricsAsJSON() }
    } catch (err) {
      answer = { type: METRICS_ANSWER, id, error: (err as Error).message }
    }
    // the callback takes the error of a channel the primary closed meanwhile: this worker is exiting then
    process.send?.(answer, undefined, undefined, () => {})
  }
  // The admin API's route requests, from the primary, which asks only workers that listen.
  const answerRoutes = async (type: string, id: number): Promise<void> => {
    let answer: RoutesAnswer
    try {
      const { routes } = (await starting).app.keygate
      answer = type === ROUTES_REQUEST
        ? { type: ROUTES_ANSWER, id, routes: { file: routes.file, routes: routes.current.routes } }
        : { type: ROUTES_ANSWER, id, reload: routes.file === undefined ? { outcome: 'no-file' } : reloadOutcome(routes.file, await routes.reload()) }
    } catch (err) {
      answer = { type: ROUTES_ANSWER, id, error: (err as Error).message }
    }
    process.send?.(answer, undefined, undefined, () => {})
  }
  closeOnSignals(async () => { await (await starting).close() }, (message, err) => { gateway?.app.log.info({ err }, message) },
    config.server.shutdownGraceMs, { secondSignalExits: false })
  gateway = await starting
  reloadRoutesOnSighup(gateway.app)
  if (reloadPending) reloadRoutes(gateway.app, 'reload from the primary')
}
