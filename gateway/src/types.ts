// Fastify declaration merging: what keygate adds to the instance and to requests.
import type { AuthState } from './auth/stage.js'
import type { KeyRegistry } from './keys/key-registry.js'
import type { GatewayMetrics } from './metrics/metrics.js'
import type { RouteRegistry } from './routing/route-registry.js'
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
    /** the request passed authentication (the route's pipeline, the login, the bearer check) */
    authenticated: boolean
  }
  interface FastifyContextConfig {
    /** keygate's own route authenticates its caller: its auth outcome is counted in the metrics */
    authenticates?: boolean
  }
}
