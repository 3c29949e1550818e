// Who a request of keygate's own bearer endpoints is: what the bearer tier established (request.auth).
import type { FastifyRequest } from 'fastify'
import type { ScopeSet } from '../../users/scopes.js'

/** The user a bearer-authenticated request acts for (the bearer tier ran). */
export function bearerUser (request: FastifyRequest): string {
  const user = request.auth?.user
  if (user === undefined) throw new Error('the bearer tier did not run')
  return user
}

/** Who a bearer-authenticated request is: its user and that user's scopes now (the scope stage ran). */
export function bearerCaller (request: FastifyRequest): { user: string; scopes: ScopeSet } {
  const user = bearerUser(request)
  const scopes = request.auth?.scopes
  if (scopes === undefined) throw new Error('the bearer tier\'s scope stage did not run')
  return { user, scopes }
}
