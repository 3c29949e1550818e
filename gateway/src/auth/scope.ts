import { GatewayError } from '../errors.js'
import type { RegisteredKey } from '../keys/key-registry.js'
import { intersectScopes, missingScopes, type ScopeSet } from '../users/scopes.js'
import type { UserScopes } from '../users/user-scopes.js'
import { required, type AuthStage, type AuthState } from './stage.js'

/**
 * Authorisation, once the request is authenticated: what it may do (`state.scopes`, which the
 * upstream is told) and whether that covers every scope the route requires (403
 * INSUFFICIENT_SCOPE naming the missing ones otherwise, before anything is forwarded). A signed
 * request may do what its key may and its user still may (taking a scope from a user takes it from
 * all their keys at once); a bearer request what its user may. The user's scopes come from an
 * in-process cache (users/user-scopes.ts): no promise and no allocation for a cached user.
 */
export function scopeStage (userScopes: UserScopes, options: { needsBody: boolean }): AuthStage {
  // A key's scopes intersected with its user's, per key and user set: a scope set is made once.
  const effective = new WeakMap<RegisteredKey, { user: ScopeSet; scopes: ScopeSet }>()
  const decide = (state: AuthState, user: ScopeSet): void => {
    const key = state.key
    let scopes = user
    if (key?.scopes !== undefined) {
      const known = effective.get(key)
      if (known?.user === user) scopes = known.scopes
      else effective.set(key, { user, scopes: scopes = intersectScopes(key.scopes, user) })
    }
    state.scopes = scopes
    const wanted = state.requiredScopes
    if (wanted === undefined || wanted.length === 0) return
    const missing = missingScopes(wanted, scopes.set)
    if (missing.length > 0) throw insufficientScope(wanted, missing, key, user)
  }
  return {
    name: 'scope',
    needsBody: options.needsBody,
    run (_request, state) {
      // the bearer stage read the user already (same request, same cache): no second lookup
      const user = state.account?.scopes ?? userScopes.of(required(state.user, 'the user', 'scope'))
      if (!(user instanceof Promise)) return decide(state, user)
      return user.then((scopes) => { decide(state, scopes) })
    }
  }
}

/** 403 INSUFFICIENT_SCOPE: `what` (the route, or an MCP tool on it) requires `wanted`, of which `missing` lacks. */
export function insufficientScope (wanted: readonly string[], missing: string[], key: RegisteredKey | undefined, user: ScopeSet,
  what = 'This route'): GatewayError {
  // Whose the gap is says what to do about it: a user never granted the scope, or a key registered without it.
  const userLacks = missing.filter((scope) => !user.set.has(scope))
  const keyLacks = missing.filter((scope) => user.set.has(scope))
  const why = [
    ...(userLacks.length > 0 ? [`your user does not have ${userLacks.join(', ')} (an operator grants scopes)`] : []),
    ...(key !== undefined && keyLacks.length > 0
      ? [`this API key was registered without ${keyLacks.join(', ')}; register a key with ${keyLacks.length === 1 ? 'it' : 'them'} ` +
          '(GET /v1/api-keys shows each key\'s scopes)']
      : [])
  ].join('; ')
  return new GatewayError('INSUFFICIENT_SCOPE', `${what} requires the scope${wanted.length === 1 ? '' : 's'} ${wanted.join(', ')}; ${why}`, {
    extra: { requiredScopes: [...wanted], missingScopes: missing },
    // RFC 6750's answer to a token without the scope a resource needs
    headers: { 'www-authenticate': `Bearer realm="keygate", error="insufficient_scope", scope="${wanted.join(' ')}"` }
  })
}
