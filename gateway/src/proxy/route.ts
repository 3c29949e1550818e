// The route model: what a route file entry becomes once checked, and the routes keygate serves
// without a route file. Plain data, read by the route table, the proxy and the docs.
import { HTTP_METHODS } from '#client/protocol'
import type { AgentAllowance, AuthTier, ReplayPolicy, SeedBodyBoundary, SignatureSchemePolicy, UnseenBodyPolicy } from '../auth/stage.js'
import type { RouteDefaults } from '../config/env.js'
import type { McpPolicy } from '../mcp-calls/policy.js'
import type { ProtectedResource } from '../resources/resource.js'
import { DEFAULT_STORE_DOWN_POLICY, type RateLimit, type StoreDownPolicy } from '../limits/rate-limit.js'
import { PATH_NORMALISATIONS, type PathNormalisation } from './backend-paths.js'

export { AUTH_TIERS, type AuthTier } from '../auth/stage.js'

/** The names of the identity headers sent upstream (x-gateway-user, -key, -key-name, -scopes, -agent, -agent-key by default). */
export interface IdentityHeaderNames {
  user: string
  key: string
  keyName: string
  /** what the request may do: its scopes, space-separated */
  scopes: string
  /** a signed agent's directory origin (Web Bot Auth) */
  agent: string
  /** a signed agent's key: its JWK thumbprint */
  agentKey: string
  /** a DPoP-bound token's key (RFC 9449): the thumbprint the request's proof was signed by */
  dpopKey: string
}
export const DEFAULT_IDENTITY_HEADERS: IdentityHeaderNames = {
  user: 'x-gateway-user',
  key: 'x-gateway-key',
  keyName: 'x-gateway-key-name',
  scopes: 'x-gateway-scopes',
  agent: 'x-gateway-agent',
  agentKey: 'x-gateway-agent-key',
  dpopKey: 'x-gateway-dpop-jkt'
}

export interface IdentityTokenConfig {
  /** the header that carries the token upstream */
  header: string
  ttlSeconds: number
  /** the token's `aud`: by default the upstream's origin */
  audience: string
}

/** A business route: requests it matches are authenticated per `auth` and forwarded to `upstream`. */
export interface RouteConfig {
  /** how errors and logs name it: its `name`, or `routes[i]` */
  name: string
  /** a prefix ("/v1/clients/") or, when `exact`, one exact path */
  prefix: string
  exact: boolean
  upstream: string
  auth: AuthTier
  /**
   * the signed agents (Web Bot Auth) the route lets in: any whose signature verifies, or those of
   * these directory origins. Required of an agent route; on a bearer or signed route, the request
   * must come from such an agent too (a user's agent). Undefined: no agent asked for
   */
  agents: AgentAllowance | undefined
  methods: string[]
  /** replaces the matched prefix (or the exact path) in the forwarded target */
  rewrite: string | undefined
  bodyLimit: number
  timeoutMs: number
  identityHeaders: IdentityHeaderNames
  /** set on the forwarded request (after removals; the identity headers are written last) */
  addHeaders: Record<string, string>
  /** removed from the forwarded request (lower-case names) */
  removeHeaders: string[]
  identityToken: IdentityTokenConfig | undefined
  /** signed routes: refuse (default) or allow a repeat of an accepted signed POST, PUT, PATCH, DELETE */
  replay: ReplayPolicy
  /** signed routes: the signature schemes taken: seed (X-API-*), rfc9421 (Signature-Input, Signature) or any (default) */
  signature: SignatureSchemePolicy
  /** signed routes taking RFC 9421: the label of the signature verified; undefined: the first whose keyid is a registered key */
  signatureLabel: string | undefined
  /**
   * signed routes taking the seed scheme: refuse (enforced, the default) a body that starts with a
   * byte a target may hold, which one signature could split another way (auth/seed-body.ts)
   */
  seedBodyBoundary: SeedBodyBoundary
  /**
   * signed routes, decision mode behind a proxy that sends keygate no body (nginx, Caddy): refuse
   * a request with a body (the default), or let one pass whose RFC 9421 signature covers its
   * Content-Digest, telling the upstream to check the digest (`digest`; docs/decision-mode.md)
   */
  unseenBody: UnseenBodyPolicy
  /** signed routes: DELETE and OPTIONS requests that may carry a body; refused with one otherwise (400 VALIDATION_FAILED) */
  bodyOnMethods: string[]
  /** take paths with ";" (matrix parameters) below the prefix; refused (400 INVALID_TARGET) otherwise */
  allowMatrixParams: boolean
  /** headers that change a request's meaning (upstream-request.ts) forwarded on this route anyway (lower-case names) */
  keepHeaders: string[]
  /** counted after authentication, before forwarding; every one applies (limits/limiter.ts). Empty: no limits, no cost */
  rateLimits: readonly RateLimit[]
  /** with rateLimits, when the store cannot be reached: forward uncounted (allow) or 503 (deny) */
  onStoreDown: StoreDownPolicy
  /** signed and bearer routes: the scopes a request must have, all of them (403 INSUFFICIENT_SCOPE otherwise) */
  scopes: string[]
  /**
   * how the upstream reads this route's paths (backend-paths.ts): a weaker route on the same
   * upstream is refused (400 PATH_ALIAS) a path that reads so as one of this route's. Default: all
   */
  backendNormalises: PathNormalisation[]
  /**
   * tokens on this route: `required`, each must be DPoP-bound and sent with a proof (RFC 9449);
   * `allowed` (the default), a bound token needs its proof, a bearer token passes as one (docs/dpop.md)
   */
  dpop: DpopPolicy
  /** the protected resource (RFC 9728) the route belongs to: its challenges point at its metadata, IdP tokens must be for it */
  resource?: ProtectedResource
  /** an MCP route (docs/mcp.md): the body read as JSON-RPC, each message authorized, the Origin checked (auth/mcp.ts), sessions bound (mcp/sessions.ts) */
  mcp?: McpPolicy
}

