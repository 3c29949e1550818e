// The keys of a JWK Set as keygate believes them: which JWS algorithms each key may serve (by its
// kty, crv, alg, use and key_ops), none with private members, RSA of 2048 bits or more, each
// imported once per algorithm; a kid (or id) naming two keys is ambiguous, and neither is used.
// Those left out are listed with why. Fetched sets (remote-key-set.ts) and pinned ones alike.
import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto'
import { importJWK, type CryptoKey, type JWK } from 'jose'
import { jwkThumbprint } from '../lib/jwk-thumbprint.js'

/** RSA keys under this are left out: jose would refuse them at verification anyway, per request */
export const MIN_RSA_BITS = 2048

/** The key each JWS algorithm takes; EdDSA is Ed25519 only (no Ed448: WebCrypto's support varies). */
const KEY_TYPE_OF: Readonly<Record<string, { kty: 'RSA' | 'EC' | 'OKP'; crv?: string }>> = {
  RS256: { kty: 'RSA' },
  RS384: { kty: 'RSA' },
  RS512: { kty: 'RSA' },
  PS256: { kty: 'RSA' },
  PS384: { kty: 'RSA' },
  PS512: { kty: 'RSA' },
  ES256: { kty: 'EC', crv: 'P-256' },
  ES384: { kty: 'EC', crv: 'P-384' },
  ES512: { kty: 'EC', crv: 'P-521' },
  EdDSA: { kty: 'OKP', crv: 'Ed25519' },
  Ed25519: { kty: 'OKP', crv: 'Ed25519' }
}
export const SUPPORTED_ALGORITHMS: readonly string[] = Object.keys(KEY_TYPE_OF)

/** JWK members that hold private (or secret) key material: a JWK with any of them is never used. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const
/** the members that make each type's public key: only these reach importJWK */
const PUBLIC_MEMBERS = { RSA: ['n', 'e'], EC: ['crv', 'x', 'y'], OKP: ['crv', 'x'] } as const

/**
 * One usable key of the set as published, by its id: its `kid`, or (an agent's key directory,
 * where keyid is the key's RFC 7638 JWK thumbprint) its thumbprint. `nbf` and `exp`, when the JWK
 * carries them (seconds), bound when it is used.
 */
export interface PublishedKey {
  id: string
  /** RFC 7638 thumbprint (SHA-256, base64url) of its public members */
  thumbprint: string
  /** the public members only */
  jwk: JWK
  keyObject: KeyObject
  nbf?: number
  exp?: number
}

/** What a set's published keys are looked up by with publishedKey(). */
export type KeyIds = 'kid' | 'thumbprint'

/** The keys of one successful fetch, imported once, for each algorithm they serve. */
export interface KeyTable {
  /** by kid, then alg; null where one kid names two keys for one alg: ambiguous, so neither is used */
  byKid: Map<string, Map<string, CryptoKey | null>>
  /** every key (with a kid or without) by alg: a token without a kid takes the one key there, if only one */
  byAlg: Map<string, CryptoKey[]>
  /** by the set's key ids (kid or thumbprint); null where one id names two keys: ambiguous, so neither is used */
  published: Map<string, PublishedKey | null>
  count: number
}

/** a JWK's nbf or exp: seconds, when it is a number */
const secondsMember = (jwk: Record<string, unknown>, name: 'nbf' | 'exp'): number | undefined =>
  typeof jwk[name] === 'number' && Number.isFinite(jwk[name]) ? jwk[name] : undefined

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** The algorithms a JWK may serve, or why it is left out. */
function algorithmsOf (jwk: Record<string, unknown>, allowed: readonly string[]): string[] | string {
  if (typeof jwk.kty !== 'string' || !['RSA', 'EC', 'OKP'].includes(jwk.kty)) return `kty ${JSON.stringify(jwk.kty)} is not RSA, EC or OKP`
  const privateMember = PRIVATE_MEMBERS.find((member) => member in jwk)
  if (privateMember !== undefined) return `carries private key material ("${privateMember}"): a published key must be public only`
  if (jwk.use !== undefined && jwk.use !== 'sig') return `use ${JSON.stringify(jwk.use)} is not "sig"`
  if (jwk.key_ops !== undefined && !(Array.isArray(jwk.key_ops) && jwk.key_ops.includes('verify'))) return 'key_ops does not include "verify"'
  if (jwk.kid !== undefined && (typeof jwk.kid !== 'string' || jwk.kid === '')) return 'kid is not a non-empty string'
  if (jwk.kty === 'RSA' && typeof jwk.n === 'string' && Buffer.from(jwk.n, 'base64url').length * 8 < MIN_RSA_BITS) {
    return `an RSA key under ${MIN_RSA_BITS} bits`
  }
  const fits = (alg: string): boolean => KEY_TYPE_OF[alg]?.kty === jwk.kty && (KEY_TYPE_OF[alg]?.crv === undefined || KEY_TYPE_OF[alg]?.crv === jwk.crv)
  if (jwk.alg !== undefined) {
    if (typeof jwk.alg !== 'string' || !allowed.includes(jwk.alg)) return `alg ${JSON.stringify(jwk.alg)} is not allowed (${allowed.join(', ')})`
    if (!fits(jwk.alg)) return `alg ${jwk.alg} does not fit its kty ${jwk.kty}${jwk.crv === undefined ? '' : ` and crv ${String(jwk.crv)}`}`
    return [jwk.alg]
  }
  const algorithms = allowed.filter(fits)
  if (algorithms.length > 0) return algorithms
  return `no allowed algorithm (${allowed.join(', ')}) takes a ${jwk.kty} key${jwk.crv === undefined ? '' : ` on ${String(jwk.crv)}`}`
}

