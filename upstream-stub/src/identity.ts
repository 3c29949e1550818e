import type { FastifyRequest } from 'fastify'
import { ProblemError } from './problem.js'

/** The only user identity we trust; the gateway sets it after authenticating the caller. */
export const IDENTITY_HEADER = 'x-gateway-user'

/** The user the gateway vouches for, or MISSING_IDENTITY. */
export function userOf (request: FastifyRequest): string {
  const value = request.headers[IDENTITY_HEADER]
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ProblemError('MISSING_IDENTITY', `The ${IDENTITY_HEADER} header is required.`)
  }
  return value
}
