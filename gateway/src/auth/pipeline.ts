// The business auth pipeline, in order, on one screen. Cheap checks first: nothing here touches
// the store before the token and headers are sound, and the signature verification (either
// scheme's, any key type's) runs last of the checks of who sent the request; then what it may do (scope.ts). Before all of them, a client
// address that has failed too many signature checks is refused (signature-budget.ts).
import type { AgentDirectories } from '../agents/agent-directories.js'
import { createDpopVerifier, DEFAULT_DPOP_SETTINGS, type DpopVerifier } from '../dpop/proof.js'
import type { KeyRegistry } from '../keys/key-registry.js'
import type { Store } from '../store/index.js'
import type { TokenService } from '../tokens/token-service.js'
import type { UserScopes } from '../users/user-scopes.js'
import { agentKeyStage, agentSignatureHeadersStage, agentVerificationStage } from './agent-signature.js'
import { apiKeyStage } from './api-key.js'
import { bearerTokenStage, type IdpTokens } from './bearer.js'
import { dpopOfferStage, dpopStage } from './dpop.js'
import { keyIdStage } from './key-id.js'
import { mcpMessageStage, mcpPolicyStage, mcpRequestStage } from './mcp.js'
import { keyOwnerStage } from './key-owner.js'
import { keyUsageStage } from './key-usage.js'
import { messageSignatureStage } from './message-signature.js'
import { messageSignatureHeadersStage } from './message-signature-headers.js'
import { replayStage } from './replay.js'
import { onlyFor, perScheme, signatureSchemeStage } from './scheme.js'
import { scopeStage } from './scope.js'
import { seedBodyStage } from './seed-body.js'
import { attackedKeyStage, signatureBudgetStage, type SignatureBudget } from './signature-budget.js'
import { signatureHeadersStage } from './signature-headers.js'
import { signatureStage } from './signature.js'
import type { DescribedRequest } from './described-request.js'
import type { AuthStage, AuthState } from './stage.js'
import { createdStage, timestampStage } from './timestamp.js'

export type { AuthStage, AuthState } from './stage.js'

export interface PipelineDeps {
  tokens: TokenService
  keys: KeyRegistry
  store: Store
  /** each user's current scopes (the scope stage) */
  userScopes: UserScopes
  now?: () => number
  /** the seconds each signature verification took (the metrics) */
  observeVerification?: (seconds: number) => void
  /** failed signature checks per client address; past the budget, 429 before any check */
  signatureBudget?: SignatureBudget
  /** trusted identity providers' tokens, accepted beside keygate's own (none configured: undefined) */
  idp?: IdpTokens | undefined
  /** signed agents' key directories (Web Bot Auth): agent routes, and bearer and signed routes that name agents */
  agents?: AgentDirectories | undefined
  /** DPoP proofs (RFC 9449) of bound tokens; default: the default settings over `store` */
  dpop?: DpopVerifier | undefined
}

/** The token's stages: the DPoP offer (for challenges), the token, then its DPoP proof (auth/dpop.ts). */
type TokenDeps = Pick<PipelineDeps, 'tokens' | 'userScopes' | 'idp' | 'store' | 'now' | 'dpop'>

function tokenStages ({ tokens, userScopes, idp, store, now, dpop }: TokenDeps): AuthStage[] {
  const verifier = dpop ?? createDpopVerifier(DEFAULT_DPOP_SETTINGS, store, now)
  return [dpopOfferStage(verifier), bearerTokenStage(tokens, userScopes, idp), dpopStage(verifier)]
}

/**
 * A signed agent's stages (agent-signature.ts): its signature and agent, its key, then the
 * signature verified and spent. On a bearer or signed route they run only when the route names
 * agents (its `agents`); on an agent route, always.
 */
function agentStages ({ agents, store, now, signatureBudget: budget }: PipelineDeps, always: boolean): AuthStage[] {
  if (agents === undefined) return []
  const clock = now ?? Date.now
  const onFailure = budget && ((request: DescribedRequest, state: AuthState): void => {
    budget.recordFailure(request.ip, clock(), state.agentSignature?.key?.key.thumbprint)
  })
  const stages = [
    agentSignatureHeadersStage((state) => state.agents ?? 'any', now),
    agentKeyStage(agents),
    ...(budget === undefined ? [] : [attackedKeyStage(budget, (state) => state.agentSignature?.key?.key.thumbprint, clock)]),
    agentVerificationStage(store, now, onFailure)
  ]
  return always ? stages : stages.map(whenAgentsNamed)
}

