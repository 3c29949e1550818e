// What the load generator sends: autocannon request lists per scenario and target, built from
// requests signed beforehand. GETs may repeat (replay protection covers only POST, PUT, PATCH,
// DELETE), so a fixed pool of distinct signed GETs is rotated; every signed POST is used once per
// store, taken from a pool signed ahead of each measurement.
import { randomInt } from 'node:crypto'
import type autocannon from 'autocannon'
import type { RejectKind, Scenario } from './args.js'
import { generateBenchKey, signingString, signOne, unknownApiKey, type BenchKey, type SigningPool } from './signing.js'

export const CLIENTS_PATH = '/v1/clients/'
export const TOKEN_PATH = '/v1/auth/token'
export const API_KEYS_PATH = '/v1/api-keys'
/** register scenario: this many distinct keys, each registered once and then refused as a duplicate */
export const REGISTRATION_POOL_SIZE = 64
/** distinct signed GETs rotated through (identical ones would do; distinct ones defeat any cache of verified signatures) */
const GET_POOL_SIZE = 64
/** timestamps are good for 15 minutes either way; re-sign well before */
const MAX_SIGNATURE_AGE_MS = 10 * 60 * 1000
/** mix: one POST after this many GETs */
const MIX_GETS_PER_POST = 4
const REJECT_SLOTS = 100
/** the refusal kinds, in the order --reject-kind all takes them */
const REJECT_KIND_ORDER: RejectKind[] = ['bad-signature', 'stale', 'unknown-key']

/** What a target needs to be sent a request. */
export interface Destination {
  kind: 'direct' | 'bare' | 'keygate'
  /** a bearer token (keygate), or a stand-in of the same size */
  token: string
  /** direct and bare: the identity header keygate would have set, which the example service requires */
  identityUser: string | undefined
  /** keygate: the login the token scenario sends */
  credentials: { username: string; password: string } | undefined
  /** keygate: how far this store has used the POST pool (each signed POST is accepted once per store) */
  postCursor: number
}

interface Signed {
  timestamp: string
  signature: string
  signedAt: number
}

interface SignedPost extends Signed {
  body: string
}

export interface SignedMaterial {
  key: BenchKey
  gets: Signed[]
  /** reject scenario: a valid signature over another timestamp, a stale timestamp, an unknown key */
  badSignature: Signed
  stale: Signed
  unknownKey: string
  posts: SignedPost[]
  /** register scenario: registration bodies, each a fresh key proven by a signature over its name */
  registrations: string[]
  /** POSTs signed during a measurement because the pool ran out (it then slows the generator) */
  inlineSigned: number
}

// A per-run component keeps tax_ids distinct from any earlier run's on a long-lived upstream.
const runTag = String(randomInt(10_000_000, 99_999_999))
let postSerial = 0

function clientBody (): string {
  const n = postSerial++
  return JSON.stringify({ name: `Bench Client ${n}`, email: `bench${n}@example.com`, tax_id: `${runTag}${String(n).padStart(10, '0')}` })
}

async function signGets (pool: SigningPool, count: number): Promise<Signed[]> {
  const now = Date.now()
  const timestamps = Array.from({ length: count }, (_, i) => String(now - i))
  const signatures = await pool.sign(timestamps.map((ts) => signingString(ts, 'GET', CLIENTS_PATH)))
  return timestamps.map((timestamp, i) => ({ timestamp, signature: signatures[i] as string, signedAt: now }))
}

export async function createSignedMaterial (key: BenchKey, pool: SigningPool): Promise<SignedMaterial> {
  const now = Date.now()
  const staleTs = String(now - 20 * 60 * 1000)
  const otherTs = String(now - 1)
  return {
    key,
    gets: await signGets(pool, GET_POOL_SIZE),
    badSignature: { timestamp: String(now), signature: signOne(key, signingString(otherTs, 'GET', CLIENTS_PATH)), signedAt: now },
    stale: { timestamp: staleTs, signature: signOne(key, signingString(staleTs, 'GET', CLIENTS_PATH)), signedAt: now },
    unknownKey: unknownApiKey(),
    posts: [],
    registrations: [],
    inlineSigned: 0
  }
}

/** register scenario: `count` registration bodies of fresh RSA-2048 keys (made on libuv's threads). */
export async function ensureRegistrations (material: SignedMaterial, count: number): Promise<void> {
  if (material.registrations.length >= count) return
  const keys = await Promise.all(Array.from({ length: count - material.registrations.length }, async () => await generateBenchKey()))
  for (const key of keys) {
    const name = `bench-${key.apiKey.slice(0, 12)}`
    material.registrations.push(JSON.stringify({ name, publicKey: key.publicPem, signature: signOne(key, name) }))
  }
}

/** Before a measurement: fresh GET signatures when they near the end of their 15 minutes. */
export async function refreshGets (material: SignedMaterial, pool: SigningPool): Promise<void> {
  const oldest = material.gets[0]
  if (oldest !== undefined && Date.now() - oldest.signedAt < MAX_SIGNATURE_AGE_MS) return
  material.gets = await signGets(pool, GET_POOL_SIZE)
  const now = Date.now()
  const otherTs = String(now - 1)
  material.badSignature = { timestamp: String(now), signature: signOne(material.key, signingString(otherTs, 'GET', CLIENTS_PATH)), signedAt: now }
}

