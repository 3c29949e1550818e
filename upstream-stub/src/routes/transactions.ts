import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type, type Static } from '@sinclair/typebox'
import { ISO_4217_PATTERN } from '../currencies.js'
import { userOf } from '../identity.js'
import { pageQueryProperties, pageSchema, readPageQuery, toPageBody } from '../pagination.js'
import { notFound, ProblemError, type FieldError } from '../problem.js'
import type { ClientStore } from '../store.js'
import type { TransactionStore } from '../transaction-store.js'
import { throwIfFieldErrors, toFieldErrors } from '../validation.js'

/*
 * A positive decimal string: 1-15 integer digits without leading zeros (a lone
 * "0" before a fraction is fine), then optionally "." and 1-2 digits. The
 * second branch is the fractions of one unit, written so that 0, 0.0 and 0.00
 * do not match. No sign, exponent, spaces or bare "." on either side.
 * Linear time: the branches are told apart by their first character.
 */
const AMOUNT_PATTERN = '^(?:[1-9][0-9]{0,14}(?:\\.[0-9]{1,2})?|0\\.(?:[1-9][0-9]?|0[1-9]))$'

const CLIENT_ID_MESSAGE = 'must be the id of one of your clients'
/** Same answer for another user's client and a missing one: existence is not revealed. */
const NOT_YOUR_CLIENT = 'is not one of your clients'

const ClientId = Type.String({ minLength: 1, maxLength: 64, errorMessage: CLIENT_ID_MESSAGE })

const CreateTransactionBody = Type.Object(
  {
    client_id: ClientId,
    amount: Type.String({
      pattern: AMOUNT_PATTERN,
      errorMessage: 'must be a positive decimal string with at most 15 integer digits and 2 decimals, e.g. "10.50"',
    }),
    currency: Type.String({
      pattern: ISO_4217_PATTERN,
      errorMessage: 'must be an active ISO 4217 currency code in upper case, e.g. "EUR"',
    }),
  },
  { additionalProperties: false, errorMessage: 'must be a JSON object' }
)
export type CreateTransactionBody = Static<typeof CreateTransactionBody>

const ListTransactionsQuery = Type.Object({ ...pageQueryProperties, client_id: Type.Optional(ClientId) })
export type ListTransactionsQuery = Static<typeof ListTransactionsQuery>

const TransactionParams = Type.Object({ id: Type.String() })

const TransactionResource = Type.Object({
  id: Type.String(),
  client_id: Type.String(),
  amount: Type.String(),
  currency: Type.String(),
  created_at: Type.String(),
})

const TransactionPage = pageSchema(TransactionResource)

export interface TransactionsRoutesOptions {
  clients: ClientStore
  transactions: TransactionStore
}

/** The body's client_id when it is a string, whatever else is wrong with the body. */
function clientIdOf (body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || !Object.hasOwn(body, 'client_id')) return undefined
  const value: unknown = (body as { client_id: unknown }).client_id
  return typeof value === 'string' ? value : undefined
}

/**
 * Mount inside v1Routes, which checks the caller's identity, with prefix
 * `/transactions`; the collection itself is `/v1/transactions/`.
 */
export const transactionsRoutes: FastifyPluginAsyncTypebox<TransactionsRoutesOptions> = async (
  app,
  { clients, transactions }
) => {
  // As for clients: unknown routes under the prefix go through the identity hook.
  app.setNotFoundHandler(notFound)

  app.post(
    '/',
    {
      prefixTrailingSlash: 'slash',
      // The handler gets schema failures instead of fastify throwing them, so
      // it can add the ownership check and report every failing field at once.
      attachValidation: true,
      schema: { body: CreateTransactionBody, response: { 201: TransactionResource } },
    },
    async (request, reply) => {
      const user = userOf(request)
      const failed = request.validationError
      const errors: FieldError[] = failed === undefined ? [] : toFieldErrors(failed.validation, 'body')
      // Until the errors are known to be empty, the body has whatever shape the caller sent.
      const clientId = clientIdOf(request.body as unknown)
      const clientIdFailed = errors.some((e) => e.field === 'client_id' || e.field === 'body')
      if (!clientIdFailed && clientId !== undefined && clients.get(user, clientId) === undefined) {
        errors.push({ field: 'client_id', message: NOT_YOUR_CLIENT })
      }
      throwIfFieldErrors(errors, 'body')

      const transaction = transactions.create(user, request.body)
      request.log.info({ transactionId: transaction.id }, 'transaction created')
      return reply
        .code(201)
        .header('location', `/v1/transactions/${transaction.id}`)
        .send(transaction)
    }
  )

  app.get(
    '/',
    {
      prefixTrailingSlash: 'slash',
      schema: { querystring: ListTransactionsQuery, response: { 200: TransactionPage } },
    },
    async (request) => {
      const user = userOf(request)
      const errors: FieldError[] = []
      const page = readPageQuery(request.query, errors)
      const clientId = request.query.client_id
      if (clientId !== undefined && clients.get(user, clientId) === undefined) {
        errors.push({ field: 'client_id', message: NOT_YOUR_CLIENT })
      }
      throwIfFieldErrors(errors, 'query')
      return toPageBody(transactions.list(user, { ...page, clientId }))
    }
  )

  app.get(
    '/:id',
    { schema: { params: TransactionParams, response: { 200: TransactionResource } } },
    async (request) => {
      const transaction = transactions.get(userOf(request), request.params.id)
      // Another user's transaction is indistinguishable from a missing one.
      if (transaction === undefined) throw new ProblemError('NOT_FOUND', 'No such transaction.')
      return transaction
    }
  )
}
