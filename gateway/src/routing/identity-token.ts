// A short-lived JWT, signed with the gateway's token key (so verifiable with its JWKS), that a
// route can send upstream so a backend reachable by others can check that keygate made the
// request. Tokens are cached per identity and reused for most of their lifetime, so forwarding
// costs a signature only once every few minutes per user and key, not once per request.
import type { IdentityTokenConfig } from '../config.js'
import { LruCache } from '../keys/lru-cache.js'
import type { TokenService } from '../tokens/token-service.js'

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
