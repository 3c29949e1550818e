// An identity provider's access tokens: which trusted issuer a token claims to come from, and
// whether it does (issuers.ts says what each issuer accepts). A token is checked against its own
// issuer only: the `iss` it claims picks the issuer and that issuer's keys, and jose then checks
// `iss` again with the signature. A key a token names in its header (`jku`, `x5u`, `jwk`, `x5c`)
// is never fetched or used: only the issuer's published key set verifies. Verified tokens are
// cached until they expire, as keygate's own are (tokens/token-service.ts): the hot path pays for
// one signature check per token, not per request.
import { decodeProtectedHeader, errors as joseErrors, jwtVerify, type CryptoKey, type JWTPayload, type KeyObject } from 'jose'
import { tokenBinding } from '../dpop/proof.js'
import { GatewayError } from '../errors.js'
import { LruCache, type CacheStats } from '../lib/lru-cache.js'
import { isScope } from '../users/scopes.js'
import { IDP_SUBJECT, IDP_USER_SEPARATOR } from '../users/idp-users.js'
import type { IssuerConfig } from './issuers.js'

/** Where an issuer's verification keys come from (remote-keys/remote-key-set.ts; a fixed set in tests). */
export interface KeySource {
  /** the key for a JWS header's kid and alg, or a GatewayError (UNKNOWN_SIGNING_KEY, IDP_KEYS_UNAVAILABLE) */
  keyFor: (kid: string | undefined, alg: string) => Promise<CryptoKey | KeyObject>
  /** the same key from what is held now, without fetching: undefined when it is no longer published, or the keys are not usable */
  keyForSync?: (kid: string | undefined, alg: string) => CryptoKey | KeyObject | undefined
}

/** A verified IdP token, as cached: the same object for each request that carries it. */
export interface IdpToken {
  readonly issuer: IssuerConfig
  /** the subject claim's value, as the IdP wrote it */
  readonly subject: string
  /** keygate's name for the user: `<issuer name>:<subject>` */
  readonly username: string
  /** keygate's scopes the token carries, after the issuer's map (sorted, each once) */
  readonly scopes: readonly string[]
  /** the IdP's own scopes (or roles) the token carries, before any map: a resource's own map starts from these */
  readonly idpScopes: readonly string[]
  /** `iat` (seconds), or when it was first verified when it has none */
  readonly issuedAt: number
  /** `exp`, seconds */
  readonly expiresAt: number
  /** its `aud` values: a resource's route checks them on every request (resources/audience.ts) */
  readonly audiences: ReadonlySet<string>
  /** the header's kid and alg, and the key that verified it: a cached verification holds while the issuer still publishes that key */
  readonly kid: string | undefined
  readonly alg: string
  readonly key: CryptoKey | KeyObject
  /** `cnf.jkt`: the token is DPoP-bound to this key (RFC 9449); undefined: a bearer token */
  readonly boundKey: string | undefined
}

export interface IdpVerifier {
  /**
   * The token as verified before and still valid (the hot path: one lookup, no decoding), or
   * undefined: then issuerOf and verify say what it is.
   */
  cached: (token: string) => IdpToken | undefined
  /** the trusted issuer a token claims (its unverified `iss`), or undefined: not an IdP token keygate knows */
  issuerOf: (token: string) => IssuerConfig | undefined
  /** the verified token: synchronous when verified before; INVALID_TOKEN (or a key error) else */
  verify: (token: string, issuer: IssuerConfig) => IdpToken | Promise<IdpToken>
  /** verify() answered from the cache (hits) or by a signature check (misses) */
  readonly stats: Readonly<CacheStats>
}

const VERIFIED_CACHE_SIZE = 10_000
/** JOSE header parameters that name a key elsewhere: never followed (RFC 8725 §3.10) */
const KEY_REFERENCES = ['jku', 'x5u', 'jwk', 'x5c'] as const

function idpTokenError (issuer: IssuerConfig | undefined, detail: string, cause?: unknown): GatewayError {
  return new GatewayError('INVALID_TOKEN', issuer === undefined ? detail : `${detail} (issuer ${issuer.name})`, {
    headers: { 'www-authenticate': 'Bearer realm="keygate", error="invalid_token"' },
    cause
  })
}

