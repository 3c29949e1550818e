import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { authenticate, type Authenticator } from '../../auth/authenticate.js'
import { bearerUser } from './caller.js'
import { GatewayError } from '../../errors.js'
import type { KeyRegistry } from '../../keys/key-registry.js'
import { keyView } from '../../keys/key-view.js'
import { invalidTokenError } from '../../tokens/token-service.js'
import { ApiKeyList, ApiKeyParams, ApiKeyRequest, ApiKeyResponse } from '../schemas/api-keys.js'
import { pageAnswer, PageQuery, pageRequestOf } from '../schemas/paging.js'
import { BEARER_PROBLEMS } from '../../auth/bearer.js'

const userGone = (): GatewayError => invalidTokenError('The bearer token\'s user no longer exists, or was removed and created again: log in again')

export interface ApiKeyRoutesOptions {
  keys: KeyRegistry
  authenticator: Authenticator
}

/**
 * Key management, bearer token only (no signature headers):
 *   POST   /v1/api-keys          register a public key (RSA, Ed25519, EC P-256), proven by a signature over its name
 *   GET    /v1/api-keys          the caller's keys, newest first, revoked and expired ones included, a page at a time
 *   DELETE /v1/api-keys/:apiKey  revoke one of the caller's keys, at every gateway within a second
 */
export const apiKeyRoutes: FastifyPluginAsyncTypebox<ApiKeyRoutesOptions> = async (app, { keys, authenticator }) => {
  // The bearer tier: the token is checked before the body is parsed, so an anonymous caller costs
  // no JSON parsing.
  const bearer = authenticate(authenticator, 'bearer')
  app.addHook('onRequest', bearer.onRequest)
  app.addHook('preHandler', bearer.preHandler)

  app.post('/v1/api-keys', {
    config: {
      authenticates: true,
      problems: [...BEARER_PROBLEMS, 'VALIDATION_FAILED', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE',
        'INVALID_PUBLIC_KEY', ['INVALID_SIGNATURE', 400], 'KEY_LIMIT_REACHED', 'DUPLICATE_KEY', 'RATE_LIMITED', 'STORE_UNAVAILABLE']
    },
    schema: {
      summary: 'Register a public key (RSA, Ed25519 or EC P-256) for signing requests',
      description: '`signature` proves possession of the private key: single-line base64 of the key\'s signature over the exact UTF-8 bytes of `name` ' +
        '(RSA: RSASSA-PKCS1-v1_5 SHA-256; Ed25519: the 64-byte signature; P-256: ECDSA SHA-256, DER as `openssl dgst -sha256 -sign` makes it). ' +
        'The answer\'s `apiKey` (the hex SHA-256 of the key\'s DER SubjectPublicKeyInfo) goes in X-API-Key. A key can be registered once, by anyone; ' +
        'a revoked or expired key stays registered. One key pair is one key whatever its encoding (an EC point compressed or not, ' +
        'PKCS#1 or SPKI): compared by its RFC 7638 thumbprint. ' +
        'SPKI PEM: RSA keys of 2048, 3072 or 4096 bits with the exponent 65537, Ed25519, or EC P-256; at most ' +
        'KEYGATE_MAX_KEYS_PER_USER (default 20) active keys per user (KEY_LIMIT_REACHED beyond), and at most ' +
        'KEYGATE_KEY_REGISTRATIONS_PER_HOUR (default 60) and KEYGATE_KEY_REGISTRATIONS_PER_DAY (default 200) registrations per user, ' +
        'at every gateway together (429 RATE_LIMITED with Retry-After beyond). ' +
        'Optional `expiresAt` (ISO 8601 with a time zone, at most 5 years ahead) makes it expire. ' +
        'Optional `scopes` narrows what the key may do to some of your user\'s scopes (VALIDATION_FAILED naming any other); ' +
        'without it the key has all of them, as they are at registration. Neither is covered by `signature`.',
      tags: ['auth'],
      security: [{ bearerAuth: [] }],
      body: ApiKeyRequest,
      response: { 201: ApiKeyResponse }
    }
  }, async (request, reply) => {
    // The bearer stage refused a token of a removed user or an earlier incarnation; a removal (or
    // one and a new user) racing this registration is caught here, before and after the write.
    const record = await keys.registerForUser({
      owner: bearerUser(request),
      ...request.body,
      userId: request.auth?.bearer?.userId,
      // what the bearer stage found the user may do now (an IdP user's token scopes included)
      ...(request.auth?.account !== undefined && { heldScopes: request.auth.account.scopes.list })
    })
    if (record === undefined) throw userGone()
    reply.code(201)
    return {
      message: 'API key registered',
      apiKey: record.apiKey,
      name: record.name,
      ...(record.expiresAt !== undefined && { expiresAt: record.expiresAt }),
      scopes: record.scopes ?? []
    }
  })

  app.get('/v1/api-keys', {
    config: { authenticates: true, problems: [...BEARER_PROBLEMS, 'VALIDATION_FAILED', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: "The caller's API keys",
      description: 'Newest first, revoked and expired ones included, with `lastUsedAt` (to the minute) and `scopes`; a revoked key leaves the ' +
        'list KEYGATE_REVOKED_KEY_RETENTION_DAYS (default 30) after its revocation. A page at a time: `limit` (1 to 1000, default 100) ' +
        'and `cursor` (the `next_cursor` of the page before); `next_cursor` is null on the last page. A key registered while paging ' +
        'is on no later page (it is newer than the cursor); no key is given twice.',
      tags: ['auth'],
      security: [{ bearerAuth: [] }],
      querystring: PageQuery,
      response: { 200: ApiKeyList }
    }
  }, async (request) => {
    const page = await keys.list(bearerUser(request), pageRequestOf(request.query))
    return pageAnswer({ ...page, items: page.items.map(keyView) })
  })

  app.delete('/v1/api-keys/:apiKey', {
    config: { authenticates: true, problems: [...BEARER_PROBLEMS, 'API_KEY_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Revoke one of your API keys',
      description: 'From the answer on, every gateway refuses the key (401 UNKNOWN_API_KEY) within a second. Revoking a revoked key again answers 204 too.',
      tags: ['auth'],
      security: [{ bearerAuth: [] }],
      params: ApiKeyParams,
      response: { 204: Type.Null({ description: 'Revoked' }) }
    }
  }, async (request, reply) => {
    // Unknown, malformed and other users' keys get the same answer: nothing says a key exists.
    const { outcome } = await keys.revoke(request.params.apiKey, bearerUser(request))
    if (outcome === 'not-found') throw new GatewayError('API_KEY_NOT_FOUND', 'You have no API key with this apiKey; GET /v1/api-keys lists yours')
    // Revoking a revoked key again is a success: the key is revoked, as asked.
    return await reply.code(204).send(null)
  })
}
