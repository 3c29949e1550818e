import type { FastifyPluginAsync } from 'fastify'
import { userOf } from '../identity.js'
import type { IdentityTokenVerifier } from '../identity-token.js'
import { ProblemError } from '../problem.js'
import type { ClientStore } from '../store.js'
import type { TransactionStore } from '../transaction-store.js'
import { clientsRoutes } from './clients.js'
import { transactionsRoutes } from './transactions.js'

export interface V1RoutesOptions {
  clients: ClientStore
  transactions: TransactionStore
  /** When set, every request must also carry the gateway's identity token for the same user. */
  identityToken?: IdentityTokenVerifier | undefined
}

/**
 * Mount with `prefix: '/v1'`. The identity check is a hook of this scope, so
 * it covers every resource below (and their unknown subpaths, which have their
 * own 404 handlers) while /v1 itself and unknown resources stay plain 404s.
 */
export const v1Routes: FastifyPluginAsync<V1RoutesOptions> = async (app, { clients, transactions, identityToken }) => {
  // onRequest runs before the body is parsed, so a caller without an identity
  // gets 401 and learns nothing about validation rules.
  app.addHook('onRequest', async (request) => {
    // Token first: until it checks out, nothing in the request, x-gateway-user
    // included, is known to come from the gateway.
    const subject = identityToken === undefined ? undefined : await identityToken.verify(request.headers)
    const user = userOf(request)
    if (subject !== undefined && subject !== user) {
      throw new ProblemError('INVALID_IDENTITY_TOKEN', 'The identity token was issued for another user.')
    }
  })

  await app.register(clientsRoutes, { prefix: '/clients', store: clients })
  await app.register(transactionsRoutes, { prefix: '/transactions', clients, transactions })
}
