// Bearer tokens: EdDSA (or ES256 from a key file) JWTs whose public half is published at
// /.well-known/jwks.json. The verifier pins algorithm, issuer and audience and requires exp.
// Verified tokens are cached until they expire: a token cannot be revoked, so a cached
// verification stays true, and the hot path skips one signature check per request.
import { randomUUID, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { SignJWT, calculateJwkThumbprint, exportJWK, jwtVerify, errors as joseErrors, type JWK } from 'jose'
import { GatewayError } from '../errors.js'
import { LruCache } from '../keys/lru-cache.js'
import type { Store } from '../store/index.js'

export type TokenAlgorithm = 'EdDSA' | 'ES256'

export interface TokenSettings {
  issuer: string
  audience: string
  ttlSeconds: number
  /** PEM private key (Ed25519 or P-256); unset: the key shared through the store */
  keyFile: string | undefined
}

export interface IssuedToken {
  token: string
  tokenType: 'Bearer'
  expiresIn: number
}

export interface IdentityClaims {
  subject: string
  audience: string
  apiKey: string | undefined
  ttlSeconds: number
}

/** Explicit types (RFC 8725 §3.11): a bearer token and an upstream identity token never pass for each other. */
export const BEARER_TOKEN_TYPE = 'JWT'
export const IDENTITY_TOKEN_TYPE = 'keygate-identity+jwt'

export interface TokenService {
  issue: (subject: string) => Promise<IssuedToken>
  /** a token for an upstream, proving that keygate forwarded this user's request */
  issueIdentity: (claims: IdentityClaims) => Promise<string>
  /** the token's subject; INVALID_TOKEN otherwise */
  verify: (token: string) => Promise<string>
  readonly jwks: { keys: JWK[] }
  readonly algorithm: TokenAlgorithm
}

interface SigningKey {
  privateKey: KeyObject
  publicKey: KeyObject
  algorithm: TokenAlgorithm
}

const MAX_TOKEN_LENGTH = 4096
const VERIFIED_CACHE_SIZE = 10_000

function algorithmOf (key: KeyObject): TokenAlgorithm {
  if (key.asymmetricKeyType === 'ed25519') return 'EdDSA'
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256'
  throw new Error(`the token signing key is ${key.asymmetricKeyType ?? 'unknown'}; use an Ed25519 or P-256 (prime256v1) private key`)
}

async function loadSigningKey (settings: TokenSettings, store: Store): Promise<SigningKey> {
  if (settings.keyFile !== undefined) {
    let privateKey: KeyObject
    try {
      privateKey = createPrivateKey(await readFile(settings.keyFile))
    } catch (err) {
      throw new Error(`KEYGATE_JWT_KEY_FILE: cannot read a PEM private key from ${settings.keyFile}: ${(err as Error).message}`, { cause: err })
    }
    return { privateKey, publicKey: createPublicKey(privateKey), algorithm: algorithmOf(privateKey) }
  }
  // No key file: the first gateway on this store generates one and every other gateway adopts it.
  const candidate = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const privateKey = createPrivateKey(await store.getOrCreateSigningKey(candidate))
  return { privateKey, publicKey: createPublicKey(privateKey), algorithm: algorithmOf(privateKey) }
}

export async function createTokenService (settings: TokenSettings, store: Store): Promise<TokenService> {
  const { privateKey, publicKey, algorithm } = await loadSigningKey(settings, store)
  const publicJwk = await exportJWK(publicKey)
  const kid = await calculateJwkThumbprint(publicJwk)
  const jwks = { keys: [{ ...publicJwk, kid, alg: algorithm, use: 'sig' }] }
  const verified = new LruCache<string, { subject: string; expiresAt: number }>(VERIFIED_CACHE_SIZE)

  const invalid = (detail: string, cause?: unknown): GatewayError => new GatewayError('INVALID_TOKEN', detail, {
    headers: { 'www-authenticate': 'Bearer realm="keygate", error="invalid_token"' },
    cause
  })

  return {
    algorithm,
    jwks,
    async issue (subject) {
      const now = Math.floor(Date.now() / 1000)
      const token = await new SignJWT({})
        .setProtectedHeader({ alg: algorithm, kid, typ: BEARER_TOKEN_TYPE })
        .setIssuer(settings.issuer)
        .setAudience(settings.audience)
        .setSubject(subject)
        .setIssuedAt(now)
        .setExpirationTime(now + settings.ttlSeconds)
        .setJti(randomUUID())
        .sign(privateKey)
      return { token, tokenType: 'Bearer', expiresIn: settings.ttlSeconds }
    },
    async issueIdentity ({ subject, audience, apiKey, ttlSeconds }) {
      const now = Math.floor(Date.now() / 1000)
      return await new SignJWT(apiKey === undefined ? {} : { api_key: apiKey })
        .setProtectedHeader({ alg: algorithm, kid, typ: IDENTITY_TOKEN_TYPE })
        .setIssuer(settings.issuer)
        .setAudience(audience)
        .setSubject(subject)
        .setIssuedAt(now)
        .setExpirationTime(now + ttlSeconds)
        .sign(privateKey)
    },
    async verify (token) {
      const now = Date.now()
      const hit = verified.get(token)
      if (hit !== undefined) {
        if (hit.expiresAt > now) return hit.subject
        verified.delete(token)
      }
      if (token.length > MAX_TOKEN_LENGTH) throw invalid('The bearer token is too long')
      try {
        const { payload, protectedHeader } = await jwtVerify(token, publicKey, {
          algorithms: [algorithm],
          issuer: settings.issuer,
          audience: settings.audience,
          typ: BEARER_TOKEN_TYPE,
          requiredClaims: ['exp', 'iat', 'sub', 'jti']
        })
        if (protectedHeader.kid !== kid) throw invalid('The bearer token was signed with an unknown key')
        const subject = payload.sub
        if (typeof subject !== 'string' || subject === '' || typeof payload.exp !== 'number') throw invalid('The bearer token has no subject')
        verified.set(token, { subject, expiresAt: payload.exp * 1000 })
        return subject
      } catch (err) {
        if (err instanceof GatewayError) throw err
        const expired = err instanceof joseErrors.JWTExpired
        throw invalid(expired ? 'The bearer token has expired; get a new one from POST /v1/auth/token' : 'The bearer token is not valid', err)
      }
    }
  }
}
