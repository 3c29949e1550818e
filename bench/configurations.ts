// The configurations a run measures, each what the load goes to and how it is told who calls:
// the example service or a proxy without auth (a token of the real size, the identity header
// keygate would set), keygate (a user logged in, a fresh key registered through its API, or an
// IdP's token), or keygate taking a signed agent's GETs (no login, no key to register), or
// keygate's own token on a bearer route, plain or bound to a DPoP key (no key to register).
import { randomBytes } from 'node:crypto'
import type { ConfigId } from './args.js'
import { dpopLogin, type DpopAlgorithm } from './dpop.js'
import type { BenchIssuer } from './idp.js'
import type { MeasureOptions } from './measure.js'
import type { Destination } from './scenarios.js'
import { agentKeyId, signOne, type BenchKey } from './signing.js'

export interface BenchConfig {
  id: ConfigId | 't'
  label: string
  url: string
  /** which process "CPU per request" is measured on */
  cpuOf: string | null
  destination: Destination
  cpu: MeasureOptions['cpu']
  /** keygate: log in again (a fresh token) */
  login?: () => Promise<void>
  tokenAt: number
  lastRps: number | undefined
}

export const LABELS: Record<ConfigId, string> = {
  a: 'example service direct',
  b: 'fastify + http-proxy, no auth',
  c: 'keygate, Redis store',
  d: 'keygate, embedded store',
  e: 'keygate, public route (no auth)',
  f: 'keygate, Redis, one per-key limit',
  g: 'nginx, no auth',
  h: 'nginx asking keygate (decision), embedded store',
  i: 'keygate, Redis store, an IdP\'s token',
  j: 'keygate, Redis store, a signed agent',
  k: 'keygate, public MCP route (each tools/call read and judged)',
  l: 'keygate, Redis, bearer route, keygate\'s token as Bearer',
  m: 'keygate, Redis, bearer route, DPoP-bound token, ES256 proofs',
  n: 'keygate, Redis, bearer route, DPoP-bound token, EdDSA proofs'
}

// ---- keygate's API, for setting up a target ----

async function postJson (url: string, body: unknown, token?: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token !== undefined && { authorization: `Bearer ${token}` }) },
    body: JSON.stringify(body)
  })
  const text = await res.text()
  let json: Record<string, unknown> = {}
  try { json = JSON.parse(text) as Record<string, unknown> } catch { json = { text } }
  return { status: res.status, json }
}

async function login (url: string, username: string, password: string): Promise<string> {
  const { status, json } = await postJson(`${url}/v1/auth/token`, { username, password })
  if (status !== 200 || typeof json.token !== 'string') throw new Error(`login as ${username} at ${url} failed: ${status} ${JSON.stringify(json)}`)
  return json.token
}

async function registerKey (url: string, token: string, key: BenchKey, name: string): Promise<void> {
  const { status, json } = await postJson(`${url}/v1/api-keys`, { name, publicKey: key.publicPem, signature: signOne(key, name) }, token)
  if (status !== 201) throw new Error(`registering the bench key at ${url} failed: ${status} ${JSON.stringify(json)}`)
}

// ---- the configurations ----

/** How a configuration gets its bearer token: keygate's login with a password, or an IdP's token (i). */
type SignIn = { username: string; password: string } | { idp: BenchIssuer; subject: string }

/** keygate: signs in (c, d, f, h, i, or --url) and registers the bench's key for that user */
export async function keygateConfig (
  id: BenchConfig['id'],
  label: string,
  url: string,
  signIn: SignIn,
  key: BenchKey,
  cpu: MeasureOptions['cpu'],
  cpuOf: string | null,
  /** where keygate's own API is (logins, keys), when the load goes elsewhere (h: to nginx) */
  apiUrl = url
): Promise<BenchConfig> {
  const token = async (): Promise<string> => 'idp' in signIn ? await signIn.idp.mint(signIn.subject) : await login(apiUrl, signIn.username, signIn.password)
  const config: BenchConfig = {
    id,
    label,
    url,
    cpuOf,
    cpu,
    destination: {
      kind: 'keygate', token: await token(), identityUser: undefined, credentials: 'idp' in signIn ? undefined : signIn, postCursor: 0
    },
    tokenAt: Date.now(),
    lastRps: undefined
  }
  config.login = async () => {
    config.destination.token = await token()
    config.tokenAt = Date.now()
  }
  await registerKey(apiUrl, config.destination.token, key, `bench-${randomBytes(6).toString('hex')}`)
  return config
}

/** no auth (a, b, e, g, k): sent with the identity header keygate would have set, which the example service requires */
export function directConfig (id: 'a' | 'b' | 'e' | 'g' | 'k', url: string, identityUser: string, cpu: MeasureOptions['cpu'], cpuOf: string): BenchConfig {
  return {
    id,
    label: LABELS[id],
    url,
    cpuOf,
    cpu,
    tokenAt: Date.now(),
    lastRps: undefined,
    destination: { kind: id === 'a' ? 'direct' : 'bare', token: '', identityUser, credentials: undefined, postCursor: 0 }
  }
}

/** (j): no login and no key to register: the agent is known by its signature, its key pinned in the agents file */
export function agentConfig (label: string, url: string, cpuOf: string, cpu: MeasureOptions['cpu'], key: BenchKey): BenchConfig {
  return {
    id: 'j',
    label,
    url,
    cpuOf,
    cpu,
    tokenAt: Date.now(),
    lastRps: undefined,
    destination: {
      kind: 'agent',
      token: '',
      identityUser: undefined,
      credentials: undefined,
      postCursor: 0,
      // signed for the Host autocannon sends: the gateway's host:port
      agent: { authority: new URL(url).host, keyid: agentKeyId(key), signed: [], cursor: 0 }
    }
  }
}

/**
 * (l, m, n: --scenario dpop): keygate's own token on a bearer route, logged in without a proof (l:
 * a bearer token) or with an ES256 (m) or EdDSA (n) proof (a token bound to that key, whose GETs
 * each carry a new proof). No key to register: a bearer route checks no signature.
 */
export async function dpopConfig (id: 'l' | 'm' | 'n', label: string, url: string, signIn: { username: string; password: string },
  cpu: MeasureOptions['cpu'], cpuOf: string): Promise<BenchConfig> {
  const alg: DpopAlgorithm | undefined = id === 'm' ? 'ES256' : id === 'n' ? 'EdDSA' : undefined
  const destination: Destination = { kind: 'keygate', token: '', identityUser: undefined, credentials: undefined, postCursor: 0 }
  const signInNow = async (): Promise<void> => {
    if (alg === undefined) {
      destination.token = await login(url, signIn.username, signIn.password)
      return
    }
    // the same key again on a new login: a new token, so new proofs (their ath is the token's)
    const { token, proofs } = await dpopLogin(url, signIn.username, signIn.password, alg, destination.dpop)
    destination.token = token
    destination.dpop = proofs
  }
  await signInNow()
  const config: BenchConfig = { id, label, url, cpuOf, cpu, destination, tokenAt: Date.now(), lastRps: undefined }
  config.login = async () => {
    await signInNow()
    config.tokenAt = Date.now()
  }
  return config
}
