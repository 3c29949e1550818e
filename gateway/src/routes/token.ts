import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { TokenRequest, TokenResponse } from '../schemas/token.js'

/** POST /v1/auth/token: username + password -> a bearer JWT. */
export const tokenRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/auth/token', {
    schema: { body: TokenRequest, response: { 200: TokenResponse } }
  }, async (request, reply) => {
    const { users, tokens } = app.keygate
    const username = await users.authenticate(request.body.username, request.body.password)
    reply.header('cache-control', 'no-store')
    return await tokens.issue(username)
  })
}
