// The mutators that run after authentication: what the upstream is told about who sent the
// request. The identity headers (user, apiKey, key name, scopes; client-sent ones never get through), and
// on routes that ask for it an identity token: a short-lived JWT, signed with the gateway's token
// key (so verifiable with its JWKS), with which a backend reachable by others can check that
// keygate made the request; with a signed agent, its `agent` claim names it (on an agent route,
// which has no user, the agent's origin is the subject). Tokens are cached per identity (user,
// key, scopes and agent) and reused for
// most of their lifetime, so forwarding costs a signature only once every few minutes per user and
// key, not per request; a change of scopes makes a new one at once.
import type { IncomingHttpHeaders } from 'node:http'
import type { AuthState, VerifiedAgent } from '../auth/stage.js'
import type { ScopeSet } from '../users/scopes.js'
import { LruCache } from '../lib/lru-cache.js'
import type { TokenService } from '../tokens/token-service.js'
import type { IdentityTokenConfig, RouteConfig } from './route.js'

/** A cached token is reused until this share of its lifetime has passed. */
const REUSE_SHARE = 0.75
const CACHE_SIZE = 10_000

export interface IdentityTokenIssuer {
  /**
   * `subject`: the user, or on an agent route the agent's origin; `scopes`: what the request may do,
   * the token's `scope` claim (none when unknown or empty); `agent`: the signed agent, the `agent` claim
   */
  tokenFor: (config: IdentityTokenConfig, subject: string, apiKey: string | undefined, scopes?: ScopeSet, agent?: VerifiedAgent) => Promise<string>
}

export function createIdentityTokenIssuer (tokens: TokenService, now: () => number = Date.now): IdentityTokenIssuer {
  const cache = new LruCache<string, { token: string; reuseUntil: number }>(CACHE_SIZE)
  return {
    async tokenFor (config, subject, apiKey, scopes, agent) {
      // the scopes are part of the identity: a token must never claim scopes taken away since; and
      // so is the agent, with the key it signed with
      const scope = scopes === undefined || scopes.text === '' ? undefined : scopes.text
      const cacheKey = `${config.audience}\n${config.ttlSeconds}\n${subject}\n${apiKey ?? ''}\n${scope ?? ''}\n` +
        `${agent?.origin ?? ''}\n${agent?.thumbprint ?? ''}`
      const hit = cache.get(cacheKey)
      if (hit !== undefined && hit.reuseUntil > now()) return hit.token
      const token = await tokens.issueIdentity({
        subject,
        audience: config.audience,
        apiKey,
        ttlSeconds: config.ttlSeconds,
        scope,
        ...(agent !== undefined && { agent: { origin: agent.origin, jkt: agent.thumbprint } })
      })
      cache.set(cacheKey, { token, reuseUntil: now() + config.ttlSeconds * 1000 * REUSE_SHARE })
      return token
    }
  }
}

/**
 * The route's identity token for this identity: its user's, with the signed agent's claim when
 * there is one; on an agent route, the agent's (the subject its origin). Undefined when the route
 * sends none or neither a user nor an agent is known.
 */
export function identityTokenFor (issuer: IdentityTokenIssuer, route: RouteConfig, auth: AuthState | null): Promise<string> | undefined {
  if (route.identityToken === undefined) return undefined
  const subject = auth?.user ?? auth?.agent?.origin
  if (subject === undefined) return undefined
  return issuer.tokenFor(route.identityToken, subject, auth?.key?.apiKey, auth?.scopes, auth?.agent)
}

/** The headers that carry the gateway's word on this route: a client's copy of one is never forwarded. */
export function identityHeaderNames (route: RouteConfig): string[] {
  const names = route.identityHeaders
  return [names.user, names.key, names.keyName, names.scopes, names.agent, names.agentKey, names.dpopKey,
    ...(route.identityToken ? [route.identityToken.header] : [])]
}

/** Writes the identity headers into the upstream request's headers: last, so they win. */
export function writeIdentity (out: IncomingHttpHeaders, route: RouteConfig, auth: AuthState | null, identityToken: string | undefined): void {
  const names = route.identityHeaders
  if (auth?.user !== undefined) out[names.user] = auth.user
  if (auth?.key !== undefined) {
    out[names.key] = auth.key.apiKey
    out[names.keyName] = auth.key.name
  }
  // Sent even when empty ("no scopes"); absent only on public routes, or when the store was away
  // and the user's scopes unknown (auth/scope.ts).
  if (auth?.scopes !== undefined) out[names.scopes] = auth.scopes.text
  // a signed agent (Web Bot Auth): its directory's origin and its key's thumbprint
  if (auth?.agent !== undefined) {
    out[names.agent] = auth.agent.origin
    out[names.agentKey] = auth.agent.thumbprint
  }
  // a DPoP-bound token (RFC 9449): the thumbprint of the key its proof was signed by; the proof itself is never forwarded
  if (auth?.dpopKey !== undefined) out[names.dpopKey] = auth.dpopKey
  if (identityToken !== undefined && route.identityToken !== undefined) out[route.identityToken.header] = identityToken
}