/** Before a measurement: at least `count` unused, fresh signed POSTs past `destination`'s cursor. */
export async function ensurePosts (material: SignedMaterial, pool: SigningPool, destination: Destination, count: number): Promise<void> {
  const now = Date.now()
  while (destination.postCursor < material.posts.length && now - (material.posts[destination.postCursor] as SignedPost).signedAt > MAX_SIGNATURE_AGE_MS) {
    destination.postCursor++
  }
  const missing = destination.postCursor + count - material.posts.length
  if (missing <= 0) return
  const timestamp = String(now)
  const bodies = Array.from({ length: missing }, clientBody)
  const signatures = await pool.sign(bodies.map((body) => signingString(timestamp, 'POST', CLIENTS_PATH, body)))
  bodies.forEach((body, i) => material.posts.push({ timestamp, body, signature: signatures[i] as string, signedAt: now }))
}

function takePost (material: SignedMaterial, destination: Destination): SignedPost {
  const next = material.posts[destination.postCursor]
  if (next !== undefined) {
    destination.postCursor++
    return next
  }
  // The pool ran out: sign here, which is slow but keeps every POST distinct (a repeat would be refused).
  material.inlineSigned++
  const timestamp = String(Date.now())
  const body = clientBody()
  const post = { timestamp, body, signature: signOne(material.key, signingString(timestamp, 'POST', CLIENTS_PATH, body)), signedAt: Date.now() }
  material.posts.push(post)
  destination.postCursor = material.posts.length
  return post
}

function authHeaders (destination: Destination, apiKey: string, signed: Signed): Record<string, string> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${destination.token}`,
    'x-api-key': apiKey,
    'x-api-timestamp': signed.timestamp,
    'x-api-signature': signed.signature
  }
  if (destination.identityUser !== undefined) headers['x-gateway-user'] = destination.identityUser
  return headers
}

function getRequest (destination: Destination, material: SignedMaterial, signed: Signed, apiKey = material.key.apiKey): autocannon.Request {
  return { method: 'GET', path: CLIENTS_PATH, headers: authHeaders(destination, apiKey, signed) }
}

function postRequest (destination: Destination, material: SignedMaterial): autocannon.Request {
  return {
    method: 'POST',
    path: CLIENTS_PATH,
    setupRequest: (request) => {
      // Without keygate nothing checks signatures: a fresh body (the service refuses a repeated
      // tax_id) under a signature of the right size will do.
      const signed = destination.kind === 'keygate'
        ? takePost(material, destination)
        : { ...(material.gets[0] as Signed), body: clientBody() }
      return { ...request, headers: { ...authHeaders(destination, material.key.apiKey, signed), 'content-type': 'application/json' }, body: signed.body }
    }
  }
}

/** POST requests per request sent, for sizing the pool. */
export function postShare (scenario: Scenario): number {
  if (scenario === 'post') return 1
  if (scenario === 'mix') return 1 / (MIX_GETS_PER_POST + 1)
  return 0
}

/** A fresh request list for one autocannon run (autocannon keeps state on the objects). */
export function buildRequests (
  scenario: Scenario,
  destination: Destination,
  material: SignedMaterial,
  rejectShare: number,
  rejectKind: RejectKind = 'all'
): autocannon.Request[] {
  const gets = material.gets
  const get = (i: number): autocannon.Request => getRequest(destination, material, gets[i % gets.length] as Signed)
  switch (scenario) {
    case 'get':
      return gets.map((_, i) => get(i))
    case 'flood':
      // the good traffic; the flood itself (floodHeaders) is sent by another process
      return gets.map((_, i) => get(i))
    case 'post':
      return [postRequest(destination, material)]
    case 'mix':
      return gets.flatMap((_, i) => (i + 1) % MIX_GETS_PER_POST === 0 ? [get(i), postRequest(destination, material)] : [get(i)])
    case 'token': {
      if (destination.credentials === undefined) throw new Error('the token scenario needs keygate')
      return [{
        method: 'POST',
        path: TOKEN_PATH,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(destination.credentials)
      }]
    }
    case 'register':
      if (destination.kind !== 'keygate') throw new Error('the register scenario needs keygate')
      return material.registrations.map((body) => ({
        method: 'POST',
        path: API_KEYS_PATH,
        headers: { authorization: `Bearer ${destination.token}`, 'content-type': 'application/json' },
        body
      }))
    case 'reject': {
      // Spread the refused requests evenly over the slots; their kinds take turns.
      const requests: autocannon.Request[] = []
      let bad = 0
      for (let i = 0; i < REJECT_SLOTS; i++) {
        if (Math.floor((i + 1) * rejectShare) > Math.floor(i * rejectShare)) {
          const kind = rejectKind === 'all' ? bad++ % 3 : REJECT_KIND_ORDER.indexOf(rejectKind)
          requests.push(kind === 0
            ? getRequest(destination, material, material.badSignature)
            : kind === 1
              ? getRequest(destination, material, material.stale)
              : getRequest(destination, material, gets[i % gets.length] as Signed, material.unknownKey))
        } else {
          requests.push(get(i))
        }
      }
      return requests
    }
  }
}

/** flood scenario: the headers of the flood's one request, a signed GET whose signature is over other bytes (the same key and token) */
export function floodHeaders (destination: Destination, material: SignedMaterial): Record<string, string> {
  return authHeaders(destination, material.key.apiKey, material.badSignature)
}