/** What a route asks of tokens: DPoP for every one, or for bound ones only (route files' and resources' `dpop`). */
export type DpopPolicy = 'required' | 'allowed'
export const DPOP_POLICIES: readonly DpopPolicy[] = ['allowed', 'required']

export const TIER_RANK: Record<AuthTier, number> = { public: 0, agent: 1, bearer: 1, signed: 2 }

/**
 * Whether `strong` asks more of a request than `weak`: a higher tier (public < bearer < signed),
 * or the same tier (not public) with every scope `weak` requires and more. What a weaker route
 * must never reach of a stronger one's; other settings (limits, replay) do not rank routes.
 */
export function asksMoreThan (strong: RouteConfig, weak: RouteConfig): boolean {
  if (TIER_RANK[strong.auth] !== TIER_RANK[weak.auth]) return TIER_RANK[strong.auth] > TIER_RANK[weak.auth]
  return strong.scopes.length > weak.scopes.length && weak.scopes.every((scope) => strong.scopes.includes(scope))
}

/**
 * A route as it is shown outside the process (the admin API's routes, `keygate routes check
 * --json`): every field, but the values of addHeaders, which may be credentials.
 */
export function routeView (route: RouteConfig): RouteConfig {
  return { ...route, addHeaders: Object.fromEntries(Object.keys(route.addHeaders).map((name) => [name, '***'])) }
}

/** A route with every optional setting at its default. */
export function route (
  fields: Pick<RouteConfig, 'prefix' | 'upstream' | 'auth'> & Partial<RouteConfig>,
  defaults: Omit<RouteDefaults, 'upstream'>
): RouteConfig {
  return {
    name: fields.prefix,
    exact: false,
    agents: undefined,
    methods: [...HTTP_METHODS],
    rewrite: undefined,
    bodyLimit: defaults.bodyLimit,
    timeoutMs: defaults.timeoutMs,
    identityHeaders: DEFAULT_IDENTITY_HEADERS,
    addHeaders: {},
    removeHeaders: [],
    identityToken: undefined,
    replay: 'reject',
    signature: 'any',
    signatureLabel: undefined,
    seedBodyBoundary: 'enforced',
    unseenBody: 'refuse',
    bodyOnMethods: [],
    allowMatrixParams: false,
    keepHeaders: [],
    rateLimits: [],
    onStoreDown: DEFAULT_STORE_DOWN_POLICY,
    scopes: [],
    backendNormalises: [...PATH_NORMALISATIONS],
    dpop: 'allowed',
    ...fields
  }
}

/** Without a route file: the business routes of the interface (clients, transactions), signed, to the example service. */
export function defaultRoutes (defaults: RouteDefaults): RouteConfig[] {
  return [
    route({ prefix: '/v1/clients/', upstream: defaults.upstream, auth: 'signed', methods: ['GET', 'POST'] }, defaults),
    route({ prefix: '/v1/transactions/', upstream: defaults.upstream, auth: 'signed', methods: ['GET', 'POST'] }, defaults)
  ]
}
