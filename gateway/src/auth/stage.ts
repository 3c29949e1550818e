// The shape every stage of the business auth pipeline shares. A stage reads the request (as
// described-request.ts describes it, in either mode) and what
// earlier stages established (`AuthState`), adds to it, or throws a GatewayError that denies the
// request. Stages that do not need the body run before it is read (onRequest), so a request that
// fails a cheap check is refused before the gateway buffers its body.
import type { RegisteredKey } from '../keys/key-registry.js'
import type { AgentKey } from '../agents/agent-directories.js'
import type { SignatureAgent } from '../agents/signature-agent.js'
import type { IssuerConfig } from '../idp/issuers.js'
import type { McpMessage } from '../mcp-calls/messages.js'
import type { McpPolicy } from '../mcp-calls/policy.js'
import type { ProtectedResource } from '../resources/resource.js'
import type { DpopVerifier } from '../dpop/proof.js'
import type { RememberedMark } from '../store/index.js'
import type { VerifiedToken } from '../tokens/token-service.js'
import type { ScopeSet } from '../users/scopes.js'
import type { CurrentUser } from '../users/user-scopes.js'
import type { ComponentId, Parameters, SeedBodyBoundary } from '#client/protocol'
import type { DescribedRequest } from './described-request.js'

export interface SignatureHeaders {
  apiKey: string
  timestamp: string
  signature: string
}

/** RFC 9421: one signature of a request, its Signature-Input member and its Signature bytes (message-signature-headers.ts). */
export interface MessageSignatureInput {
  label: string
  /** the covered components, in order */
  components: ComponentId[]
  /** the signature parameters, in the order received (they are part of the signature base) */
  params: Parameters
  /** the @signature-params value: the inner list and its parameters, serialised again */
  signatureParams: string
  keyid: string
  alg: string | undefined
  /** seconds since the epoch */
  created: number | undefined
  expires: number | undefined
  nonce: string | undefined
  signature: Buffer
}

/** Which signed agents a route lets in: any whose signature verifies, or those of these directory origins (agent-signature.ts). */
export type AgentAllowance = 'any' | ReadonlySet<string>

/** The agent a request was verified as: what the upstream is told, and what limits and usage count by. */
export interface VerifiedAgent {
  /** the directory's origin, https://host[:port] */
  origin: string
  /** the key's RFC 7638 thumbprint: the signature's keyid */
  thumbprint: string
  /** an operator pinned the directory (its keys from the agents file) */
  pinned: boolean
}

/** What the agent stages pass along: the signature chosen, its agent, then its key. */
export interface AgentSignatureState {
  input: MessageSignatureInput
  agent: SignatureAgent | undefined
  /** the route's agents list names this agent (not `any`): its directory never waits behind unknown ones */
  routeNamesAgent?: boolean
  key?: AgentKey
}

export type ReplayPolicy = 'reject' | 'allow'

/** How a request on a signed route is signed: the seed's X-API-* headers, or RFC 9421 (Signature-Input, Signature). */
export type SignatureScheme = 'seed' | 'rfc9421'
/** The schemes a signed route takes (its `signature` option): one of them, or either (`any`, the default). */
export type SignatureSchemePolicy = SignatureScheme | 'any'
export const SIGNATURE_SCHEME_POLICIES: readonly SignatureSchemePolicy[] = ['any', 'seed', 'rfc9421']

// A signed route's seed body rule (seed-body.ts): the protocol core's, which the client checks too.
export { SEED_BODY_BOUNDARIES, type SeedBodyBoundary } from '#client/protocol'

/**
 * What a signed route does in decision mode with a body keygate is not shown (nginx, Caddy):
 * refuse it (the default), or allow it when an RFC 9421 signature covers its Content-Digest, which
 * the upstream is then told to check (`digest`).
 */
export type UnseenBodyPolicy = 'refuse' | 'digest'
export const UNSEEN_BODY_POLICIES: readonly UnseenBodyPolicy[] = ['refuse', 'digest']

/** How much a route asks of a request: a signature and a token, a token, a signed agent's signature (Web Bot Auth), or nothing. */
export type AuthTier = 'signed' | 'bearer' | 'agent' | 'public'
export const AUTH_TIERS: readonly AuthTier[] = ['signed', 'bearer', 'agent', 'public']

