import type { FastifyPluginAsync } from 'fastify'

/** The public half of the token-signing key, so others can verify keygate's tokens. */
export const jwksRoutes: FastifyPluginAsync = async (app) => {
  app.get('/.well-known/jwks.json', async (_request, reply) => {
    // Short: after a rotation, verifiers should see the new key well before the 30 s in which
    // every gateway starts signing with it.
    reply.header('cache-control', 'public, max-age=15')
    return app.keygate.tokens.jwks
  })
}