/** The value at a claim path (`realm_access.roles`): plain member names, no arrays indexed. */
export function claimAt (payload: JWTPayload, path: string): unknown {
  let value: unknown = payload
  for (const name of path.split('.')) {
    if (value === null || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, name)) return undefined
    value = (value as Record<string, unknown>)[name]
  }
  return value
}

/** The IdP's scopes (or roles) a token carries: a space-separated string or a list of strings at the issuer's claim; `scope`, else `scp`, by default. */
export function idpScopes (payload: JWTPayload, claim: string | undefined): string[] {
  const value = claim === undefined ? (payload.scope ?? payload.scp) : claimAt(payload, claim)
  if (typeof value === 'string') return value.split(' ').filter((s) => s !== '')
  if (Array.isArray(value)) return value.filter((s): s is string => typeof s === 'string')
  return []
}

/**
 * keygate's scopes for the IdP's: through a map (the issuer's, or a resource's) when there is one
 * (unmapped ones dropped), else those that are valid scopes, as named.
 */
export function mappedScopes (map: ReadonlyMap<string, readonly string[]> | undefined, fromIdp: readonly string[]): string[] {
  const out = new Set<string>()
  for (const scope of fromIdp) {
    if (map === undefined) {
      if (isScope(scope)) out.add(scope)
    } else {
      for (const mapped of map.get(scope) ?? []) out.add(mapped)
    }
  }
  return [...out].sort()
}

/** The unverified `iss` of a compact JWS, or undefined when it is not one. */
function claimedIssuer (token: string): string | undefined {
  const first = token.indexOf('.')
  const second = first === -1 ? -1 : token.indexOf('.', first + 1)
  if (second === -1) return undefined
  try {
    const payload = JSON.parse(Buffer.from(token.slice(first + 1, second), 'base64url').toString('utf8')) as unknown
    const iss = payload !== null && typeof payload === 'object' ? (payload as { iss?: unknown }).iss : undefined
    return typeof iss === 'string' ? iss : undefined
  } catch {
    return undefined
  }
}

/** jose's refusal in words a client can act on. */
function reasonOf (err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'The token has expired'
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'iss': return 'The token\'s issuer (iss) is not the one its keys belong to'
      case 'aud': return err.payload.aud === undefined
        ? 'The token names no audience (aud): keygate accepts only tokens minted for it (ask its issuer with resource= or audience=)'
        : 'The token is not for keygate: its audience (aud) is none this issuer is configured with'
      case 'nbf': return 'The token is not valid yet (nbf)'
      case 'iat': return 'The token\'s issued-at time (iat) is in the future'
      case 'typ': return 'The token is not an access token (its typ is not at+jwt)'
      default: return `The token lacks the claim ${err.claim} or it is not valid (${err.reason})`
    }
  }
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'The token\'s signature does not verify with its issuer\'s key'
  if (err instanceof joseErrors.JOSENotSupported) return `The token uses what keygate does not accept: ${err.message}`
  if (err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JWSInvalid) return `The token is malformed: ${err.message}`
  return 'The token does not verify'
}

/**
 * `resourceAudiences`: besides an issuer's own audiences, the ids (and audiences) of the protected
 * resources that name it (resources/resource.ts): its tokens for them pass here, and each route
 * then checks the token is for it (resources/audience.ts).
 */
