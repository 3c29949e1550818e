// DPoP (RFC 9449): a client proves, with a short JWT signed by a key of its own for each request,
// that it holds the key its token is bound to (the token's `cnf.jkt`), so a token copied out of a
// log, a proxy or a page is useless without that key. The key pair is a WebCrypto one: made
// non-extractable (generateDpopKey), its private half can sign but never be read, not even by the
// page's own scripts; a browser keeps it across visits in IndexedDB as it is. ES256 (ECDSA P-256)
// by default, EdDSA (Ed25519) where the runtime has it.
//
// A server may demand a nonce of its own in each proof (§8: 400 or 401 `use_dpop_nonce` with a
// `DPoP-Nonce` header): login, registerKey and createClient retry such an answer once with the
// nonce, and remember the latest nonce each origin gave, per key pair, for the next proof.
import { type Bytes, subtle, utf8 } from './bytes.js'
import { SigningInputError } from './errors.js'
import type { CryptoKeyLike } from './types.js'

/** The JWS algorithms the client signs proofs with: ES256 (ECDSA P-256 and SHA-256) and EdDSA (Ed25519). */
export type DpopAlgorithm = 'ES256' | 'EdDSA'

/** A WebCrypto key pair for DPoP proofs (what generateDpopKey makes, or crypto.subtle.generateKey for ECDSA P-256 or Ed25519). */
export interface DpopKeyPair {
  readonly privateKey: CryptoKeyLike
  readonly publicKey: CryptoKeyLike
}

type Subtle = ReturnType<typeof subtle>
type WebCryptoKey = Parameters<Subtle['sign']>[1]

const GENERATE: Readonly<Record<DpopAlgorithm, { name: string; namedCurve?: string }>> = {
  ES256: { name: 'ECDSA', namedCurve: 'P-256' },
  EdDSA: { name: 'Ed25519' }
}

/**
 * A new key pair for DPoP: the private half not extractable (it signs, and cannot be exported or
 * read by any script), the public half what every proof carries. EdDSA throws where the runtime's
 * WebCrypto has no Ed25519 (older browsers): use ES256 there.
 */
export async function generateDpopKey (algorithm: DpopAlgorithm = 'ES256'): Promise<DpopKeyPair> {
  const params = GENERATE[algorithm]
  if (params === undefined) throw new SigningInputError('algorithm', 'must be "ES256" (the default) or "EdDSA"')
  try {
    return await subtle().generateKey(params, false, ['sign', 'verify']) as unknown as DpopKeyPair
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err)
    throw new SigningInputError('algorithm', `this runtime's WebCrypto cannot make an ${algorithm} key (${reason}): use ES256`)
  }
}

/** base64url, no padding (JWS) */
export function base64url (bytes: Uint8Array): string {
  let binary = ''
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
}

const base64urlJson = (value: unknown): string => base64url(utf8(JSON.stringify(value)))

async function sha256 (bytes: Bytes): Promise<Uint8Array> {
  return new Uint8Array(await subtle().digest('SHA-256', bytes))
}

/** A proof's `ath`: base64url(SHA-256(access token)) */
export async function accessTokenHash (token: string): Promise<string> {
  return base64url(await sha256(utf8(token)))
}

/** What a key pair signs proofs with: its public JWK and thumbprint, read once, and the latest nonce of each origin. */
interface DpopSigner {
  alg: DpopAlgorithm
  sign: { name: string; hash?: string }
  jwk: Record<string, string>
  thumbprint: string
  nonces: Map<string, string>
}

/** one signer per key pair: login, registerKey and a client given the same pair share its nonces */
const signers = new WeakMap<object, Promise<DpopSigner>>()

function algorithmOf (key: CryptoKeyLike): { alg: DpopAlgorithm, sign: DpopSigner['sign'] } {
  const algorithm = key.algorithm as { name: string; namedCurve?: string }
  if (algorithm.name === 'ECDSA' && algorithm.namedCurve === 'P-256') return { alg: 'ES256', sign: { name: 'ECDSA', hash: 'SHA-256' } }
  if (algorithm.name === 'Ed25519') return { alg: 'EdDSA', sign: { name: 'Ed25519' } }
  throw new SigningInputError('dpop', `is a ${algorithm.name}${algorithm.namedCurve === undefined ? '' : ` ${algorithm.namedCurve}`} key pair; ` +
    'DPoP proofs are signed with ECDSA P-256 (ES256) or Ed25519 (EdDSA): make one with generateDpopKey()')
}

async function makeSigner (pair: DpopKeyPair): Promise<DpopSigner> {
  const { privateKey, publicKey } = pair
  if (privateKey.type !== 'private' || publicKey.type !== 'public' || typeof privateKey.algorithm?.name !== 'string' ||
    !Array.isArray(privateKey.usages) || !privateKey.usages.includes('sign')) {
    throw new SigningInputError('dpop', 'must be a WebCrypto key pair, { privateKey, publicKey }, whose private key may sign (generateDpopKey() makes one)')
  }
  const { alg, sign } = algorithmOf(privateKey)
  const exported = await subtle().exportKey('jwk', pair.publicKey as WebCryptoKey) as Record<string, unknown>
  const members = alg === 'ES256' ? ['crv', 'kty', 'x', 'y'] : ['crv', 'kty', 'x']
  const jwk: Record<string, string> = {}
  // RFC 7638: the required members only, in lexicographic order, no whitespace
  for (const name of members) {
    const value = exported[name]
    if (typeof value !== 'string') throw new SigningInputError('dpop', `the public key's JWK has no ${name}`)
    jwk[name] = value
  }
  const thumbprint = base64url(await sha256(utf8(JSON.stringify(jwk))))
  return { alg, sign, jwk, thumbprint, nonces: new Map() }
}

