// Fastify declaration merging: what keygate adds to the instance and to requests.
import type { AuthState } from './auth/stage.js'
import type { KeyRegistry } from './keys/key-registry.js'
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
  }
}
