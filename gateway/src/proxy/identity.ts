// The mutators that run after authentication: what the upstream is told about who sent the
// request. The identity headers (user, apiKey, key name; client-sent ones never get through), and
// on routes that ask for it an identity token: a short-lived JWT, signed with the gateway's token
// key (so verifiable with its JWKS), with which a backend reachable by others can check that
// keygate made the request. Tokens are cached per identity and reused for most of their lifetime,
// so forwarding costs a signature only once every few minutes per user and key, not per request.
import type { IncomingHttpHeaders } from 'node:http'
import type { AuthState } from '../auth/stage.js'
import { LruCache } from '../lib/lru-cache.js'
import type { TokenService } from '../tokens/token-service.js'
import type { IdentityTokenConfig, RouteConfig } from './route.js'

/** A cached token is reused until this share of its lifetime has passed. */
const REUSE_SHARE = 0.75
const CACHE_SIZE = 10_000

export interface IdentityTokenIssuer {
  tokenFor: (config: IdentityTokenConfig, user: string, apiKey: string | undefined) => Promise<string>
}

export function createIdentityTokenIssuer (tokens: TokenService, now: () => number = Date.now): IdentityTokenIssuer {
  const cache = new LruCache<string, { token: string; reuseUntil: number }>(CACHE_SIZE)
  return {
    async tokenFor (config, user, apiKey) {
      const cacheKey = `${config.audience}\n${config.ttlSeconds}\n${user}\n${apiKey ?? ''}`
      const hit = cache.get(cacheKey)
      if (hit !== undefined && hit.reuseUntil > now()) return hit.token
      const token = await tokens.issueIdentity({ subject: user, audience: config.audience, apiKey, ttlSeconds: config.ttlSeconds })
      cache.set(cacheKey, { token, reuseUntil: now() + config.ttlSeconds * 1000 * REUSE_SHARE })
      return token
    }
  }
}

/** The route's identity token for this identity; undefined when the route sends none or no user is known. */
export function identityTokenFor (issuer: IdentityTokenIssuer, route: RouteConfig, auth: AuthState | null): Promise<string> | undefined {
  if (route.identityToken === undefined || auth?.user === undefined) return undefined
  return issuer.tokenFor(route.identityToken, auth.user, auth.key?.apiKey)
}

/** The headers that carry the gateway's word on this route: a client's copy of one is never forwarded. */
export function identityHeaderNames (route: RouteConfig): string[] {
  const names = route.identityHeaders
  return [names.user, names.key, names.keyName, ...(route.identityToken ? [route.identityToken.header] : [])]
}

/** Writes the identity headers into the upstream request's headers: last, so they win. */
export function writeIdentity (out: IncomingHttpHeaders, route: RouteConfig, auth: AuthState | null, identityToken: string | undefined): void {
  const names = route.identityHeaders
  if (auth?.user !== undefined) out[names.user] = auth.user
  if (auth?.key !== undefined) {
    out[names.key] = auth.key.apiKey
    out[names.keyName] = auth.key.name
  }
  if (identityToken !== undefined && route.identityToken !== undefined) out[route.identityToken.header] = identityToken
}