function signerOf (pair: DpopKeyPair): Promise<DpopSigner> {
  if (typeof pair !== 'object' || pair === null || typeof pair.privateKey !== 'object' || typeof pair.publicKey !== 'object') {
    return Promise.reject(new SigningInputError('dpop', 'must be a WebCrypto key pair, { privateKey, publicKey } (generateDpopKey() makes one)'))
  }
  let signer = signers.get(pair)
  if (signer === undefined) {
    signer = makeSigner(pair)
    signers.set(pair, signer)
    signer.catch(() => { signers.delete(pair) })
  }
  return signer
}

/** The RFC 7638 SHA-256 thumbprint of the pair's public key: the `cnf.jkt` a token bound to it carries. */
export async function dpopThumbprint (pair: DpopKeyPair): Promise<string> {
  return (await signerOf(pair)).thumbprint
}

export interface DpopProofInput {
  /** the key pair that signs (and whose public key the proof carries) */
  keyPair: DpopKeyPair
  /** the request's method */
  method: string
  /** the request's URL as sent: its query and fragment are left out of `htu` */
  url: string | URL
  /** the access token sent with the request (its hash becomes `ath`); none at a token endpoint */
  accessToken?: string | undefined
  /** the server's nonce; default: the latest one this origin gave this key pair, if any */
  nonce?: string | undefined
  /** seconds since the epoch; default now */
  iat?: number | undefined
}

/** A DPoP proof (the value of the `DPoP` header) for one request: a new `jti` each time, so never reuse one. */
export async function dpopProof ({ keyPair, method, url, accessToken, nonce, iat }: DpopProofInput): Promise<string> {
  const signer = await signerOf(keyPair)
  const target = new URL(url)
  const payload: Record<string, unknown> = {
    jti: base64url(globalThis.crypto.getRandomValues(new Uint8Array(16))),
    htm: method.toUpperCase(),
    htu: `${target.origin}${target.pathname}`,
    iat: iat ?? Math.floor(Date.now() / 1000)
  }
  if (accessToken !== undefined) payload.ath = await accessTokenHash(accessToken)
  const usedNonce = nonce ?? signer.nonces.get(target.origin)
  if (usedNonce !== undefined) payload.nonce = usedNonce
  const signingInput = `${base64urlJson({ typ: 'dpop+jwt', alg: signer.alg, jwk: signer.jwk })}.${base64urlJson(payload)}`
  const signature = await subtle().sign(signer.sign, keyPair.privateKey as WebCryptoKey, utf8(signingInput))
  return `${signingInput}.${base64url(new Uint8Array(signature))}`
}

/** A response's DPoP-Nonce, remembered for its origin (§8: a server may send a new one on any answer). */
async function rememberNonce (keyPair: DpopKeyPair, url: URL, response: Response): Promise<string | undefined> {
  const nonce = response.headers.get('dpop-nonce')
  if (nonce === null || nonce === '' || !/^[\x21-\x7e]{1,512}$/.test(nonce)) return undefined
  ;(await signerOf(keyPair)).nonces.set(url.origin, nonce)
  return nonce
}

/** Whether the answer asks for a proof with the server's nonce: 401 with a DPoP challenge's `error="use_dpop_nonce"`, or 400 with it in the JSON body. */
async function asksForNonce (response: Response): Promise<boolean> {
  if (response.headers.get('dpop-nonce') === null) return false
  if (response.status === 401) return /error="?use_dpop_nonce"?/i.test(response.headers.get('www-authenticate') ?? '')
  if (response.status !== 400) return false
  try {
    const body = await response.clone().json() as { error?: unknown, code?: unknown }
    return body.error === 'use_dpop_nonce' || body.code === 'USE_DPOP_NONCE'
  } catch {
    return false
  }
}

/**
 * Sends a request with a DPoP proof (`send(proof)` makes the request, its other headers
 * included); an answer asking for a nonce is sent again once, with the nonce it gave. Every
 * answer's DPoP-Nonce is remembered for its origin.
 */
export async function withDpopProof (keyPair: DpopKeyPair, method: string, url: URL, accessToken: string | undefined,
  send: (proof: string) => Promise<Response>): Promise<Response> {
  const first = await send(await dpopProof({ keyPair, method, url, accessToken }))
  const nonce = await rememberNonce(keyPair, url, first)
  if (nonce === undefined || !(await asksForNonce(first))) return first
  // the refused answer's body is not read by anyone: let its connection go
  await first.body?.cancel().catch(() => {})
  const second = await send(await dpopProof({ keyPair, method, url, accessToken, nonce }))
  await rememberNonce(keyPair, url, second)
  return second
}
