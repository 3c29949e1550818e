import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type, type Static } from '@sinclair/typebox'
import { userOf } from '../identity.js'
import { pageQueryProperties, pageSchema, readPageQuery, toPageBody } from '../pagination.js'
import { notFound, ProblemError, type FieldError } from '../problem.js'
import type { ClientStore } from '../store.js'
import { throwIfFieldErrors } from '../validation.js'

/*
 * Patterns are written to run in linear time: with allErrors-style reporting
 * every pattern runs even on over-long input, so nothing here may backtrack
 * catastrophically. The e-mail pattern is the WHATWG <input type=email> one,
 * except that it requires a dot in the domain.
 */
const EMAIL_PATTERN =
  "^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"

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
  { additionalProperties: false, errorMessage: 'must be a JSON object' }
)
export type CreateClientBody = Static<typeof CreateClientBody>

const ListClientsQuery = Type.Object(pageQueryProperties)
export type ListClientsQuery = Static<typeof ListClientsQuery>

const ClientParams = Type.Object({ id: Type.String() })

const ClientResource = Type.Object({
  id: Type.String(),
  name: Type.String(),
  email: Type.String(),
  tax_id: Type.String(),
  created_at: Type.String(),
})

const ClientPage = pageSchema(ClientResource)

export interface ClientsRoutesOptions {
  store: ClientStore
}

/**
 * Mount inside v1Routes, which checks the caller's identity, with prefix
 * `/clients`; the collection itself is `/v1/clients/`.
 */
export const clientsRoutes: FastifyPluginAsyncTypebox<ClientsRoutesOptions> = async (app, { store }) => {
  // Own 404 handler so unknown routes under the prefix pass through the
  // identity hook too: nobody maps the API without an identity.
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
    }
  )

  app.get(
    '/',
    {
      prefixTrailingSlash: 'slash',
      schema: { querystring: ListClientsQuery, response: { 200: ClientPage } },
    },
    async (request) => {
      const errors: FieldError[] = []
      const page = readPageQuery(request.query, errors)
      throwIfFieldErrors(errors, 'query')
      return toPageBody(store.list(userOf(request), page))
    }
  )

  app.get('/:id', { schema: { params: ClientParams, response: { 200: ClientResource } } }, async (request) => {
    const client = store.get(userOf(request), request.params.id)
    // Another user's client is indistinguishable from a missing one.
    if (client === undefined) throw new ProblemError('NOT_FOUND', 'No such client.')
    return client
  })
}