/** The stage, on a route that names agents only. */
function whenAgentsNamed (stage: AuthStage): AuthStage {
  return { name: stage.name, needsBody: stage.needsBody, run: (request, state) => state.agents === undefined ? undefined : stage.run(request, state) }
}

/** `agent` routes: a signed agent's signature alone (Web Bot Auth), no user. */
export function agentPipeline (deps: PipelineDeps): AuthStage[] {
  const clock = deps.now ?? Date.now
  return [
    mcpRequestStage(),
    ...(deps.signatureBudget === undefined ? [] : [signatureBudgetStage(deps.signatureBudget, clock)]),
    mcpMessageStage(),
    ...agentStages(deps, true),
    mcpPolicyStage()
  ]
}

/** `public` routes ask nothing of a request; an MCP route's checks still apply (auth/mcp.ts). */
export function publicPipeline (): AuthStage[] {
  return [mcpRequestStage(), mcpMessageStage(), mcpPolicyStage()]
}

/** `signed` routes: bearer token and API key signature. */
export function signedPipeline (deps: PipelineDeps): AuthStage[] {
  const { keys, store, now, observeVerification, signatureBudget: budget, userScopes } = deps
  const clock = now ?? Date.now
  const onFailure = budget && ((request: DescribedRequest, state: AuthState): void => { budget.recordFailure(request.ip, clock(), state.key?.apiKey) })
  return [
    // an MCP route's Origin and content type: before any credential is looked at (auth/mcp.ts)
    mcpRequestStage(),
    ...(budget === undefined ? [] : [signatureBudgetStage(budget, clock)]),
    // the token, and a bound token's DPoP proof (auth/dpop.ts)
    ...tokenStages(deps),
    // the seed's X-API-* headers, or RFC 9421's Signature-Input and Signature (scheme.ts)
    signatureSchemeStage(),
    perScheme({ seed: signatureHeadersStage(), rfc9421: messageSignatureHeadersStage() }),
    onlyFor('seed', timestampStage(now)),
    perScheme({ seed: apiKeyStage(keys, now), rfc9421: keyIdStage(keys, now) }),
    // RFC 9421: `created` of the signature whose keyid is registered (known only now)
    onlyFor('rfc9421', createdStage(now)),
    keyOwnerStage(),
    // a key under attack from many addresses: an address that has failed on it is refused before any verification
    ...(budget === undefined ? [] : [attackedKeyStage(budget, (state) => state.key?.apiKey, clock)]),
    // the first stage once the body is read: a seed-signed body that could be the target's end is
    // refused before any verification (seed-body.ts)
    onlyFor('seed', seedBodyStage()),
    // an MCP route's messages, read once, before any verification
    mcpMessageStage(),
    perScheme({
      seed: signatureStage(observeVerification, onFailure),
      rfc9421: messageSignatureStage(observeVerification, onFailure)
    }),
    // authenticated: now what it may do. Before the replay mark and the key's use are recorded, so
    // a refused request spends neither (signed again once the scope is granted, it passes).
    scopeStage(userScopes, { needsBody: true }),
    // an MCP route: each message's tool, resource, prompt or method within those scopes
    mcpPolicyStage(),
    replayStage(store, now),
    keyUsageStage(keys, now),
    // a user's agent: the route names agents, and the request is signed by one too
    ...agentStages(deps, false)
  ]
}

/** `bearer` routes (and keygate's key routes): the token, then what its user may do. */
export function bearerPipeline (deps: TokenDeps & Pick<PipelineDeps, 'agents' | 'signatureBudget'>): AuthStage[] {
  const { userScopes } = deps
  return [
    mcpRequestStage(),
    ...tokenStages(deps),
    scopeStage(userScopes, { needsBody: false }),
    mcpMessageStage(),
    mcpPolicyStage(),
    ...agentStages(deps as PipelineDeps, false)
  ]
}

/**
 * Runs, in order, the stages of one phase (before or after the body is read). Synchronously as
 * long as the stages are: a promise only once a stage returns one.
 */
export function runStages (stages: readonly AuthStage[], request: DescribedRequest, state: AuthState, from = 0): void | Promise<void> {
  for (let i = from; i < stages.length; i++) {
    const pending = (stages[i] as AuthStage).run(request, state)
    if (pending !== undefined) return pending.then(() => runStages(stages, request, state, i + 1))
  }
}