export function createIdpVerifier (issuers: readonly IssuerConfig[], keysOf: (issuer: IssuerConfig) => KeySource, now: () => number = Date.now,
  resourceAudiences: (issuer: IssuerConfig) => readonly string[] = () => []): IdpVerifier {
  const byIssuer = new Map(issuers.map((issuer) => [issuer.issuer, issuer]))
  const verified = new LruCache<string, IdpToken>(VERIFIED_CACHE_SIZE)
  const stats: CacheStats = { hits: 0, misses: 0 }

  const check = async (token: string, issuer: IssuerConfig): Promise<IdpToken> => {
    if (token.length > issuer.maxTokenBytes) {
      throw idpTokenError(issuer, `The token is ${token.length} bytes; this issuer's tokens may have ${issuer.maxTokenBytes}`)
    }
    let header
    try {
      header = decodeProtectedHeader(token)
    } catch (err) {
      throw idpTokenError(issuer, 'The token is malformed: its header cannot be read', err)
    }
    const alg = header.alg
    if (typeof alg !== 'string' || !(issuer.algorithms as readonly string[]).includes(alg)) {
      throw idpTokenError(issuer, `The token's algorithm ${JSON.stringify(alg)} is not one this issuer's tokens may use (${issuer.algorithms.join(', ')})`)
    }
    // a key the header names elsewhere is never fetched: the issuer's own keys verify, or nothing does
    const named = KEY_REFERENCES.filter((name) => header[name] !== undefined)
    const key = await keysOf(issuer).keyFor(typeof header.kid === 'string' ? header.kid : undefined, alg)
    let payload: JWTPayload
    try {
      ({ payload } = await jwtVerify(token, key, {
        issuer: issuer.issuer,
        audience: [...issuer.audiences, ...resourceAudiences(issuer)],
        algorithms: [alg],
        clockTolerance: issuer.clockSkewSeconds,
        currentDate: new Date(now()),
        requiredClaims: ['exp', issuer.subjectClaim, ...issuer.requiredClaims],
        ...(issuer.accessTokenType === 'at+jwt' && { typ: 'at+jwt' })
      }))
    } catch (err) {
      const ignored = named.length > 0 ? ` (its ${named.join(', ')} header was ignored: keygate verifies with the issuer's published keys only)` : ''
      throw idpTokenError(issuer, reasonOf(err) + ignored, err)
    }
    const subject = claimAt(payload, issuer.subjectClaim)
    if (typeof subject !== 'string' || !IDP_SUBJECT.test(subject)) {
      throw idpTokenError(issuer, `The token's ${issuer.subjectClaim} is not a subject keygate can name a user after (1-255 printable characters, no spaces)`)
    }
    const binding = tokenBinding(payload)
    if (typeof binding === 'object') throw idpTokenError(issuer, binding.problem)
    const seconds = Math.floor(now() / 1000)
    const fromIdp = idpScopes(payload, issuer.scopeClaim)
    return {
      issuer,
      subject,
      username: `${issuer.name}${IDP_USER_SEPARATOR}${subject}`,
      scopes: mappedScopes(issuer.scopeMap, fromIdp),
      idpScopes: fromIdp,
      issuedAt: typeof payload.iat === 'number' ? payload.iat : seconds,
      expiresAt: payload.exp as number,
      audiences: new Set(typeof payload.aud === 'string' ? [payload.aud] : payload.aud ?? []),
      kid: typeof header.kid === 'string' ? header.kid : undefined,
      alg,
      key,
      boundKey: binding
    }
  }

  const stillPublished = (hit: IdpToken): boolean => {
    const source = keysOf(hit.issuer)
    return source.keyForSync === undefined || source.keyForSync(hit.kid, hit.alg) === hit.key
  }

  // cached until its exp (with the issuer's skew), and while the issuer still publishes the key
  // that verified it, as keygate last fetched its keys (a key rotated out, or keys gone stale in
  // an outage, and the token is checked again)
  const stillValid = (hit: IdpToken | undefined): hit is IdpToken =>
    hit !== undefined && (hit.expiresAt + hit.issuer.clockSkewSeconds) * 1000 > now() && stillPublished(hit)

  return {
    cached (token) {
      const hit = verified.get(token)
      if (!stillValid(hit)) return undefined
      stats.hits++
      return hit
    },
    issuerOf (token) {
      const iss = claimedIssuer(token)
      return iss === undefined ? undefined : byIssuer.get(iss)
    },
    verify (token, issuer) {
      const hit = verified.get(token)
      if (hit?.issuer === issuer && stillValid(hit)) {
        stats.hits++
        return hit
      }
      stats.misses++
      return check(token, issuer).then((result) => {
        verified.set(token, result)
        return result
      })
    },
    stats
  }
}
