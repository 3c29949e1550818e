import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { verifyBearer } from '../auth/bearer.js'
import { ApiKeyRequest, ApiKeyResponse } from '../schemas/api-keys.js'

/** POST /v1/api-keys (bearer only): register an RSA public key, proven by a signature over its name. */
export const apiKeyRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/api-keys', {
    // The token is checked before the body is parsed: an anonymous caller costs no JSON parsing.
    onRequest: async (request) => {
      request.auth = { user: await verifyBearer(app.keygate.tokens, request.headers.authorization) }
      request.authenticated = true
    },
    config: {
      authenticates: true,
      problems: ['MISSING_TOKEN', 'INVALID_TOKEN', 'VALIDATION_FAILED', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE',
        'INVALID_PUBLIC_KEY', ['INVALID_SIGNATURE', 400], 'DUPLICATE_KEY', 'STORE_UNAVAILABLE']
    },
    schema: {
      summary: 'Register an RSA public key for signing requests',
      description: '`signature` proves possession of the private key: single-line base64 of the RSA-SHA256 signature over the exact UTF-8 bytes of `name`. ' +
        'The answer\'s `apiKey` (the hex SHA-256 of the key\'s DER SubjectPublicKeyInfo) goes in X-API-Key. A key can be registered once, by anyone.',
      tags: ['auth'],
      security: [{ bearerAuth: [] }],
      body: ApiKeyRequest,
      response: { 201: ApiKeyResponse }
    }
  }, async (request, reply) => {
    const owner = request.auth?.user
    if (owner === undefined) throw new Error('the bearer hook did not run')
    const record = await app.keygate.keys.register({ owner, ...request.body })
    reply.code(201)
    return { message: 'API key registered', apiKey: record.apiKey, name: record.name }
  })
}
