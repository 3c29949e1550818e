// DPoP proofs (RFC 9449): a short JWT a client signs with its own key for each request, which
// proves it holds the key an access token is bound to (the token's `cnf.jkt`). The checks of §4.3
// in order, cheapest first: exactly one proof; a JWS whose header says `typ` dpop+jwt, an
// asymmetric `alg` of the configured list and a public `jwk` (never a private one); the
// signature by that jwk; `htm` and `htu` the request's method and URI (no query, no fragment);
// `iat` within the window; `ath` the access token's hash; the key's RFC 7638 thumbprint the
// token's; the server nonce when nonces are on (nonces.ts); last, `jti` spent once within the
// window on every gateway of the store (the replay guard's rememberOnce). A proof is new for
// each request: only its key is kept once imported (signature.ts), and each costs one signature
// verification, synchronous with node:crypto (docs/dpop.md says what that costs).
//
// The verifier knows nothing of HTTP frameworks or tokens: the bearer pipeline (auth/dpop.ts)
// gives it the request's method, URI, DPoP field lines, access token and `cnf.jkt`; a token
// endpoint gives it no token and binds what it issues to the thumbprint it answers.
import { GatewayError } from '../errors.js'
import { sha256Base64url } from '../lib/sha256.js'
import type { OnceStore } from '../store/types.js'
import { createNonces, type DpopNonces } from './nonces.js'
import { proofKey, signatureVerifies } from './signature.js'

/** what RFC 9449 proofs may be signed with unless configured otherwise (KEYGATE_DPOP_ALGORITHMS) */
export const DEFAULT_DPOP_ALGORITHMS = ['ES256', 'EdDSA', 'Ed25519', 'RS256', 'PS256'] as const
/** every asymmetric JWS algorithm the verifier can check: the configurable ones */
export const DPOP_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'] as const
export const DEFAULT_DPOP_IAT_WINDOW_SECONDS = 60
/** a proof longer than this is refused unread (an RSA-4096 key's proof is under 2 KB) */
export const MAX_PROOF_BYTES = 8192
/** the longest `jti` kept: a UUID or 32 random bytes in base64url fit many times over */
const MAX_JTI_LENGTH = 256
/** gateways' clocks differ a little: a jti is remembered this much past its window */
const JTI_MARGIN_MS = 5000
/** JWK members that only a private (or symmetric) key has */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const

export interface DpopSettings {
  /** the JWS algorithms a proof may use (asymmetric only: none and HS* are never accepted) */
  algorithms: readonly string[]
  /** a proof's `iat` may be this far from now, either way (seconds) */
  iatWindowSeconds: number
  /** server nonces (DPoP-Nonce): each lives this long (seconds), the one before it still accepted; 0: off */
  nonceSeconds: number
}

export const DEFAULT_DPOP_SETTINGS: DpopSettings = {
  algorithms: DEFAULT_DPOP_ALGORITHMS,
  iatWindowSeconds: DEFAULT_DPOP_IAT_WINDOW_SECONDS,
  nonceSeconds: 0
}

/** What a proof is checked against: the request as its client addressed it. */
export interface ProofCheck {
  /** the request's method */
  method: string
  /** the request's URI as the client addressed it: scheme://host[:port]/path (a query or fragment is ignored) */
  uri: string
  /** the DPoP field's lines (undefined: none) */
  proofs: readonly string[] | undefined
  /** the access token the proof goes with: its hash must be `ath` (none at a token endpoint) */
  accessToken?: string | undefined
  /** the token's `cnf.jkt`: the proof's key must be this one (none at a token endpoint) */
  boundKey?: string | undefined
}

/** A proof that passed: what the request is bound to. */
export interface DpopProof {
  /** the proof key's RFC 7638 SHA-256 thumbprint (base64url): a token endpoint's `cnf.jkt` */
  thumbprint: string
  alg: string
  jti: string
  /** seconds */
  iat: number
}

export interface DpopVerifier {
  readonly settings: DpopSettings
  /** the DPoP challenge's `algs` value: the algorithms, space-separated */
  readonly algs: string
  /** INVALID_DPOP_PROOF or USE_DPOP_NONCE (a GatewayError), else the proof */
  verify: (check: ProofCheck) => Promise<DpopProof>
}

/** 401 INVALID_DPOP_PROOF: the proof is missing, malformed, for another request, or does not verify. */
export function invalidProof (detail: string, cause?: unknown): GatewayError {
  return new GatewayError('INVALID_DPOP_PROOF', detail, { cause })
}

