import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { verifyBearer } from '../auth/bearer.js'
import { ApiKeyRequest, ApiKeyResponse } from '../schemas/api-keys.js'

/** POST /v1/api-keys (bearer only): register an RSA public key, proven by a signature over its name. */
export const apiKeyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/api-keys', {
    // The token is checked before the body is parsed: an anonymous caller costs no JSON parsing.
    onRequest: async (request) => {
      request.auth = { user: await verifyBearer(app.keygate.tokens, request.headers.authorization) }
    },
    schema: { body: ApiKeyRequest, response: { 201: ApiKeyResponse } }
  }, async (request, reply) => {
    const owner = request.auth?.user
    if (owner === undefined) throw new Error('the bearer hook did not run')
    const record = await app.keygate.keys.register({ owner, ...request.body })
    reply.code(201)
    return { message: 'API key registered', apiKey: record.apiKey, name: record.name }
  })
}
