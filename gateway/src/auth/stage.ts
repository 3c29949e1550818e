// The shape every stage of the business auth pipeline shares. A stage reads the request and what
// earlier stages established (`AuthState`), adds to it, or throws a GatewayError that denies the
// request. Stages that do not need the body run before it is read (onRequest), so a request that
// fails a cheap check is refused before the gateway buffers its body.
import type { FastifyRequest } from 'fastify'
import type { RegisteredKey } from '../keys/key-registry.js'
import type { ScopeSet } from '../users/scopes.js'

export interface SignatureHeaders {
  apiKey: string
  timestamp: string
  signature: string
}

export type ReplayPolicy = 'reject' | 'allow'

/** How much a route asks of a request: a signature and a token, a token, or nothing. */
export type AuthTier = 'signed' | 'bearer' | 'public'
export const AUTH_TIERS: readonly AuthTier[] = ['signed', 'bearer', 'public']

export interface AuthState {
  /** what the route wants done with a repeated signed POST, PUT, PATCH or DELETE */
  replay?: ReplayPolicy
  /** the bearer token's subject */
  user?: string
  signatureHeaders?: SignatureHeaders
  timestampMs?: number
  key?: RegisteredKey
  /** the scopes the route requires, all of them (the scope stage refuses a request without one) */
  requiredScopes?: readonly string[]
  /** what the request may do: the key's scopes its user still has, or the bearer's user's (scope.ts) */
  scopes?: ScopeSet
}

export interface AuthStage {
  readonly name: string
  /** true: runs after the body is buffered (preHandler); false: before (onRequest) */
  readonly needsBody: boolean
  run: (request: FastifyRequest, state: AuthState) => void | Promise<void>
}

/** The state a stage depends on; a missing piece is a pipeline-order bug, not a client error. */
export function required<T> (value: T | undefined, what: string, stage: string): T {
  if (value === undefined) throw new Error(`auth stage ${stage} needs ${what}; check the pipeline order`)
  return value
}
