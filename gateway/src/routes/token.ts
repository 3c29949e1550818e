import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { TokenRequest, TokenResponse } from '../schemas/token.js'
import { createLoginGuard, type LoginGuard, type LoginGuardOptions } from '../users/login-guard.js'

export interface TokenRoutesOptions {
  /** the login limits (users/login-guard.ts); each one unset takes its DEFAULT_LOGIN_* */
  login?: LoginGuardOptions
  /** a guard built elsewhere (then `login` is not used); default: one over app.keygate's store */
  guard?: LoginGuard
}

/**
 * POST /v1/auth/token: username + password -> a bearer JWT, behind the login guard (failure
 * counts per username and per address, bounded concurrent password checks): 429 RATE_LIMITED.
 */
export const tokenRoutes: FastifyPluginAsyncTypebox<TokenRoutesOptions> = async (app, options) => {
  const guard = options.guard ?? createLoginGuard(app.keygate.store, app.keygate.users, options.login)
  app.post('/v1/auth/token', {
    config: {
      authenticates: true,
      problems: ['VALIDATION_FAILED', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', 'INVALID_CREDENTIALS', 'RATE_LIMITED', 'STORE_UNAVAILABLE']
    },
    schema: {
      summary: 'Log in: username and password for a bearer token',
      description: 'The same answer for an unknown user as for a wrong password. Failed logins are limited per username and per client address (429 with Retry-After).',
      tags: ['auth'],
      body: TokenRequest,
      response: { 200: TokenResponse }
    }
  }, async (request, reply) => {
    // request.ip: the socket's peer (no trust-proxy), which a client cannot choose by a header.
    const username = await guard.login(request.body.username, request.body.password, request.ip)
    request.authenticated = true
    reply.header('cache-control', 'no-store')
    return await app.keygate.tokens.issue(username)
  })
}
