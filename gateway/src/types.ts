// Fastify declaration merging: the services keygate decorates its instance with. What it adds to
// requests is declared beside the code that sets it (auth/authenticate.ts, proxy/upstream-request.ts,
// http/plugins/problems.ts, http/plugins/metrics.ts), so that no layer relies on a higher one.
import type { IssuersInForce } from './idp/issuers-in-force.js'
import type { FastifyInstance as DecisionApp } from 'fastify'
import type { UsageCounter } from './analytics/counter.js'
import type { KeyRegistry } from './keys/key-registry.js'
import type { ByteBudget } from './lib/byte-budget.js'
import type { GatewayMetrics } from './metrics/metrics.js'
import type { LoginGuard } from './users/login-guard.js'
import type { ConfigReloader } from './proxy/config-reload.js'
import type { RouteRegistry } from './proxy/route-registry.js'
import type { Store } from './store/index.js'
import type { TokenService } from './tokens/token-service.js'
import type { UserService } from './users/user-service.js'

export interface KeygateServices {
  store: Store
  tokens: TokenService
  users: UserService
  keys: KeyRegistry
  routes: RouteRegistry
  metrics: GatewayMetrics
  loginGuard: LoginGuard
  /** the request bodies buffered right now, all requests together, and their ceiling (KEYGATE_BODY_MEMORY_LIMIT) */
  bodyMemory: ByteBudget
  /** usage analytics' counts, when KEYGATE_USAGE_ANALYTICS is on (analytics/counter.ts) */
  usage?: UsageCounter
  /** decision mode's app, on the same services (decision/server.ts), when KEYGATE_DECISION_PORT is set; not listening yet */
  decisions?: DecisionApp
  /** the trusted issuers in force and their keys (idp/issuers-in-force.ts): with KEYGATE_ISSUERS, or KEYGATE_OIDC_* */
  issuers?: IssuersInForce
  /** reloads the route, issuers and agents files, all or nothing (proxy/config-reload.ts): SIGHUP, keygate reload, POST /v1/reload */
  reloader: ConfigReloader
}

declare module 'fastify' {
  interface FastifyInstance {
    keygate: KeygateServices
  }
}
