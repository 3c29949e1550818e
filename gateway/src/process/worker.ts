// KEYGATE_WORKERS > 1, a worker's process: the gateway as a single process runs it (but for the
// metrics and admin listeners, which the primary holds), told over IPC to reload its files or its
// routes and asked for its metrics and its routes (worker-messages.ts).
import { reloadOutcome } from '../admin/route-control.js'
import type { GatewayConfig } from '../config/env.js'
import { startGateway, type RunningGateway } from './start.js'
import { closeOnSignals, reloadFiles, reloadOnSighup } from './signals.js'
import {
  METRICS_ANSWER, METRICS_REQUEST, RELOAD_ANSWER, RELOAD_FILES, RELOAD_ROUTES, ROUTES_ANSWER, ROUTES_REQUEST,
  type MetricsAnswer, type ReloadAnswer, type RoutesAnswer, type WorkerMessage
} from './worker-messages.js'

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
    if (request?.type === RELOAD_FILES.type && typeof request.id === 'number') {
      void answerReload(request.id)
      return
    }
    if (request?.type !== RELOAD_FILES.type) return
    if (gateway === undefined) reloadPending = true
    else reloadFiles(gateway.app, 'reload from the primary')
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
  // The admin API's POST /v1/reload, from the primary: what this worker's reload did.
  const answerReload = async (id: number): Promise<void> => {
    let answer: ReloadAnswer
    try {
      answer = { type: RELOAD_ANSWER, id, reload: await (await starting).app.keygate.reloader.reload() }
    } catch (err) {
      answer = { type: RELOAD_ANSWER, id, error: (err as Error).message }
    }
    process.send?.(answer, undefined, undefined, () => {})
  }
  closeOnSignals(async () => { await (await starting).close() }, (message, err) => { gateway?.app.log.info({ err }, message) },
    config.server.shutdownGraceMs, { secondSignalExits: false })
  gateway = await starting
  reloadOnSighup(gateway.app)
  if (reloadPending) reloadFiles(gateway.app, 'reload from the primary')
}
