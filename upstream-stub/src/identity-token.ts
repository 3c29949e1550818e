/*
 * Optional proof that a request really came through keygate. x-gateway-user
 * alone is only as trustworthy as the network: anything that can reach the
 * stub can set it. When configured, the gateway also sends a short-lived JWT
 * signed with its token key (published at its /.well-known/jwks.json) whose
 * `sub` is the same user, and the stub refuses any /v1 request without one.
 */
import type { IncomingHttpHeaders } from 'node:http'
import {
  createRemoteJWKSet,
  errors as joseErrors,
  jwtVerify,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
} from 'jose'
import { IDENTITY_HEADER } from './identity.js'
import { ProblemError } from './problem.js'

export const DEFAULT_IDENTITY_TOKEN_HEADER = 'x-keygate-identity'
export const DEFAULT_IDENTITY_TOKEN_ISSUER = 'keygate'
/** What keygate signs with (Ed25519 by default, P-256 from a key file). Never `none` or HMAC. */
export const IDENTITY_TOKEN_ALGORITHMS = ['EdDSA', 'ES256'] as const
/**
 * The `typ` header keygate gives identity tokens. Its bearer tokens are signed
 * with the same key for the same issuer and user (RFC 8725 section 3.11):
 * without this check, and with no audience configured, a client could replay
 * its own bearer token here as an identity token.
 */
export const IDENTITY_TOKEN_TYPE = 'keygate-identity+jwt'

export interface IdentityTokenOptions {
  /** The gateway's `GET /.well-known/jwks.json`, e.g. `http://keygate:8080/.well-known/jwks.json`. */
  jwksUrl: string | URL
  /** Request header carrying the token; default `x-keygate-identity`. */
  header?: string | undefined
  /** Required `iss`; default `keygate`. */
  issuer?: string | undefined
  /**
   * Required `aud`. Unset means `aud` is not checked: the stub cannot know the
   * origin the gateway addresses it by (it may sit behind a proxy or a service
   * name), so guessing one would only reject good tokens.
   */
  audience?: string | undefined
}

/** The options with defaults applied and checked. */
export interface IdentityTokenSettings {
  readonly jwksUrl: URL
  readonly header: string
  readonly issuer: string
  readonly audience: string | undefined
}

export interface IdentityTokenVerifier {
  readonly settings: IdentityTokenSettings
  /**
   * The verified token's subject. Throws a ProblemError: MISSING_IDENTITY_TOKEN,
   * INVALID_IDENTITY_TOKEN, or IDENTITY_KEYS_UNAVAILABLE when the key set
   * cannot be fetched (that is not the token's fault, so not a 401).
   */
  verify(headers: IncomingHttpHeaders): Promise<string>
}

/** An RFC 9110 field name, as node hands it to us: lower case. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/

/** Throws a plain Error naming the bad setting; meant for startup, not for requests. */
export function resolveIdentityTokenSettings (options: IdentityTokenOptions): IdentityTokenSettings {
  const jwksUrl = URL.canParse(String(options.jwksUrl)) ? new URL(options.jwksUrl) : undefined
  if (jwksUrl === undefined || (jwksUrl.protocol !== 'http:' && jwksUrl.protocol !== 'https:')) {
    throw new Error(`identity token JWKS URL must be an absolute http(s) URL, got "${String(options.jwksUrl)}"`)
  }

  const header = (options.header ?? DEFAULT_IDENTITY_TOKEN_HEADER).toLowerCase()
  if (!HEADER_NAME.test(header)) {
    throw new Error(`identity token header must be an HTTP header name, got "${header}"`)
  }
  // The token must travel apart from the identity it vouches for.
  if (header === IDENTITY_HEADER) throw new Error(`identity token header cannot be ${IDENTITY_HEADER}`)

  const issuer = options.issuer ?? DEFAULT_IDENTITY_TOKEN_ISSUER
  if (issuer === '') throw new Error('identity token issuer must not be empty')
  if (options.audience === '') throw new Error('identity token audience must not be empty; leave it unset to skip the check')

  return { jwksUrl, header, issuer, audience: options.audience }
}

/** Raised inside the key resolver when the key set itself could not be had. */
class KeySetUnavailable extends Error {}

