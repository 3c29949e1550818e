// Bearer tokens: EdDSA (or ES256 from a key file) JWTs whose public halves are published at
// /.well-known/jwks.json. The verifier pins algorithm, issuer and audience and requires exp.
// Verified tokens are cached until they expire: a token's signature and claims do not change, so
// a cached verification stays true, and the hot path skips one signature check per request.
// Whether the token still acts for its user (the same incarnation, no password change since) is
// the bearer stage's question (auth/bearer.ts), asked of the user as it is now.
//
// Signing keys form a ring (see signing-key-ring.ts; ring-keeper.ts holds it): one current key signs, earlier keys keep
// verifying until every token they signed has expired, and every gateway on one store shares the
// ring. A rotation made at one gateway (or by `keygate tokens rotate`) reaches the others without
// a restart: a token with a kid they do not know makes them re-read the ring (at most once a
// second), and they re-read it every 30 s anyway, so they also start signing with the new key.
import { randomUUID } from 'node:crypto'
import { SignJWT, jwtVerify, errors as joseErrors, type JWK, type JWTHeaderParameters } from 'jose'
import { tokenBinding } from '../dpop/proof.js'
import { GatewayError } from '../errors.js'
import { LruCache, type CacheStats } from '../lib/lru-cache.js'
import type { Store } from '../store/types.js'
import { keepRing, type RingKeeper } from './ring-keeper.js'
import { DEFAULT_RETIRE_MARGIN_MS, retireAfterMs, type RingKey, type RotationResult, type TokenAlgorithm } from './signing-key-ring.js'

export type { TokenAlgorithm } from './signing-key-ring.js'

export interface TokenSettings {
  issuer: string
  audience: string
  ttlSeconds: number
  /** PEM private key (Ed25519 or P-256); unset: the key ring shared through the store */
  keyFile: string | undefined
}

export interface TokenServiceOptions {
  /** how often the ring is re-read from the store (default 30 s) */
  refreshIntervalMs?: number
  /** the least time between two re-reads caused by tokens with an unknown kid (default 1 s) */
  unknownKidRefreshMs?: number
  now?: () => number
}

export interface RotateOptions {
  /**
   * How long the replaced key keeps verifying. Default: the longest token lifetime this service
   * has signed (bearer TTL, or a longer identity-token TTL) plus `marginMs`.
   */
  retireAfterMs?: number
  /** added to the longest token lifetime when `retireAfterMs` is not given; default 2 min */
  marginMs?: number
}

/** the kid new tokens are signed with from now on, and the key it replaced with its retirement time */
export type Rotation = Pick<RotationResult, 'kid' | 'replaced'>

/**
 * Who a bearer token is issued to, beyond the username: the user's incarnation and the
 * credential it logged in with (UserRecord's id and credential), carried as the `uid` and `cred`
 * claims so that the bearer stage can tell a token of an earlier incarnation of the user, or one
 * issued before a password change, from a current one.
 */
export interface TokenUser {
  id: string
  credential: string
}

/** A verified bearer token, as cached: the same object each time (nothing allocated per request). */
export interface VerifiedToken {
  readonly subject: string
  /** the `uid` claim; undefined in a token issued by a keygate from before tokens carried it */
  readonly userId: string | undefined
  /** the `cred` claim; undefined when `userId` is */
  readonly credential: string | undefined
  /** `iat`, seconds since the epoch */
  readonly issuedAt: number
  /** `cnf.jkt`: the token is DPoP-bound to this key's thumbprint (RFC 9449), and each use needs a proof by it (auth/dpop.ts) */
  readonly boundKey?: string
}

export interface IssuedToken {
  token: string
  /** DPoP: bound to a key (`cnf.jkt`), each use needs a proof by it (RFC 9449 §5); else Bearer */
  tokenType: 'Bearer' | 'DPoP'
  expiresIn: number
}

export interface IdentityClaims {
  subject: string
  audience: string
  apiKey: string | undefined
  ttlSeconds: number
  /** the request's scopes, space-separated (RFC 9068's `scope`); absent: none */
  scope?: string | undefined
  /** the signed agent the request was verified as (Web Bot Auth): the `agent` claim, `{ origin, jkt }` */
  agent?: { origin: string; jkt: string } | undefined
}

/** Explicit types (RFC 8725 §3.11): a bearer token and an upstream identity token never pass for each other. */
export const BEARER_TOKEN_TYPE = 'JWT'
export const IDENTITY_TOKEN_TYPE = 'keygate-identity+jwt'

