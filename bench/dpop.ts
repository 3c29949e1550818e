// --scenario dpop: keygate's own tokens bound to a key (RFC 9449), and the proofs the load
// generator sends with them. The bench is its own DPoP client, with node:crypto (an independent
// one beside @keygate/client's WebCrypto code): it makes an ES256 (P-256) or EdDSA (Ed25519) key,
// logs in with a proof (POST /v1/auth/token answers a token with cnf.jkt), and sends each GET with
// `Authorization: DPoP <token>` and a proof of its own: a new jti, iat, htm GET, htu the URL it
// calls, ath the token's hash. keygate takes each jti once, so a proof is good for one request: the
// proofs are made before each measurement, as many as it may send (one signature each, about as
// costly to the generator as to keygate, so never during the timed window unless the pool runs
// out), and each taken once, as (j)'s agent-signed GETs are.
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto'
import { CLIENTS_PATH, TOKEN_PATH } from './scenarios.js'

export const DPOP_ALGORITHMS = ['ES256', 'EdDSA'] as const
export type DpopAlgorithm = typeof DPOP_ALGORITHMS[number]

/** (m), (n): a key, the token bound to it, and the proofs for one gateway's GETs, each used once, taken in turn from `cursor` */
export interface DpopProofs {
  alg: DpopAlgorithm
  key: KeyObject
  /** base64url of the proofs' JOSE header (typ, alg, jwk): the same for every proof of the key */
  header: string
  /** the RFC 7638 thumbprint of the public key: the token's cnf.jkt */
  thumbprint: string
  /** the GETs' URL as the load generator addresses it (the gateway's origin and CLIENTS_PATH) */
  htu: string
  /** base64url SHA-256 of the token the proofs go with; the pool is made again when the token changes */
  ath: string
  proofs: string[]
  cursor: number
  /** made while a measurement ran because the pool was used up (which slows the generator) */
  inlineMade: number
}

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')

/** A new key pair of `alg` and the public JWK a proof carries (RFC 7638's members, in order) with its thumbprint. */
export function dpopKey (alg: DpopAlgorithm): { key: KeyObject; jwk: Record<string, string>; thumbprint: string } {
  const { privateKey, publicKey } = alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519')
  const exported = publicKey.export({ format: 'jwk' })
  const jwk: Record<string, string> = alg === 'ES256'
    ? { crv: String(exported.crv), kty: String(exported.kty), x: String(exported.x), y: String(exported.y) }
    : { crv: String(exported.crv), kty: String(exported.kty), x: String(exported.x) }
  return { key: privateKey, jwk, thumbprint: createHash('sha256').update(JSON.stringify(jwk)).digest('base64url') }
}

/** One proof: a new jti, iat now; with `ath`, for a request carrying that token. */
function proofOf (alg: DpopAlgorithm, key: KeyObject, header: string, htm: string, htu: string, ath?: string): string {
  const payload = b64({ jti: randomBytes(16).toString('base64url'), htm, htu, iat: Math.floor(Date.now() / 1000), ...(ath !== undefined && { ath }) })
  const input = `${header}.${payload}`
  const signature = alg === 'ES256'
    ? sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' })
    : sign(null, Buffer.from(input), key)
  return `${input}.${signature.toString('base64url')}`
}

const athOf = (token: string): string => createHash('sha256').update(token).digest('base64url')

/**
 * Logs in at keygate (`url`) with a proof by a new `alg` key: the token bound to it (tokenType
 * "DPoP"), and the state that makes the GETs' proofs.
 */
export async function dpopLogin (url: string, username: string, password: string, alg: DpopAlgorithm,
  known?: DpopProofs): Promise<{ token: string; proofs: DpopProofs }> {
  const made = known === undefined ? dpopKey(alg) : undefined
  const key = known?.key ?? (made as ReturnType<typeof dpopKey>).key
  const header = known?.header ?? b64({ typ: 'dpop+jwt', alg, jwk: made?.jwk })
  const res = await fetch(`${url}${TOKEN_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', dpop: proofOf(alg, key, header, 'POST', `${url}${TOKEN_PATH}`) },
    body: JSON.stringify({ username, password })
  })
  const json = await res.json() as { token?: unknown; tokenType?: unknown }
  if (res.status !== 200 || typeof json.token !== 'string' || json.tokenType !== 'DPoP') {
    throw new Error(`logging in with an ${alg} DPoP proof at ${url} failed: ${res.status} ${JSON.stringify(json)}`)
  }
  const proofs: DpopProofs = {
    alg,
    key,
    header,
    thumbprint: known?.thumbprint ?? (made as ReturnType<typeof dpopKey>).thumbprint,
    htu: `${url}${CLIENTS_PATH}`,
    ath: athOf(json.token),
    proofs: [],
    cursor: 0,
    inlineMade: known?.inlineMade ?? 0
  }
  return { token: json.token, proofs }
}

/** Before a measurement: `count` fresh proofs for the GETs (the earlier ones dropped: their iat ages). */
export function makeDpopProofs (state: DpopProofs, count: number): void {
  state.proofs = Array.from({ length: count }, () => proofOf(state.alg, state.key, state.header, 'GET', state.htu, state.ath))
  state.cursor = 0
}

/** The next unused proof; made here if the pool ran out (slow, but a proof sent twice would be refused as a replay). */
export function takeDpopProof (state: DpopProofs): string {
  const next = state.proofs[state.cursor]
  if (next !== undefined) {
    state.cursor++
    return next
  }
  state.inlineMade++
  return proofOf(state.alg, state.key, state.header, 'GET', state.htu, state.ath)
}
