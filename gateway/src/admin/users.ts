// The admin API's users: list, show, create or change the password (PUT), remove (revoking every
// key of the user's, as `keygate users remove` does). The rules are the services' (operations.ts).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { GatewayError } from '../errors.js'
import type { Operations } from './operations.js'
import { pageAnswer, PageQuery, pageRequestOf } from '../http/schemas/paging.js'
import { UserList, UserParams, UserPutBody, UserRemoval, UserSummary } from './schemas/users.js'

const TAG = 'users'
export const noSuchUser = (name: string): GatewayError => new GatewayError('USER_NOT_FOUND', `There is no user ${name}; PUT /v1/users/${name} creates it`)

export const adminUserRoutes: FastifyPluginAsyncTypebox<{ operations: Operations }> = async (app, { operations }) => {
  app.get('/v1/users', {
    config: { problems: ['VALIDATION_FAILED', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Every user, with their numbers of keys',
      description: 'A page at a time, by name: `limit` (1 to 1000, default 100) and `cursor` (the `next_cursor` of the page before; null on the last page).',
      tags: [TAG],
      querystring: PageQuery,
      response: { 200: UserList }
    }
  }, async (request) => {
    return pageAnswer(await operations.listUsers(pageRequestOf(request.query)))
  })

  app.get('/v1/users/:name', {
    config: { problems: ['VALIDATION_FAILED', 'USER_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: { summary: 'One user', tags: [TAG], params: UserParams, response: { 200: UserSummary } }
  }, async (request) => {
    const user = await operations.getUser(request.params.name)
    if (user === null) throw noSuchUser(request.params.name)
    return user
  })

  app.put('/v1/users/:name', {
    config: { audit: 'user.put', problems: ['VALIDATION_FAILED', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Create a user, or set its password',
      description: '201 when the user is new, 200 when it existed (its password is replaced: every gateway refuses the tokens issued before within a second; ' +
        'a change of scopes alone ends no token). ' +
        'A password is 8 to 1024 characters.',
      tags: [TAG],
      params: UserParams,
      body: UserPutBody,
      response: { 200: UserSummary, 201: UserSummary }
    }
  }, async (request, reply) => {
    const { user, created } = await operations.putUser(request.params.name, request.body)
    request.auditOutcome = { outcome: created ? 'created' : 'updated' }
    reply.code(created ? 201 : 200)
    return user
  })

  app.delete('/v1/users/:name', {
    config: { audit: 'user.delete', problems: ['VALIDATION_FAILED', 'USER_NOT_FOUND', 'STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Remove a user and revoke every key of theirs',
      description: 'One atomic step: the user is removed and its keys revoked; every gateway refuses them within a second. ' +
        'Bearer tokens already issued to the user are refused by every gateway within a second, also once a user of the same name is created again.',
      tags: [TAG],
      params: UserParams,
      response: { 200: UserRemoval }
    }
  }, async (request) => {
    const removal = await operations.removeUser(request.params.name)
    if (removal === null) throw noSuchUser(request.params.name)
    request.auditOutcome = { outcome: 'removed', revokedKeys: removal.revokedKeys.length }
    return { username: removal.username, revokedKeyCount: removal.revokedKeys.length, revokedKeys: removal.revokedKeys }
  })
}