export interface TokenService {
  /**
   * a bearer token for `subject`; `user`: its incarnation and credential (login always gives them);
   * `boundKey`: a DPoP key's RFC 7638 thumbprint, which the token then carries as `cnf.jkt`
   */
  issue: (subject: string, user?: TokenUser, boundKey?: string) => Promise<IssuedToken>
  /** a token for an upstream, proving that keygate forwarded this user's request */
  issueIdentity: (claims: IdentityClaims) => Promise<string>
  /** the token's subject, else INVALID_TOKEN; synchronous when the token is in the verified cache (no promise per request) */
  verify: (token: string) => string | Promise<string>
  /** verify(), with the claims that say which incarnation of the user it was issued to */
  check: (token: string) => VerifiedToken | Promise<VerifiedToken>
  /** every key of the ring that still verifies (the current one first) */
  readonly jwks: { keys: JWK[] }
  /** the algorithm of the current signing key */
  readonly algorithm: TokenAlgorithm
  /** the kid new tokens are signed with */
  readonly currentKid: string
  /**
   * Makes a new current signing key on the store, for every gateway on it; returns its kid.
   * Throws with a key file (rotate that by restarting with the new file).
   */
  rotate: (options?: RotateOptions) => Promise<Rotation>
  /** re-reads the ring from the store now (no-op with a key file) */
  refresh: () => Promise<void>
  /** stops the periodic re-read; safe to call more than once, and the timer never holds the process */
  close: () => void
  /** verify() calls answered by the verified-token cache (hits) or by a signature check (misses) */
  readonly stats: Readonly<CacheStats>
}

const MAX_TOKEN_LENGTH = 4096
const VERIFIED_CACHE_SIZE = 10_000

/** 401 INVALID_TOKEN, with the RFC 6750 challenge a client can act on. */
export function invalidTokenError (detail: string, cause?: unknown): GatewayError {
  return new GatewayError('INVALID_TOKEN', detail, {
    headers: { 'www-authenticate': 'Bearer realm="keygate", error="invalid_token"' },
    cause
  })
}

/** a key of the ring that still verifies at `at` */
const live = (key: RingKey | undefined, at: number): key is RingKey => key !== undefined && (key.retiresAt === undefined || key.retiresAt > at)

/**
 * The verification of bearer tokens: a token in the verified cache, while it and its key are
 * live, with no promise; else jose against the ring (its kid unknown: the ring re-read once).
 */
function bearerVerifier (settings: TokenSettings, keeper: RingKeeper, now: () => number):
{ check: TokenService['check']; stats: CacheStats } {
  const verified = new LruCache<string, VerifiedToken & { expiresAt: number; kid: string }>(VERIFIED_CACHE_SIZE)
  const stats: CacheStats = { hits: 0, misses: 0 }
  const invalid = invalidTokenError

  /** The key a token names by kid: re-reads the ring once when the kid is unknown. */
  const verificationKey = async (header: JWTHeaderParameters, readsSeen: number): Promise<RingKey> => {
    const kid = header.kid
    if (typeof kid !== 'string' || kid === '') throw invalid('The bearer token names no signing key')
    let key = keeper.ring.byKid.get(kid)
    if (key === undefined && keeper.shared && !keeper.closed) {
      await keeper.refreshAfter(readsSeen)
      key = keeper.ring.byKid.get(kid)
    }
    if (!live(key, now())) throw invalid('The bearer token was signed with an unknown key')
    if (header.alg !== key.algorithm) throw invalid('The bearer token is not signed with the algorithm of its key')
    return key
  }

  /** A token not in the cache: jose verifies it against the ring (reading the store for an unknown kid). */
  const verifyFresh = async (token: string): Promise<VerifiedToken> => {
    stats.misses++
    const readsSeen = keeper.readsStarted()
    if (token.length > MAX_TOKEN_LENGTH) throw invalid('The bearer token is too long')
    let kid = ''
    try {
      const { payload } = await jwtVerify(token, async (header) => {
        const key = await verificationKey(header, readsSeen)
        kid = key.kid
        return key.publicKey
      }, {
        algorithms: ['EdDSA', 'ES256'],
        issuer: settings.issuer,
        audience: settings.audience,
        typ: BEARER_TOKEN_TYPE,
        requiredClaims: ['exp', 'iat', 'sub', 'jti']
      })
      const subject = payload.sub
      if (typeof subject !== 'string' || subject === '' || typeof payload.exp !== 'number' || typeof payload.iat !== 'number') {
        throw invalid('The bearer token has no subject')
      }
      const { uid, cred } = payload
      // both or neither: a token with one of them is none keygate issued
      if ((uid === undefined) !== (cred === undefined) || (uid !== undefined && (typeof uid !== 'string' || typeof cred !== 'string'))) {
        throw invalid('The bearer token\'s user claims are malformed')
      }
      const binding = tokenBinding(payload)
      if (typeof binding === 'object') throw invalid(binding.problem)
      const entry = {
        subject,
        userId: uid as string | undefined,
        credential: cred as string | undefined,
        issuedAt: payload.iat,
        expiresAt: payload.exp * 1000,
        kid,
        ...(binding !== undefined && { boundKey: binding })
      }
      verified.set(token, entry)
      return entry
    } catch (err) {
      if (err instanceof GatewayError) throw err
      const expired = err instanceof joseErrors.JWTExpired
      throw invalid(expired ? 'The bearer token has expired; get a new one from POST /v1/auth/token' : 'The bearer token is not valid', err)
    }
  }

  const check = (token: string): VerifiedToken | Promise<VerifiedToken> => {
    const arrivedAt = now()
    const hit = verified.get(token)
    if (hit !== undefined) {
      // a cached token is only as good as its key: a retired key verifies nothing
      if (hit.expiresAt > arrivedAt && live(keeper.ring.byKid.get(hit.kid), arrivedAt)) {
        stats.hits++
        return hit
      }
      verified.delete(token)
    }
    return verifyFresh(token)
  }
  return { check, stats }
}

