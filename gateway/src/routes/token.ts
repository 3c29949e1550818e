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
    schema: { body: TokenRequest, response: { 200: TokenResponse } }
  }, async (request, reply) => {
    // request.ip: the socket's peer (no trust-proxy), which a client cannot choose by a header.
    const username = await guard.login(request.body.username, request.body.password, request.ip)
    reply.header('cache-control', 'no-store')
    return await app.keygate.tokens.issue(username)
  })
}
