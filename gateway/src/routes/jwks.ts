import type { FastifyPluginAsync } from 'fastify'

/** The public half of the token-signing key, so others can verify keygate's tokens. */
export const jwksRoutes: FastifyPluginAsync = async (app) => {
  app.get('/.well-known/jwks.json', async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300')
    return app.keygate.tokens.jwks
  })
}