export async function createTokenService (settings: TokenSettings, store: Store, options: TokenServiceOptions = {}): Promise<TokenService> {
  const now = options.now ?? Date.now
  /** the longest lifetime of a token this service signed: a replaced key verifies at least this long */
  let longestTtlSeconds = settings.ttlSeconds
  const keeper = await keepRing(store, {
    keyFile: settings.keyFile, refreshIntervalMs: options.refreshIntervalMs, unknownKidRefreshMs: options.unknownKidRefreshMs, now
  })
  const { check, stats } = bearerVerifier(settings, keeper, now)

  return {
    get algorithm () { return keeper.ring.current.algorithm },
    get currentKid () { return keeper.ring.current.kid },
    get jwks () {
      const at = now()
      const { ring } = keeper
      const keys = [ring.current, ...[...ring.byKid.values()].filter((k) => k !== ring.current && live(k, at))]
      return { keys: keys.map((k) => k.jwk) }
    },
    async issue (subject, user, boundKey) {
      const key = keeper.ring.current
      const issuedAt = Math.floor(now() / 1000)
      const token = await new SignJWT({
        ...(user !== undefined && { uid: user.id, cred: user.credential }),
        ...(boundKey !== undefined && { cnf: { jkt: boundKey } })
      })
        .setProtectedHeader({ alg: key.algorithm, kid: key.kid, typ: BEARER_TOKEN_TYPE })
        .setIssuer(settings.issuer)
        .setAudience(settings.audience)
        .setSubject(subject)
        .setIssuedAt(issuedAt)
        .setExpirationTime(issuedAt + settings.ttlSeconds)
        .setJti(randomUUID())
        .sign(key.privateKey)
      return { token, tokenType: boundKey === undefined ? 'Bearer' : 'DPoP', expiresIn: settings.ttlSeconds }
    },
    async issueIdentity ({ subject, audience, apiKey, ttlSeconds, scope, agent }) {
      const key = keeper.ring.current
      if (ttlSeconds > longestTtlSeconds) longestTtlSeconds = ttlSeconds
      const issuedAt = Math.floor(now() / 1000)
      return await new SignJWT({
        ...(apiKey !== undefined && { api_key: apiKey }),
        ...(scope !== undefined && { scope }),
        ...(agent !== undefined && { agent: { origin: agent.origin, jkt: agent.jkt } })
      })
        .setProtectedHeader({ alg: key.algorithm, kid: key.kid, typ: IDENTITY_TOKEN_TYPE })
        .setIssuer(settings.issuer)
        .setAudience(audience)
        .setSubject(subject)
        .setIssuedAt(issuedAt)
        .setExpirationTime(issuedAt + ttlSeconds)
        .sign(key.privateKey)
    },
    check,
    verify (token) {
      const checked = check(token)
      return checked instanceof Promise ? checked.then((t) => t.subject) : checked.subject
    },
    async rotate (rotateOptions = {}) {
      if (!keeper.shared) throw new Error('the signing key comes from KEYGATE_JWT_KEY_FILE: rotate it by restarting the gateways with a new key file')
      const after = rotateOptions.retireAfterMs ?? retireAfterMs(longestTtlSeconds, rotateOptions.marginMs ?? DEFAULT_RETIRE_MARGIN_MS)
      return await keeper.rotate(after)
    },
    async refresh () {
      if (keeper.shared) await keeper.refreshAfter(keeper.readsStarted())
    },
    close: keeper.close,
    stats
  }
}
