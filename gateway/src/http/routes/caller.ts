import type { FastifyRequest } from 'fastify'
import type { ScopeSet } from '../../users/scopes.js'

/** Who a bearer-authenticated request is (the bearer tier ran: its user and that user's scopes now). */
export function bearerCaller (request: FastifyRequest): { user: string; scopes: ScopeSet } {
  const user = request.auth?.user
  const scopes = request.auth?.scopes
  if (user === undefined || scopes === undefined) throw new Error('the bearer tier did not run')
  return { user, scopes }
}
