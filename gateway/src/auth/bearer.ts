import { GatewayError } from '../errors.js'
import { mappedScopes, type IdpToken, type IdpVerifier } from '../idp/idp-tokens.js'
import { checkAudience } from '../resources/audience.js'
import type { ProtectedResource } from '../resources/resource.js'
import { invalidTokenError, type TokenService, type VerifiedToken } from '../tokens/token-service.js'
import { removedIdpUserError } from '../users/idp-users.js'
import { scopeSet, unionScopes } from '../users/scopes.js'
import type { CurrentUser, UserScopes } from '../users/user-scopes.js'
import type { AuthStage, AuthState } from './stage.js'

/** What a request with a bearer token may be refused with, before anything else of its own: a missing or bad token, or an IdP's keys missing. */
export const BEARER_PROBLEMS = ['MISSING_TOKEN', 'INVALID_TOKEN', 'UNKNOWN_SIGNING_KEY', 'IDP_KEYS_UNAVAILABLE',
  'DPOP_REQUIRED', 'INVALID_DPOP_PROOF', 'USE_DPOP_NONCE'] as const

/** The tokens of trusted identity providers (idp/), beside keygate's own: how they are checked, and their users made. */
export interface IdpTokens {
  verifier: IdpVerifier
  /** the keygate user a verified token stands for, made on first use (users/user-service.ts provisionIdpUser) */
  provision: (username: string, issuedAt: number) => Promise<unknown>
}

/**
 * Authorization: Bearer <jwt> -> the user (the token's subject), as long as the token still acts
 * for that user: the same incarnation (not a user removed and created again under the name) and
 * the same password. Both are compared with the user as the in-process cache holds it
 * (users/user-scopes.ts, kept fresh by the store's events): a token and a user seen before cost
 * no store command and no promise.
 */
export function bearerTokenStage (tokens: TokenService, users: Pick<UserScopes, 'current' | 'forget'>, idp?: IdpTokens): AuthStage {
  const idpUsers = idp === undefined ? undefined : idpUserState(users, idp)
  return {
    name: 'bearer',
    needsBody: false,
    run (request, state) {
      const raw = bearerToken(request.headers.authorization, state)
      // an identity provider's token: verified before, or its `iss` names a trusted issuer (keygate's own never does)
      const known = idp?.verifier.cached(raw)
      if (known !== undefined && idpUsers !== undefined) return idpUsers(known, state)
      const issuer = idp?.verifier.issuerOf(raw)
      if (issuer !== undefined && idp !== undefined && idpUsers !== undefined) {
        const verified = idp.verifier.verify(raw, issuer)
        if (verified instanceof Promise) return verified.then((token) => idpUsers(token, state))
        return idpUsers(verified, state)
      }
      const token = tokens.check(raw)
      if (token instanceof Promise) return token.then((verified) => actsFor(users, verified, state))
      return actsFor(users, token, state)
    }
  }
}

/**
 * An IdP token's user: found (a cached user costs no store command and no promise), else made on
 * first use. The request may do what the token's scopes (mapped by its issuer, or by the route's
 * resource when it has a map of its own) and an operator's grants to the user in keygate allow
 * together. What a request reads is made once per token, user and resource, not per request.
 */
