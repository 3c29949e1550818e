// KEYGATE_WORKERS > 1: the primary of a node:cluster. It serves no requests itself: it forks the
// workers, each a whole gateway as main.ts runs it alone, on one shared port (Node hands the
// connections out round-robin on Linux). Workers share nothing but the store, exactly as several
// gateways on one Redis do. This file minds the workers: it replaces a worker that dies
// unexpectedly (after a growing delay, so a crash loop does not spin), passes a reload (SIGHUP's) on
// to every worker, and, when shutting down, exits once every worker has. What the primary's
// process does around it (signals, the metrics listener, the admin API) is primary.ts; a worker's
// side is worker.ts; the questions the primary asks its workers over IPC are worker-requests.ts.
import cluster, { type Worker } from 'node:cluster'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import type { FilesReload } from '../admin/reload.js'
import type { RouteControl } from '../admin/route-control.js'
import type { MetricsSnapshot } from '../metrics/aggregate.js'
import { RELOAD_FILES } from './worker-messages.js'
import { createWorkerRequests, workersMetrics, workersReload, workersRoutes } from './worker-requests.js'

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
  /** every worker re-reads the route, issuers and agents files (one still starting does once it listens) */
  reload: () => void
  /**
   * The registry of every worker that listens, asked over IPC. A worker that exits before it
   * answers is left out (its counts went with it); one that does not answer within
   * METRICS_TIMEOUT_MS, or fails to, fails the whole: a sum without it would look to Prometheus
   * like counters going back.
   */
  metrics: () => Promise<MetricsSnapshot[]>
  /** the routes as the workers have them, for the admin API: one worker's table; a reload by every worker */
  routes: RouteControl
  /** a reload of every file by every worker, for the admin API (POST /v1/reload) */
  files: FilesReload
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
  // a worker still starting has nothing to say yet, and may not hear the request
  const requests = createWorkerRequests(() => [...slots].filter(([worker, slot]) => slot.listening && worker.isConnected()).map(([worker]) => worker))
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
    worker.on('message', (message: unknown) => { requests.onMessage(worker, message) })
    // a message to a worker that has just died: its exit is handled above
    worker.on('error', (err) => { log.warn({ worker: worker.process.pid, err: { message: err.message } }, 'worker IPC error') })
  }
  const send = (worker: Worker): void => {
    if (worker.isConnected()) worker.send(RELOAD_FILES)
  }

  const onExit = (worker: Worker, slot: Slot, code: number | null, signal: string | null): void => {
    slots.delete(worker)
    requests.workerExited(worker)
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
    reload () {
      for (const [worker, slot] of slots) {
        if (slot.listening) send(worker)
        else slot.reloadPending = true
      }
    },
    metrics: async () => await workersMetrics(requests),
    routes: workersRoutes(requests, () => {
      for (const slot of slots.values()) if (!slot.listening) slot.reloadPending = true
    }),
    files: workersReload(requests, () => {
      for (const slot of slots.values()) if (!slot.listening) slot.reloadPending = true
    }),
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
