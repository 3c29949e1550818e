// The business auth pipeline, in order, on one screen. Cheap checks first: nothing here touches
// the store before the token and headers are sound, and the RSA verification runs last. Before
// all of them, a client address that has failed too many signature checks is refused
// (signature-budget.ts).
import type { FastifyRequest } from 'fastify'
import type { KeyRegistry } from '../keys/key-registry.js'
import type { Store } from '../store/index.js'
import type { TokenService } from '../tokens/token-service.js'
import { apiKeyStage } from './api-key.js'
import { bearerTokenStage } from './bearer.js'
import { keyOwnerStage } from './key-owner.js'
import { keyUsageStage } from './key-usage.js'
import { replayStage } from './replay.js'
import { signatureBudgetStage, type SignatureBudget } from './signature-budget.js'
import { signatureHeadersStage } from './signature-headers.js'
import { signatureStage } from './signature.js'
import type { AuthStage, AuthState } from './stage.js'
import { timestampStage } from './timestamp.js'

export type { AuthStage, AuthState } from './stage.js'

export interface PipelineDeps {
  tokens: TokenService
  keys: KeyRegistry
  store: Store
  now?: () => number
  /** the seconds each RSA signature verification took (the metrics) */
  observeVerification?: (seconds: number) => void
  /** failed signature checks per client address; past the budget, 429 before any check */
  signatureBudget?: SignatureBudget
}

/** `signed` routes: bearer token and API key signature. */
export function signedPipeline ({ tokens, keys, store, now, observeVerification, signatureBudget: budget }: PipelineDeps): AuthStage[] {
  const clock = now ?? Date.now
  return [
    ...(budget === undefined ? [] : [signatureBudgetStage(budget, clock)]),
    bearerTokenStage(tokens),
    signatureHeadersStage(),
    timestampStage(now),
    apiKeyStage(keys, now),
    keyOwnerStage(),
    signatureStage(observeVerification, budget && ((request) => { budget.recordFailure(request.ip, clock()) })),
    replayStage(store, now),
    keyUsageStage(keys, now)
  ]
}

/**
 * Runs, in order, the stages of one phase (before or after the body is read). Synchronously as
 * long as the stages are: a promise only once a stage returns one.
 */
export function runStages (stages: readonly AuthStage[], request: FastifyRequest, state: AuthState, from = 0): void | Promise<void> {
  for (let i = from; i < stages.length; i++) {
    const pending = (stages[i] as AuthStage).run(request, state)
    if (pending !== undefined) return pending.then(() => runStages(stages, request, state, i + 1))
  }
}
