import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { markLoggedIn } from '../../auth/authenticate.js'
import type { TokenService } from '../../tokens/token-service.js'
import type { LoginGuard } from '../../users/login-guard.js'
import { TokenRequest, TokenResponse } from '../schemas/token.js'

export interface TokenRoutesOptions {
  tokens: TokenService
  /** the login limits and the password check (users/login-guard.ts) */
  guard: LoginGuard
}

/**
 * POST /v1/auth/token: username + password -> a bearer JWT, behind the login guard (failure
 * counts per username and per address, bounded concurrent password checks): 429 RATE_LIMITED.
 */
export const tokenRoutes: FastifyPluginAsyncTypebox<TokenRoutesOptions> = async (app, { tokens, guard }) => {
  app.post('/v1/auth/token', {
    config: {
      authenticates: true,
      problems: ['VALIDATION_FAILED', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', 'INVALID_CREDENTIALS', 'RATE_LIMITED', 'STORE_UNAVAILABLE']
    },
    schema: {
      summary: 'Log in: username and password for a bearer token',
      description: 'The same answer for an unknown user as for a wrong password. ' +
        'Failed logins are limited per username and per client address (429 with Retry-After).',
      tags: ['auth'],
      body: TokenRequest,
      response: { 200: TokenResponse }
    }
  }, async (request, reply) => {
    // request.ip: the socket's peer, or behind a trusted proxy the client it reports
    // (http/plugins/client-address.ts); never an address a client chose by a header.
    const user = await guard.login(request.body.username, request.body.password, request.ip)
    markLoggedIn(request)
    reply.header('cache-control', 'no-store')
    // the incarnation and credential of the record whose password was just checked: a token
    // issued while the password changes is one issued before the change
    return await tokens.issue(user.username, user)
  })
}