export function createIdentityTokenVerifier (options: IdentityTokenOptions): IdentityTokenVerifier {
  const settings = resolveIdentityTokenSettings(options)
  // Fetched on first use, cached (and refetched when a token names an unknown
  // kid, at most every 30 s) by jose, so a key rotation on the gateway is
  // picked up without restarting the stub.
  const remoteKeys = createRemoteJWKSet(settings.jwksUrl)

  // jose reports a dead gateway, a non-200 answer or a malformed key set with
  // the same kind of error it uses for bad tokens; sort them out here, where
  // anything but "no such key" is about the key set and not the token.
  const getKey: JWTVerifyGetKey = async (protectedHeader, token) => {
    try {
      return await remoteKeys(protectedHeader, token)
    } catch (err) {
      if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) throw err
      throw new KeySetUnavailable('could not get the identity token key set', { cause: err })
    }
  }

  const verifyOptions: JWTVerifyOptions = {
    algorithms: [...IDENTITY_TOKEN_ALGORITHMS],
    issuer: settings.issuer,
    typ: IDENTITY_TOKEN_TYPE,
    requiredClaims: ['exp', 'iat', 'sub'],
    ...(settings.audience === undefined ? {} : { audience: settings.audience }),
  }

  const invalid = (detail: string, cause?: unknown): ProblemError =>
    new ProblemError('INVALID_IDENTITY_TOKEN', detail, undefined, { cause })

  return {
    settings,
    async verify (headers) {
      const value = headers[settings.header]
      if (value === undefined || (typeof value === 'string' && value.trim() === '')) {
        throw new ProblemError('MISSING_IDENTITY_TOKEN', `The ${settings.header} header is required.`)
      }
      // Node only makes arrays of a few standard headers; anything else here is not one token.
      if (typeof value !== 'string') throw invalid('The identity token is not valid.')

      let subject: unknown
      try {
        subject = (await jwtVerify(value, getKey, verifyOptions)).payload.sub
      } catch (err) {
        if (err instanceof KeySetUnavailable) {
          throw new ProblemError(
            'IDENTITY_KEYS_UNAVAILABLE',
            'The keys to verify the identity token could not be fetched; try again later.',
            undefined,
            { cause: err.cause }
          )
        }
        // The reason (wrong issuer, bad signature, ...) goes to the log through
        // `cause`; the caller gets no help in crafting a token that passes.
        const expired = err instanceof joseErrors.JWTExpired
        throw invalid(expired ? 'The identity token has expired.' : 'The identity token is not valid.', err)
      }
      if (typeof subject !== 'string' || subject === '') throw invalid('The identity token has no subject.')
      return subject
    },
  }
}

/** The environment variables `server.ts` reads for identity tokens. */
export interface IdentityTokenEnv {
  UPSTREAM_JWKS_URL?: string | undefined
  UPSTREAM_IDENTITY_HEADER?: string | undefined
  UPSTREAM_IDENTITY_ISSUER?: string | undefined
  UPSTREAM_IDENTITY_AUDIENCE?: string | undefined
}

/**
 * Options from the environment; undefined (no verification) without
 * UPSTREAM_JWKS_URL. Empty values count as unset. Setting one of the other
 * variables without the URL is refused: it means the operator expects
 * verification that would silently not happen.
 */
export function identityTokenFromEnv (env: IdentityTokenEnv): IdentityTokenOptions | undefined {
  const set = (value: string | undefined): string | undefined => (value === '' ? undefined : value)
  const jwksUrl = set(env.UPSTREAM_JWKS_URL)
  if (jwksUrl === undefined) {
    const others = ['UPSTREAM_IDENTITY_HEADER', 'UPSTREAM_IDENTITY_ISSUER', 'UPSTREAM_IDENTITY_AUDIENCE'] as const
    const stray = others.filter((name) => set(env[name]) !== undefined)
    if (stray.length > 0) {
      throw new Error(`${stray.join(', ')} set without UPSTREAM_JWKS_URL; identity tokens are verified only when UPSTREAM_JWKS_URL is set`)
    }
    return undefined
  }
  return {
    jwksUrl,
    header: set(env.UPSTREAM_IDENTITY_HEADER),
    issuer: set(env.UPSTREAM_IDENTITY_ISSUER),
    audience: set(env.UPSTREAM_IDENTITY_AUDIENCE),
  }
}