/** Why `settings` cannot be used, or undefined: the configuration's check (config/env.ts says the variables). */
export function dpopSettingsProblem (settings: DpopSettings): string | undefined {
  if (settings.algorithms.length === 0) return 'names no algorithm'
  const unknown = settings.algorithms.filter((alg) => !(DPOP_ALGORITHMS as readonly string[]).includes(alg))
  if (unknown.length > 0) return `names ${unknown.join(', ')}, which is not an asymmetric JWS algorithm keygate verifies (${DPOP_ALGORITHMS.join(', ')})`
  return undefined
}

/** base64url(SHA-256(token)): a proof's `ath` (RFC 9449 §4.2) */
export function accessTokenHash (token: string): string {
  return sha256Base64url(token)
}

/** scheme://host[:port]/path of an absolute URI, as the WHATWG URL parser normalises it; undefined when it is not one. */
export function htuOf (uri: string): string | undefined {
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return undefined
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined
  if (url.username !== '' || url.password !== '') return undefined
  return `${url.protocol}//${url.host}${url.pathname}`
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** The proof's protected header and payload, each a JSON object; INVALID_DPOP_PROOF otherwise. */
function readProof (proof: string): { header: Record<string, unknown>, payload: Record<string, unknown> } {
  const parts = proof.split('.')
  if (parts.length !== 3 || parts.some((part) => !/^[A-Za-z0-9_-]*$/.test(part))) throw invalidProof('The DPoP proof is not a JWS in compact form (three base64url parts)')
  let header: unknown
  let payload: unknown
  try {
    header = JSON.parse(Buffer.from(parts[0] as string, 'base64url').toString('utf8'))
    payload = JSON.parse(Buffer.from(parts[1] as string, 'base64url').toString('utf8'))
  } catch (err) {
    throw invalidProof('The DPoP proof\'s header or payload is not JSON', err)
  }
  if (!isObject(header) || !isObject(payload)) throw invalidProof('The DPoP proof\'s header and payload must be JSON objects')
  return { header, payload }
}

/** The header's `typ`, `alg` and `jwk`, each as §4.3 wants it. */
function checkHeader (header: Record<string, unknown>, algorithms: readonly string[]): { alg: string, jwk: Record<string, unknown> } {
  if (typeof header.typ !== 'string' || header.typ.toLowerCase() !== 'dpop+jwt') {
    throw invalidProof(`The DPoP proof's typ is ${JSON.stringify(header.typ)}; a proof's is "dpop+jwt"`)
  }
  // RFC 7515 §4.1.11: an extension the verifier does not understand must not be ignored (b64: false would sign other bytes)
  if (header.crit !== undefined || header.b64 !== undefined) {
    throw invalidProof('The DPoP proof\'s header names a JWS extension (crit, b64) keygate does not implement; a proof needs none')
  }
  const alg = header.alg
  if (typeof alg !== 'string' || !algorithms.includes(alg)) {
    throw invalidProof(`The DPoP proof's alg ${JSON.stringify(alg)} is not one keygate accepts (${algorithms.join(', ')}); none and HS* never are`)
  }
  const jwk = header.jwk
  if (!isObject(jwk) || typeof jwk.kty !== 'string') throw invalidProof('The DPoP proof\'s header has no jwk: the public key that verifies it')
  const secret = PRIVATE_MEMBERS.filter((name) => jwk[name] !== undefined)
  if (secret.length > 0 || jwk.kty === 'oct') {
    throw invalidProof(`The DPoP proof's jwk holds private key material (${secret.join(', ') || 'kty oct'}): ` +
      'send the public key only, and make a new key pair, since this one is exposed')
  }
  return { alg, jwk }
}

/** `htm`, `htu`, `iat`, `jti` and `ath` against the request; the `jti` and `iat` read. */
function checkClaims (payload: Record<string, unknown>, check: ProofCheck, windowMs: number, nowMs: number): { jti: string, iat: number } {
  const { htm, htu, iat, jti, ath } = payload
  if (typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH) {
    throw invalidProof(`The DPoP proof needs a jti: a unique string of at most ${MAX_JTI_LENGTH} characters`)
  }
  if (htm !== check.method) throw invalidProof(`The DPoP proof's htm is ${JSON.stringify(htm)}; this request's method is ${check.method}`)
  const expected = htuOf(check.uri)
  const claimed = typeof htu === 'string' ? htuOf(htu) : undefined
  if (expected === undefined || claimed !== expected) {
    const shown = JSON.stringify(typeof htu === 'string' ? htu.slice(0, 300) : htu)
    throw invalidProof(`The DPoP proof's htu is ${shown}; this request's URI is ${expected ?? 'none keygate can read (its Host is not a host[:port])'} ` +
      '(without query and fragment)')
  }
  if (typeof iat !== 'number' || !Number.isFinite(iat)) throw invalidProof('The DPoP proof needs iat: the time it was made, in seconds since the epoch')
  if (Math.abs(iat * 1000 - nowMs) > windowMs) {
    throw invalidProof(`The DPoP proof's iat (${iat}) is more than ${windowMs / 1000} s from the server's time (${Math.floor(nowMs / 1000)}): ` +
      'make a new proof for each request, with a correct clock')
  }
  if (check.accessToken !== undefined) {
    if (typeof ath !== 'string') {
      throw invalidProof('The DPoP proof has no ath: a proof sent with an access token carries its hash, base64url(SHA-256(token))')
    }
    if (ath !== accessTokenHash(check.accessToken)) throw invalidProof('The DPoP proof\'s ath is not the hash of the access token sent with it')
  }
  return { jti, iat }
}

/**
 * The verifier over `store` (the jti marks, and the nonces when they are on); `now` in ms.
 * Settings are checked by dpopSettingsProblem first; the verifier refuses none and HS* whatever they say.
 */
export function createDpopVerifier (settings: DpopSettings, store: Pick<OnceStore, 'rememberOnce' | 'shareValue'>, now: () => number = Date.now): DpopVerifier {
  const algorithms = settings.algorithms.filter((alg) => alg !== 'none' && !alg.startsWith('HS'))
  const windowMs = settings.iatWindowSeconds * 1000
  const nonces: DpopNonces | undefined = settings.nonceSeconds > 0 ? createNonces(store, settings.nonceSeconds * 1000, now) : undefined
  return {
    settings,
    algs: algorithms.join(' '),
    async verify (check) {
      const proofs = check.proofs
      if (proofs === undefined || proofs.length === 0) {
        throw invalidProof('Send a DPoP proof in the DPoP header: a JWT signed by the key the token is bound to (RFC 9449)')
      }
      if (proofs.length > 1) throw invalidProof(`The request has ${proofs.length} DPoP headers; send exactly one`)
      const proof = (proofs[0] as string).trim()
      if (proof.length > MAX_PROOF_BYTES) throw invalidProof(`The DPoP proof is ${proof.length} bytes; keygate reads at most ${MAX_PROOF_BYTES}`)
      const { header, payload } = readProof(proof)
      const { alg, jwk } = checkHeader(header, algorithms)
      const nowMs = now()
      const { jti, iat } = checkClaims(payload, check, windowMs, nowMs)
      const proven = proofKey(jwk, alg)
      if (typeof proven === 'string') throw invalidProof(`The DPoP proof's jwk is not a key keygate can verify it with: ${proven}`)
      const { key, thumbprint } = proven
      if (check.boundKey !== undefined && thumbprint !== check.boundKey) {
        throw invalidProof('The DPoP proof is signed by another key than the one the access token is bound to (its cnf.jkt)')
      }
      if (!signatureVerifies(proof, key, alg)) throw invalidProof('The DPoP proof\'s signature does not verify with its jwk')
      if (nonces !== undefined) await nonces.check(payload.nonce)
      // last, once everything else holds: a refused proof spends nothing
      // as long as any gateway may still take it: its iat may be a window ahead, and another gateway's
      // clock up to a window behind (a TTL from the client's iat, near the window's edge, would end
      // while a gateway a few seconds behind still takes the proof)
      const ttlMs = 2 * windowMs + JTI_MARGIN_MS
      const id = sha256Base64url(`${thumbprint}\n${jti}`)
      const mark = await store.rememberOnce(`dpop:${id}`, ttlMs)
      if (mark === false) throw invalidProof('This DPoP proof (its jti) was already used: make a new proof for each request')
      return { thumbprint, alg, jti, iat }
    }
  }
}

/**
 * The key an access token is bound to: its `cnf.jkt` (RFC 9449 §6), or undefined when it has no
 * `cnf`. A `cnf` keygate cannot check (jkt not a thumbprint, or only another binding such as
 * mTLS's x5t#S256) is a reason to refuse the token (returned as `{ problem }`): fail closed.
 */
export function tokenBinding (payload: Record<string, unknown>): string | undefined | { problem: string } {
  const cnf = payload.cnf
  if (cnf === undefined) return undefined
  const jkt = isObject(cnf) ? cnf.jkt : undefined
  // jkt alone: a cnf that also names another confirmation (x5t#S256, jwk, kid, ...) binds the token to
  // something keygate does not check, and accepting it on the DPoP proof alone would drop that binding
  const only = isObject(cnf) && Object.keys(cnf).length === 1
  if (only && typeof jkt === 'string' && /^[A-Za-z0-9_-]{43}$/.test(jkt)) return jkt
  return { problem: 'The token is bound to a key (cnf) in a way keygate cannot check: only DPoP\'s cnf.jkt (an RFC 7638 SHA-256 thumbprint) is' }
}