/** Imports each usable key once for each algorithm it serves; says which keys were left out and why. */
export async function keyTableOf (keys: unknown[], allowed: readonly string[], keyIds: KeyIds): Promise<{ table: KeyTable; ignored: string[] }> {
  const table: KeyTable = { byKid: new Map(), byAlg: new Map(), published: new Map(), count: 0 }
  const ignored: string[] = []
  for (const [index, jwk] of keys.entries()) {
    const label = isRecord(jwk) && typeof jwk.kid === 'string' ? `kid ${JSON.stringify(jwk.kid)}` : `keys[${index}]`
    if (!isRecord(jwk)) {
      ignored.push(`${label}: not an object`)
      continue
    }
    const algorithms = algorithmsOf(jwk, allowed)
    if (typeof algorithms === 'string') {
      ignored.push(`${label}: ${algorithms}`)
      continue
    }
    const kty = jwk.kty as keyof typeof PUBLIC_MEMBERS
    const publicJwk: JWK = { kty }
    for (const member of PUBLIC_MEMBERS[kty]) if (typeof jwk[member] === 'string') publicJwk[member] = jwk[member]
    const kid = typeof jwk.kid === 'string' ? jwk.kid : undefined
    let imported = 0
    for (const alg of algorithms) {
      let key: CryptoKey | Uint8Array
      try {
        key = await importJWK(publicJwk, alg)
      } catch (err) {
        ignored.push(`${label}: does not import for ${alg}: ${(err as Error).message}`)
        continue
      }
      if (key instanceof Uint8Array) continue
      imported++
      const sameAlg = table.byAlg.get(alg)
      if (sameAlg === undefined) table.byAlg.set(alg, [key])
      else sameAlg.push(key)
      if (kid === undefined) continue
      const byAlg = table.byKid.get(kid) ?? new Map<string, CryptoKey | null>()
      table.byKid.set(kid, byAlg)
      if (byAlg.has(alg)) {
        if (byAlg.get(alg) !== null) ignored.push(`kid ${JSON.stringify(kid)}: names more than one key for ${alg}: neither is used for it`)
        byAlg.set(alg, null)
      } else {
        byAlg.set(alg, key)
      }
    }
    if (imported === 0) continue
    table.count++
    let keyObject: KeyObject
    try {
      keyObject = createPublicKey({ key: publicJwk as JsonWebKey, format: 'jwk' })
    } catch (err) {
      ignored.push(`${label}: does not import: ${(err as Error).message}`)
      continue
    }
    const thumbprint = jwkThumbprint(publicJwk as Record<string, unknown>)
    if (thumbprint === undefined) {
      ignored.push(`${label}: a key type without an RFC 7638 thumbprint`)
      continue
    }
    const id = keyIds === 'thumbprint' ? thumbprint : kid
    if (id === undefined) continue
    const nbf = secondsMember(jwk, 'nbf')
    const exp = secondsMember(jwk, 'exp')
    if (table.published.has(id)) {
      if (table.published.get(id) !== null) ignored.push(`${keyIds} ${JSON.stringify(id)}: names more than one key: neither is used by it`)
      table.published.set(id, null)
    } else {
      table.published.set(id, { id, thumbprint, jwk: publicJwk, keyObject, ...(nbf !== undefined && { nbf }), ...(exp !== undefined && { exp }) })
    }
  }
  return { table, ignored }
}

/**
 * The usable keys of a JWK Set given rather than fetched (an operator's pinned keys), checked as a
 * fetched set's are: those left out, and why, in `ignored`.
 */
export async function publishedKeysOf (keys: unknown[], algorithms: readonly string[], keyIds: KeyIds): Promise<{ keys: PublishedKey[]; ignored: string[] }> {
  const { table, ignored } = await keyTableOf(keys, algorithms, keyIds)
  return { keys: [...table.published.values()].filter((key): key is PublishedKey => key !== null), ignored }
}
