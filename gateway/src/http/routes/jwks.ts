import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsync } from 'fastify'
import type { TokenService } from '../../tokens/token-service.js'

/** A JWK as published: every member passes through (kty, crv, x, y, kid, alg, use). */
const Jwk = Type.Object({ kty: Type.String(), kid: Type.String(), alg: Type.String() }, { additionalProperties: true })

/** The public half of the token-signing key, so others can verify keygate's tokens. */
export const jwksRoutes: FastifyPluginAsync<{ tokens: TokenService }> = async (app, { tokens }) => {
  app.get('/.well-known/jwks.json', {
    schema: {
      summary: 'The public keys that verify keygate\'s bearer and identity tokens (JWKS)',
      description: 'The current signing key first; a key replaced by a rotation stays until the tokens it signed have expired.',
      tags: ['operations'],
      response: { 200: Type.Object({ keys: Type.Array(Jwk) }) }
    }
  }, async (_request, reply) => {
    // Short: after a rotation, verifiers should see the new key well before the 30 s in which
    // every gateway starts signing with it.
    reply.header('cache-control', 'public, max-age=15')
    return tokens.jwks
  })
}
