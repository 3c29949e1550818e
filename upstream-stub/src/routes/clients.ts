import type { FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type, type Static } from '@sinclair/typebox'
import { decodeCursor, encodeCursor } from '../cursor.js'
import { notFound, ProblemError } from '../problem.js'
import type { ClientStore } from '../store.js'

/** The only identity we trust; the gateway sets it after authenticating the caller. */
export const IDENTITY_HEADER = 'x-gateway-user'

const DEFAULT_LIMIT = 50

/*
 * Patterns are written to run in linear time: with allErrors-style reporting
 * every pattern runs even on over-long input, so nothing here may backtrack
 * catastrophically. The e-mail pattern is the WHATWG <input type=email> one,
 * except that it requires a dot in the domain.
 */
const EMAIL_PATTERN =
  "^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"

const CURSOR_MESSAGE = 'must be a next_cursor value returned by this endpoint'

const CreateClientBody = Type.Object(
  {
    // `\S` rejects whitespace-only names; the stored name is trimmed.
    name: Type.String({
      minLength: 1,
      maxLength: 200,
      pattern: '\\S',
      errorMessage: 'must be 1-200 characters and not blank',
    }),
    email: Type.String({
      maxLength: 254,
      pattern: EMAIL_PATTERN,
      errorMessage: 'must be a valid e-mail address',
    }),
    tax_id: Type.String({ pattern: '^[0-9]{5,20}$', errorMessage: 'must be 5-20 digits' }),
  },
  { additionalProperties: false, errorMessage: 'must be a JSON object' },
)
export type CreateClientBody = Static<typeof CreateClientBody>

const ListClientsQuery = Type.Object({
  // Validated as the string it is on the wire (see validation.ts); the pattern
  // is exactly the integers 1-100, without signs, spaces or leading zeros.
  limit: Type.Optional(
    Type.String({ pattern: '^(?:[1-9][0-9]?|100)$', errorMessage: 'must be an integer from 1 to 100' }),
  ),
  cursor: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', errorMessage: CURSOR_MESSAGE })),
})
export type ListClientsQuery = Static<typeof ListClientsQuery>

const ClientParams = Type.Object({ id: Type.String() })

const ClientResource = Type.Object({
  id: Type.String(),
  name: Type.String(),
  email: Type.String(),
  tax_id: Type.String(),
  created_at: Type.String(),
})

const ClientPage = Type.Object({
  items: Type.Array(ClientResource),
  next_cursor: Type.Union([Type.String(), Type.Null()]),
})

function userOf(request: FastifyRequest): string {
  const value = request.headers[IDENTITY_HEADER]
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ProblemError('MISSING_IDENTITY', `The ${IDENTITY_HEADER} header is required.`)
  }
  return value
}

export interface ClientsRoutesOptions {
  store: ClientStore
}

/** Mount with `prefix: '/v1/clients'`; the collection itself is `/v1/clients/`. */
export const clientsRoutes: FastifyPluginAsyncTypebox<ClientsRoutesOptions> = async (app, { store }) => {
  // onRequest runs before the body is parsed, so a caller without an identity
  // gets 401 and learns nothing about validation rules.
  app.addHook('onRequest', async (request) => {
    userOf(request)
  })
  // Own 404 handler so unknown routes under the prefix pass through the hook above.
  app.setNotFoundHandler(notFound)

  app.post(
    '/',
    {
      prefixTrailingSlash: 'slash',
      schema: { body: CreateClientBody, response: { 201: ClientResource } },
    },
    async (request, reply) => {
      const result = store.create(userOf(request), request.body)
      if (!result.ok) {
        // The tax_id itself is not echoed back: it is personal data.
        throw new ProblemError('CLIENT_EXISTS', 'You already have a client with this tax_id.')
      }
      request.log.info({ clientId: result.client.id }, 'client created')
      return reply
        .code(201)
        .header('location', `/v1/clients/${result.client.id}`)
        .send(result.client)
    },
  )

  app.get(
    '/',
    {
      prefixTrailingSlash: 'slash',
      schema: { querystring: ListClientsQuery, response: { 200: ClientPage } },
    },
    async (request) => {
      const { limit, cursor } = request.query
      let before: number | undefined
      if (cursor !== undefined) {
        const seq = decodeCursor(cursor)
        if (seq === null) {
          throw new ProblemError('VALIDATION_FAILED', 'The cursor is not valid.', [
            { field: 'cursor', message: CURSOR_MESSAGE },
          ])
        }
        before = seq
      }
      const page = store.list(userOf(request), {
        limit: limit === undefined ? DEFAULT_LIMIT : Number(limit),
        before,
      })
      return {
        items: page.items,
        next_cursor: page.next === null ? null : encodeCursor(page.next),
      }
    },
  )

  app.get('/:id', { schema: { params: ClientParams, response: { 200: ClientResource } } }, async (request) => {
    const client = store.get(userOf(request), request.params.id)
    // Another user's client is indistinguishable from a missing one.
    if (client === undefined) throw new ProblemError('NOT_FOUND', 'No such client.')
    return client
  })
}
