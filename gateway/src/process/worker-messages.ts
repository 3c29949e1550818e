// The messages between a cluster's primary and its workers, over node:cluster's IPC channel: the
// primary asks (reload the files, reload the routes, send your metrics, say your routes), a worker answers. The
// primary's side is cluster.ts and worker-requests.ts; the worker's is worker.ts.
import type { RoutesInForce, RoutesReload } from '../admin/route-control.js'
import type { MetricsSnapshot } from '../metrics/aggregate.js'
import type { ConfigReload } from '../proxy/config-reload.js'

/**
 * primary -> worker, over the cluster's IPC channel. A reload with an `id` (the admin API's) is
 * answered with what it did; without one (SIGHUP), it is not.
 */
export type WorkerMessage =
  | { type: 'keygate:reload'; id?: number }
  | { type: 'keygate:reload-routes'; id?: number }
  | { type: 'keygate:metrics-request'; id: number }
  | { type: 'keygate:routes-request'; id: number }
/** the route, issuers and agents files, all or nothing (proxy/config-reload.ts): SIGHUP's and POST /v1/reload's */
export const RELOAD_FILES: WorkerMessage = { type: 'keygate:reload' }
/** the route file alone: POST /v1/routes/reload's */
export const RELOAD_ROUTES: WorkerMessage = { type: 'keygate:reload-routes' }
export const METRICS_REQUEST = 'keygate:metrics-request'
export const ROUTES_REQUEST = 'keygate:routes-request'

/** worker -> primary: its registry, or why it could not read it */
export type MetricsAnswer = { type: 'keygate:metrics'; id: number } & ({ metrics: MetricsSnapshot } | { error: string })
export const METRICS_ANSWER = 'keygate:metrics'

/** worker -> primary: its routes in force, or what a reload did, or why it could not say */
export type RoutesAnswer = { type: 'keygate:routes'; id: number } & ({ routes: RoutesInForce } | { reload: RoutesReload } | { error: string })
export const ROUTES_ANSWER = 'keygate:routes'

/** worker -> primary: what a reload of the files did, or why it could not say */
export type ReloadAnswer = { type: 'keygate:reloaded'; id: number } & ({ reload: ConfigReload } | { error: string })
export const RELOAD_ANSWER = 'keygate:reloaded'

/** a scrape fails when a worker has not sent its metrics within this (Prometheus's own timeout is 10 s) */
export const METRICS_TIMEOUT_MS = 5000
/** an admin request about routes fails when a worker has not answered within this */
export const ROUTES_TIMEOUT_MS = 10_000
/** a reload of the files fails when a worker has not answered within this: a new issuer's keys are fetched first (discovery and JWKS, 5 s each at most) */
export const RELOAD_TIMEOUT_MS = 20_000
