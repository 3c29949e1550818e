// Fastify declaration merging: what keygate adds to the instance and to requests.
import type { AuthState } from './auth/stage.js'
import type { KeyRegistry } from './keys/key-registry.js'
import type { GatewayMetrics } from './metrics/metrics.js'
import type { LoginGuard } from './users/login-guard.js'
import type { RouteRegistry } from './proxy/route-registry.js'
import type { ForwardState } from './proxy/upstream-request.js'
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
}

declare module 'fastify' {
  interface FastifyInstance {
    keygate: KeygateServices
  }
  interface FastifyRequest {
    /** what the auth pipeline established about this request; null outside business routes */
    auth: AuthState | null
    /** the error code that denied the request, for the access log */
    denialReason: string | null
    /** the request passed authentication (its tier's pipeline, or the login) */
    authenticated: boolean
    /** a business request: its route, and its body and identity token once known; null elsewhere */
    forward: ForwardState | null
  }
  interface FastifyContextConfig {
    /** keygate's own route authenticates its caller: its auth outcome is counted in the metrics */
    authenticates?: boolean
  }
}