function idpUserState (users: Pick<UserScopes, 'current' | 'forget'>, idp: IdpTokens) {
  const made = new WeakMap<IdpToken, { user: CurrentUser, resource: ProtectedResource | undefined, account: CurrentUser, bearer: VerifiedToken }>()
  const accept = (token: IdpToken, user: CurrentUser, state: AuthState): void => {
    if (user.idpRemovedAtSeconds !== undefined && token.issuedAt <= user.idpRemovedAtSeconds) throw removedIdpUserError(token.username)
    let known = made.get(token)
    const resource = state.resource
    if (known?.user !== user || known.resource !== resource) {
      const tokenScopes = resource?.scopeMap === undefined ? token.scopes : mappedScopes(resource.scopeMap, token.idpScopes)
      const scopes = tokenScopes.length === 0 ? user.scopes : unionScopes(user.scopes, scopeSet(tokenScopes))
      known = {
        user,
        resource,
        account: { ...user, scopes },
        // as a keygate token of this user's incarnation would say: a key registered with it is this incarnation's
        bearer: {
          subject: token.username,
          userId: user.id,
          credential: user.credential,
          issuedAt: token.issuedAt,
          ...(token.boundKey !== undefined && { boundKey: token.boundKey })
        }
      }
      made.set(token, known)
    }
    state.user = token.username
    state.bearer = known.bearer
    state.account = known.account
  }
  const provisioned = async (token: IdpToken, state: AuthState): Promise<void> => {
    await idp.provision(token.username, token.issuedAt)
    users.forget(token.username)
    const user = await users.current(token.username)
    if (user === null) throw invalidTokenError(`The user ${token.username} could not be made; try again`)
    accept(token, user, state)
  }
  return (token: IdpToken, state: AuthState): void | Promise<void> => {
    // the token verified (and cached) once; for this route's resource, checked on each request
    checkAudience(token, state.resource)
    state.idpIssuer = token.issuer
    const user = users.current(token.username)
    const settle = (found: CurrentUser | null): void | Promise<void> =>
      found === null || (found.idpRemovedAtSeconds !== undefined && token.issuedAt > found.idpRemovedAtSeconds)
        ? provisioned(token, state)
        : accept(token, found, state)
    return user instanceof Promise ? user.then(settle) : settle(user)
  }
}

function actsFor (users: Pick<UserScopes, 'current'>, token: VerifiedToken, state: AuthState): void | Promise<void> {
  const user = users.current(token.subject)
  if (user instanceof Promise) return user.then((found) => { accept(token, found, state) })
  accept(token, user, state)
}

function accept (token: VerifiedToken, user: CurrentUser | null, state: AuthState): void {
  const stale = staleTokenReason(token, user)
  if (stale !== undefined) throw invalidTokenError(stale)
  state.user = token.subject
  state.bearer = token
  state.account = user as CurrentUser
}

const GONE = 'The bearer token\'s user no longer exists; a user created again under its name is another user: log in again'
const EARLIER = 'The bearer token was issued to an earlier incarnation of this user (the user was removed and created again): log in again'
const PASSWORD = 'The bearer token was issued before the user\'s password was changed: log in again with the new password'

/** Why `token` no longer acts for its user (the detail of INVALID_TOKEN), or undefined when it does. */
export function staleTokenReason (token: VerifiedToken, user: CurrentUser | null): string | undefined {
  if (user === null) return GONE
  if (token.userId !== undefined) {
    if (token.userId !== user.id) return EARLIER
    return token.credential === user.credential ? undefined : PASSWORD
  }
  // A token issued by a keygate from before tokens carried `uid` and `cred` (it lives one token
  // lifetime at most): judged by when it was issued, to the second its `iat` gives.
  if (token.issuedAt < user.createdAtSeconds) return EARLIER
  if (token.issuedAt < user.passwordSetAtSeconds) return PASSWORD
  return undefined
}

/** The token's subject: synchronous for a token verified before; throws MISSING_TOKEN at once. */
export function verifyBearer (tokens: TokenService, header: string | undefined): string | Promise<string> {
  return tokens.verify(bearerToken(header))
}

/**
 * The token of `Authorization: Bearer <token>`, or of `DPoP <token>` (RFC 9449 §7.1: a DPoP-bound
 * token, with a proof: auth/dpop.ts), the scheme noted in `state`.
 */
function bearerToken (header: string | undefined, state?: AuthState): string {
  // Parsed by hand: a regex with a lazy group over a 16 KiB header is a ReDoS.
  const scheme = header?.slice(0, 7).toLowerCase()
  let token = ''
  if (header !== undefined && (scheme === 'bearer ' || scheme === 'bearer\t')) {
    token = header.slice(7).trim()
    if (state !== undefined) state.tokenScheme = 'bearer'
  } else if (header !== undefined && (scheme?.startsWith('dpop ') === true || scheme?.startsWith('dpop\t') === true)) {
    token = header.slice(5).trim()
    if (state !== undefined) state.tokenScheme = 'dpop'
  }
  if (token === '') {
    throw new GatewayError('MISSING_TOKEN', 'Send "Authorization: Bearer <token>" with a token from POST /v1/auth/token ' +
      '(a DPoP-bound token: "Authorization: DPoP <token>" and its DPoP proof)', {
      headers: { 'www-authenticate': 'Bearer realm="keygate"' }
    })
  }
  // Anything after "Bearer " is the token: a malformed one is INVALID_TOKEN, not a missing one.
  return token
}
