// The primary's questions to its workers over IPC (their metrics for a scrape, the routes in
// force, a reload of the routes or of every file for the admin API) and the gathering of their answers: each question goes to
// the workers that listen, and is answered once all of them have, or fails as a whole.
import type { Worker } from 'node:cluster'
import type { RouteControl, RoutesInForce, RoutesReload } from '../admin/route-control.js'
import type { FilesReload } from '../admin/reload.js'
import type { MetricsSnapshot } from '../metrics/aggregate.js'
import type { ConfigReload } from '../proxy/config-reload.js'
import {
  METRICS_ANSWER, METRICS_REQUEST, METRICS_TIMEOUT_MS, RELOAD_ANSWER, RELOAD_FILES, RELOAD_ROUTES, RELOAD_TIMEOUT_MS, ROUTES_ANSWER, ROUTES_REQUEST,
  ROUTES_TIMEOUT_MS, type WorkerMessage
} from './worker-messages.js'

export interface WorkerRequests {
  /**
   * Sends `build(id)` to every worker that listens (`one`: to one of them) and resolves with their
   * answers; a worker that exits meanwhile is left out; one that fails to answer, or does not
   * within `timeoutMs`, fails the whole.
   */
  ask: <T>(build: (id: number) => WorkerMessage, options: { one?: boolean; timeoutMs: number; what: string }) => Promise<T[]>
  /** a message from a worker: an answer to a request in flight, or nothing of this module's */
  onMessage: (worker: Worker, message: unknown) => void
  /** a worker exited: no request waits for it any more */
  workerExited: (worker: Worker) => void
}

/** `listening`: the workers a request goes to (a worker still starting has nothing to say yet, and may not hear it) */
export function createWorkerRequests (listening: () => Worker[]): WorkerRequests {
  /** requests to workers in flight (metrics, routes): the workers yet to answer, and what those that did sent */
  const requests = new Map<number, { waiting: Set<Worker>; answers: unknown[]; finish: (err?: Error) => void }>()
  let requestId = 0

  const onMessage = (worker: Worker, message: unknown): void => {
    const answer = message as { type?: unknown; id?: unknown; error?: unknown } | null
    if ((answer?.type !== METRICS_ANSWER && answer?.type !== ROUTES_ANSWER && answer?.type !== RELOAD_ANSWER) || typeof answer.id !== 'number') return
    const request = requests.get(answer.id)
    if (request === undefined || !request.waiting.delete(worker)) return
    if ('error' in answer) {
      request.finish(new Error(`worker ${worker.process.pid ?? '?'} could not answer: ${String(answer.error)}`))
      return
    }
    request.answers.push(answer)
    if (request.waiting.size === 0) request.finish()
  }

  const ask = async <T>(build: (id: number) => WorkerMessage, options: { one?: boolean; timeoutMs: number; what: string }): Promise<T[]> =>
    await new Promise((resolve, reject) => {
      const id = requestId++
      const all = listening()
      const asked = options.one === true ? all.slice(0, 1) : all
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

  const workerExited = (worker: Worker): void => {
    for (const request of requests.values()) {
      if (request.waiting.delete(worker) && request.waiting.size === 0) request.finish()
    }
  }

  return { ask, onMessage, workerExited }
}

/** Every listening worker's registry (RunningCluster.metrics). */
export async function workersMetrics (requests: WorkerRequests): Promise<MetricsSnapshot[]> {
  return (await requests.ask<{ metrics: MetricsSnapshot }>((id) => ({ type: METRICS_REQUEST, id }), { timeoutMs: METRICS_TIMEOUT_MS, what: 'their metrics' }))
    .map((answer) => answer.metrics)
}

/**
 * The routes as the workers have them, for the admin API: one worker's table; a reload by every
 * worker. `reloadWhenListening`: a worker still starting reloads once it listens, as on SIGHUP.
 */
export function workersRoutes (requests: WorkerRequests, reloadWhenListening: () => void): RouteControl {
  return {
    async current () {
      const [answer] = await requests.ask<{ routes: RoutesInForce }>((id) => ({ type: ROUTES_REQUEST, id }),
        { one: true, timeoutMs: ROUTES_TIMEOUT_MS, what: 'their routes' })
      if (answer === undefined) throw new Error('no worker listens yet to say which routes are in force')
      return answer.routes
    },
    async reload () {
      return await everyWorkerReloads<RoutesReload>(requests, reloadWhenListening, RELOAD_ROUTES.type, ROUTES_TIMEOUT_MS, 'its routes')
    }
  }
}

/**
 * Every listening worker reloads (a worker still starting does once it listens, as on SIGHUP);
 * they read the same files, so the first refusal speaks for them all (a file changed between two
 * reads aside), with the number of workers that reloaded.
 */
async function everyWorkerReloads<R extends { outcome: string }> (requests: WorkerRequests, reloadWhenListening: () => void,
  type: typeof RELOAD_ROUTES.type | typeof RELOAD_FILES.type, timeoutMs: number, what: string): Promise<R & { workers: number }> {
  reloadWhenListening()
  const answers = (await requests.ask<{ reload: R }>((id) => ({ type, id }), { timeoutMs, what: 'a reload\'s outcome' }))
    .map((answer) => answer.reload)
  const outcome = answers.find((answer) => answer.outcome !== 'reloaded') ?? answers[0]
  if (outcome === undefined) throw new Error(`no worker listens yet to reload ${what}`)
  return { ...outcome, workers: answers.filter((answer) => answer.outcome === 'reloaded').length }
}

/**
 * A reload of the route, issuers and agents files by every worker, for the admin API's POST
 * /v1/reload. `reloadWhenListening`: a worker still starting reloads once it listens, as on SIGHUP.
 */
export function workersReload (requests: WorkerRequests, reloadWhenListening: () => void): FilesReload {
  return {
    async reload () {
      return await everyWorkerReloads<ConfigReload>(requests, reloadWhenListening, RELOAD_FILES.type, RELOAD_TIMEOUT_MS, 'its files')
    }
  }
}
