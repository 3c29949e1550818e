// What every business request goes through around the auth pipeline, in either mode (inline: the
// proxy, http/routes/proxy.ts; decision: decision/decide.ts), over the same description of the
// request: before it, the route it belongs to and what that route refuses outright; after it, the
// route's rate limits and the identity token. One place, so a decision is the decision inline
// mode would have made.
import { pathOf, signedBodyMethodProblem } from '#client/protocol'
import type { DescribedRequest } from '../auth/described-request.js'
import { releaseReplayMark } from '../auth/replay.js'
import type { AuthState } from '../auth/stage.js'
import { GatewayError } from '../errors.js'
import type { RateLimiter } from '../limits/limiter.js'
import { toolLimited } from '../mcp-calls/tool-limits.js'
import { identityTokenFor, type IdentityTokenIssuer } from './identity.js'
import type { RouteConfig } from './route.js'
import type { RouteTable } from './route-table.js'

export const tooLarge = (limit: number): GatewayError =>
  new GatewayError('PAYLOAD_TOO_LARGE', `The request body is larger than this route accepts (${limit} bytes)`)

/**
 * The route of a request, or the error that refuses it before authentication: no route, a ";"
 * the route does not take, another spelling of a stronger route's path, a method the route does
 * not take, a body the route's method may not carry, a declared length over the route's limit.
 * `matched` hears of the route before its own refusals (an MCP route answers them as JSON-RPC).
 */
export function admit (table: RouteTable, request: DescribedRequest, matched?: (route: RouteConfig) => void): RouteConfig {
  const path = pathOf(request.target)
  const match = table.match(path, request.method)
  if (match.kind === 'not-found') throw new GatewayError('NOT_FOUND', `No route for ${request.method} ${path}`)
  // a ";" (matrix parameters) the route does not take: refused before authentication
  if (match.kind === 'invalid-target') throw new GatewayError('INVALID_TARGET', match.detail)
  // another spelling of a stronger route's path, for its backend: refused before authentication
  if (match.kind === 'alias') throw new GatewayError('PATH_ALIAS', match.detail)
  if (match.kind === 'method-not-allowed') {
    throw new GatewayError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; allowed: ${match.allow.join(', ')}`, {
      headers: { allow: match.allow.join(', ') }
    })
  }
  const { route } = match
  matched?.(route)
  // (a GET with a body was refused before: the protocol core's bodyless methods.) On a signed route
  // a DELETE or OPTIONS with one too, unless the route takes it: what a backend does with such a
  // body is its own guess, and the signature should not vouch for a guess.
  if (route.auth === 'signed' && request.declaresBody) {
    const problem = signedBodyMethodProblem(request.method, route.bodyOnMethods)
    if (problem !== undefined) throw new GatewayError('VALIDATION_FAILED', problem)
  }
  // A declared length over the limit is refused before a byte of the body is read.
  const declared = request.declaredLength
  if (declared !== undefined && declared > route.bodyLimit) throw tooLarge(route.bodyLimit)
  return route
}

/** What the route decides for the pipeline: the state it starts with. */
export function routeState (route: RouteConfig): AuthState {
  // the route's required scopes travel with the state to the scope stage, which ends the pipeline
  return {
    replay: route.replay,
    ...(route.agents !== undefined && { agents: route.agents }),
    ...(route.resource !== undefined && { resource: route.resource }),
    ...(route.dpop === 'required' && { dpopRequired: true }),
    ...(route.mcp !== undefined && { mcp: route.mcp }),
    requiredScopes: route.scopes,
    signaturePolicy: route.signature,
    signatureLabel: route.signatureLabel,
    seedBodyBoundary: route.seedBodyBoundary,
    unseenBody: route.unseenBody
  }
}

/** What an authenticated request carries on: the RateLimit fields for its answer, the identity token for its upstream. */
export interface Admitted {
  answerHeaders?: Readonly<Record<string, string | undefined>>
  identityToken?: string
}

export interface AfterAuthentication {
  limiter: RateLimiter
  identityTokens: IdentityTokenIssuer
}

/**
 * Once authenticated: count the request against the route's rate limits (only now: a forged
 * request spends nobody's quota) and make its identity token, into `out`. Refused here (a limit,
 * the identity token), the request was never let through, so its replay mark is taken back: the
 * same signed request may come again. Synchronous for routes with neither.
 */
export function limitAndIdentify (
  { limiter, identityTokens }: AfterAuthentication, route: RouteConfig, request: DescribedRequest, auth: AuthState, out: Admitted
): void | Promise<void> {
  // an MCP route's tool calls count in their tools' limits too (mcp-calls/tool-limits.ts); other routes pay one property check
  const tools = route.mcp?.toolLimits === undefined ? undefined : toolLimited(route, auth.mcpMessages)
  const limited = tools?.route ?? route
  // most routes send no identity token and have no limits: nothing more to allocate or wait for
  if (route.identityToken === undefined && limited.rateLimits.length === 0) return
  const refused = (err: unknown): never => {
    releaseReplayMark(auth)
    throw err
  }
  const identify = (): void | Promise<void> => {
    const token = identityTokenFor(identityTokens, route, auth)
    if (token !== undefined) return token.then((value) => { out.identityToken = value })
  }
  let pending: void | Promise<void>
  try {
    pending = limited.rateLimits.length === 0
      ? identify()
      : limiter.check(limited, { key: auth.key?.apiKey, user: auth.user, agent: auth.agent?.origin, address: request.ip }, tools?.costs).then((headers) => {
        out.answerHeaders = headers
        return identify()
      })
  } catch (err) {
    return refused(err)
  }
  return pending?.catch(refused)
}
