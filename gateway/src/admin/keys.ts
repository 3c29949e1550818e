// The admin API's keys: list (every key, or one user's), show one with its public key, change its
// scopes or expiry, revoke one (each change at every gateway on the store within a second, as a
// revocation by its owner).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { GatewayError } from '../errors.js'
import type { Operations } from './operations.js'
import { pageAnswer, pageRequestOf } from '../http/schemas/paging.js'
import { KeyList, KeyParams, KeyPatchBody, KeyQuery, KeyRevocation, OperatorKey, OperatorKeyDetail } from './schemas/keys.js'

const TAG = 'keys'
export const noSuchKey = (apiKey: string): GatewayError => new GatewayError('API_KEY_NOT_FOUND', `No key ${apiKey} was ever registered`)

export const adminKeyRoutes: FastifyPluginAsyncTypebox<{ operations: Operations }> = async (app, { operations }) => {
  app.get('/v1/keys', {
    config: { problems: ['VALIDATION_FAILED', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Every key, or one user\'s (?user=NAME)',
      description: 'A page at a time, newest first: `limit` (1 to 1000, default 100) and `cursor` (the `next_cursor` of the page before; ' +
        'null on the last page). A revoked key past KEYGATE_REVOKED_KEY_RETENTION_DAYS is listed no more; GET /v1/keys/{apiKey} still shows it.',
      tags: [TAG],
      querystring: KeyQuery,
      response: { 200: KeyList }
    }
  }, async (request) => {
    const { user, ...page } = request.query
    return pageAnswer(await operations.listKeys(user, pageRequestOf(page)))
  })

  app.get('/v1/keys/:apiKey', {
    config: { problems: ['API_KEY_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'One key, with its public key',
      description: 'Revoked keys included; a revoked key past KEYGATE_REVOKED_KEY_RETENTION_DAYS is a tombstone: `prunedAt`, no `publicKey`.',
      tags: [TAG],
      params: KeyParams,
      response: { 200: OperatorKeyDetail }
    }
  }, async (request) => {
    const key = await operations.getKey(request.params.apiKey)
    if (key === null) throw noSuchKey(request.params.apiKey)
    return key
  })

  app.patch('/v1/keys/:apiKey', {
    config: { audit: 'key.update', problems: ['VALIDATION_FAILED', 'API_KEY_NOT_FOUND', 'KEY_NOT_ACTIVE', 'UNSUPPORTED_MEDIA_TYPE', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Change a key\'s scopes or expiry',
      description: 'Every gateway on the store applies the change within a second. `scopes` must be some of its owner\'s; `expiresAt` is ' +
        'checked as at registration, and null removes the expiry. A revoked or expired key cannot be changed (409 KEY_NOT_ACTIVE, ' +
        'with `keyStatus` and the `key`): register a new one.',
      tags: [TAG],
      params: KeyParams,
      body: KeyPatchBody,
      response: { 200: OperatorKey }
    }
  }, async (request) => {
    const { apiKey } = request.params
    const change = await operations.updateKey(apiKey, request.body)
    if (change === null) throw noSuchKey(apiKey)
    request.auditOutcome = {
      outcome: change.outcome,
      user: change.key.owner,
      changed: Object.keys(request.body).sort()
    }
    if (change.outcome !== 'updated') {
      throw new GatewayError('KEY_NOT_ACTIVE', `The key ${apiKey} is ${change.outcome}: it can never sign again, so it is left as it is; register a new one`, {
        extra: { keyStatus: change.outcome, key: change.key }
      })
    }
    return change.key
  })

  app.delete('/v1/keys/:apiKey', {
    config: { audit: 'key.revoke', problems: ['API_KEY_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Revoke a key',
      description: 'Every gateway on the store refuses it (401 UNKNOWN_API_KEY) within a second. A revoked key stays revoked; ' +
        'revoking it again answers 200 with `alreadyRevoked: true`.',
      tags: [TAG],
      params: KeyParams,
      response: { 200: KeyRevocation }
    }
  }, async (request) => {
    const revocation = await operations.revokeKey(request.params.apiKey)
    if (revocation === null) throw noSuchKey(request.params.apiKey)
    request.auditOutcome = { outcome: revocation.alreadyRevoked ? 'already-revoked' : 'revoked', user: revocation.key.owner }
    return { ...revocation.key, alreadyRevoked: revocation.alreadyRevoked }
  })
}