export interface AuthState {
  /** what the route wants done with a repeated signed POST, PUT, PATCH or DELETE */
  replay?: ReplayPolicy
  /** the protected resource the route belongs to: an IdP token must be for it (resources/audience.ts) */
  resource?: ProtectedResource
  /** the route (or its resource) requires every token to be DPoP-bound (auth/dpop.ts) */
  dpopRequired?: boolean
  /** a token route's DPoP verifier: its algorithms name the DPoP challenge (resources/challenge.ts) */
  dpop?: DpopVerifier
  /** the Authorization scheme the token came with: Bearer or DPoP (bearer.ts) */
  tokenScheme?: 'bearer' | 'dpop'
  /** the thumbprint of the key whose DPoP proof bound the token to this request (the identity header) */
  dpopKey?: string
  /** the bearer token's subject */
  user?: string
  /** the identity provider whose token the request carries (its names for scopes say what a client asks it for) */
  idpIssuer?: IssuerConfig
  /** the bearer token, verified and still acting for its user (bearer.ts) */
  bearer?: VerifiedToken
  /** that user as the bearer stage found it (its scopes: scope.ts) */
  account?: CurrentUser
  signatureHeaders?: SignatureHeaders
  /** signed routes: the schemes the route takes (default any) */
  signaturePolicy?: SignatureSchemePolicy
  /** signed routes: the label of the RFC 9421 signature to verify (default: the first that names a registered key) */
  signatureLabel?: string
  /** signed routes: whether a body the judge did not see may pass on a verified digest (default refuse) */
  unseenBody?: UnseenBodyPolicy
  /** signed routes: the seed scheme's body rule (default enforced) */
  seedBodyBoundary?: SeedBodyBoundary
  /** the scheme the request is signed with (scheme.ts) */
  scheme?: SignatureScheme
  /** RFC 9421: the signatures that may be verified, in order (message-signature-headers.ts) */
  messageSignatures?: readonly MessageSignatureInput[]
  /** RFC 9421: the one chosen, whose keyid is the registered key (key-id.ts) */
  messageSignature?: MessageSignatureInput
  /**
   * the replay check's mark of this request: taken back when keygate refuses the request after it
   * (a rate limit, a full upstream queue), so that the refused request stays retryable
   */
  replayMark?: RememberedMark
  /** the agent signature's mark (agent-signature.ts), taken back with the replay mark */
  agentReplayMark?: RememberedMark
  /** what identifies the request to the replay check when not the seed's X-API-Signature (RFC 9421: the signature base) */
  replayId?: string
  timestampMs?: number
  key?: RegisteredKey
  /**
   * RFC 9421, a body the judge did not see (decision mode behind nginx or Caddy, on a route whose
   * `unseenBody` is `digest`): the Content-Digest the verified signature covers, which the upstream
   * must check against the bytes it receives
   */
  deferredDigest?: string
  /** agent routes: which signed agents the route lets in (agent-signature.ts) */
  agents?: AgentAllowance
  /** the agent's signature, its agent and its key, as the agent stages find them */
  agentSignature?: AgentSignatureState
  /** the signed agent the request was verified as (Web Bot Auth) */
  agent?: VerifiedAgent
  /** the scopes the route requires, all of them (the scope stage refuses a request without one) */
  requiredScopes?: readonly string[]
  /** what the request may do: the key's scopes its user still has, or the bearer's user's (scope.ts) */
  scopes?: ScopeSet
  /** an MCP route's policy (auth/mcp.ts): its body is read as JSON-RPC, each message authorized */
  mcp?: McpPolicy
  /** the messages of its body, read once (mcp-calls/messages.ts) */
  mcpMessages?: readonly McpMessage[]
  /** the id of its one request, once known: a refusal carries it */
  mcpId?: string | number
}

export interface AuthStage {
  readonly name: string
  /** true: runs after the body is buffered (preHandler); false: before (onRequest) */
  readonly needsBody: boolean
  run: (request: DescribedRequest, state: AuthState) => void | Promise<void>
}

/** The state a stage depends on; a missing piece is a pipeline-order bug, not a client error. */
export function required<T> (value: T | undefined, what: string, stage: string): T {
  if (value === undefined) throw new Error(`auth stage ${stage} needs ${what}; check the pipeline order`)
  return value
}
