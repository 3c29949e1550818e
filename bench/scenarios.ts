// What the load generator sends: autocannon request lists per scenario and target, built from
// requests signed beforehand. GETs may repeat (replay protection covers only POST, PUT, PATCH,
// DELETE), so a fixed pool of distinct signed GETs is rotated; every signed POST is used once per
// store, taken from a pool signed ahead of each measurement. A signed agent's GETs (j) are good for
// one request each (keygate remembers every agent signature's nonce), so they are taken like POSTs.
import { randomBytes, randomInt } from 'node:crypto'
import type autocannon from 'autocannon'
import type { RejectKind, Scenario } from './args.js'
import { takeDpopProof, type DpopProofs } from './dpop.js'
import {
  agentToSign, encodingOf, generateBenchKey, signOne, toSign, unknownApiKey, type BenchKey, type BenchScheme, type SigningPool
} from './signing.js'

export const CLIENTS_PATH = '/v1/clients/'
export const TOKEN_PATH = '/v1/auth/token'
export const API_KEYS_PATH = '/v1/api-keys'
/** --scenario mcp: the MCP server's one endpoint */
export const MCP_PATH = '/mcp'
/** --scenario mcp: distinct tools/calls rotated through (ids and tools differ, as an agent's calls do) */
const MCP_CALL_POOL_SIZE = 64
/** --scenario mcp: the tools called, each allowed by a glob or an exact name of k's policy (gateway-files.ts) */
const MCP_TOOLS = ['search_issues', 'get_issue', 'search_code', 'list_issues'] as const
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
  /** agent: keygate, its route taking signed agents (j): no token, each GET signed by the agent for one request */
  kind: 'direct' | 'bare' | 'keygate' | 'agent'
  /** a bearer token (keygate), or a stand-in of the same size */
  token: string
  /** direct and bare: the identity header keygate would have set, which the example service requires */
  identityUser: string | undefined
  /** keygate: the login the token scenario sends */
  credentials: { username: string; password: string } | undefined
  /** keygate: how far this store has used the POST pool (each signed POST is accepted once per store) */
  postCursor: number
  /** agent: its GETs to this gateway, signed ahead */
  agent?: AgentGets
  /** --scenario dpop, (m) and (n): the token is bound to this key, and each GET carries a new proof by it (l: none, a plain bearer token) */
  dpop?: DpopProofs
}

/** (j): the agent's GETs to one gateway (signed for its host:port), each used once, taken in turn from `cursor` */
export interface AgentGets {
  authority: string
  keyid: string
  signed: Signed[]
  cursor: number
}

interface Signed {
  /** the signature's headers, in the scheme of the run (X-API-*, or Signature-Input and Signature) */
  headers: Record<string, string>
  signedAt: number
}

interface SignedPost extends Signed {
  body: string
}

export interface SignedMaterial {
  key: BenchKey
  scheme: BenchScheme
  gets: Signed[]
  /** reject scenario: a valid signature over another timestamp, a stale timestamp, an unknown key */
  badSignature: Signed
  stale: Signed
  unknownKey: Signed
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

const nonce = (): string => randomBytes(12).toString('base64url')

/** Signed here, one at a time (a few per run): `apiKey` another key's for an unknown-key request. */
function signNow (key: BenchKey, scheme: BenchScheme, timeMs: number, apiKey = key.apiKey): Signed {
  const request = toSign(scheme, key, apiKey, 'GET', CLIENTS_PATH, undefined, timeMs, nonce())
  return { headers: request.headers(signOne(key, request.data, encodingOf(scheme))), signedAt: Date.now() }
}

/** A signature that does not verify: made over another time than the one the headers carry. */
function badSignature (key: BenchKey, scheme: BenchScheme, now: number): Signed {
  const other = toSign(scheme, key, key.apiKey, 'GET', CLIENTS_PATH, undefined, now - 2000, nonce())
  const sent = toSign(scheme, key, key.apiKey, 'GET', CLIENTS_PATH, undefined, now, nonce())
  return { headers: sent.headers(signOne(key, other.data, encodingOf(scheme))), signedAt: now }
}

async function signGets (key: BenchKey, scheme: BenchScheme, pool: SigningPool, count: number): Promise<Signed[]> {
  const now = Date.now()
  const requests = Array.from({ length: count }, (_, i) => toSign(scheme, key, key.apiKey, 'GET', CLIENTS_PATH, undefined, now - i, nonce()))
  const signatures = await pool.sign(requests.map((request) => request.data))
  return requests.map((request, i) => ({ headers: request.headers(signatures[i] as string), signedAt: now }))
}

export async function createSignedMaterial (key: BenchKey, scheme: BenchScheme, pool: SigningPool): Promise<SignedMaterial> {
  const now = Date.now()
  return {
    key,
    scheme,
    gets: await signGets(key, scheme, pool, GET_POOL_SIZE),
    badSignature: badSignature(key, scheme, now),
    stale: signNow(key, scheme, now - 20 * 60 * 1000),
    unknownKey: signNow(key, scheme, now, unknownApiKey()),
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
  material.gets = await signGets(material.key, material.scheme, pool, GET_POOL_SIZE)
  const now = Date.now()
  material.badSignature = badSignature(material.key, material.scheme, now)
  material.unknownKey = signNow(material.key, material.scheme, now, unknownApiKey())
}

/** Before a measurement: at least `count` unused, fresh signed POSTs past `destination`'s cursor. */
export async function ensurePosts (material: SignedMaterial, pool: SigningPool, destination: Destination, count: number): Promise<void> {
  const now = Date.now()
  while (destination.postCursor < material.posts.length && now - (material.posts[destination.postCursor] as SignedPost).signedAt > MAX_SIGNATURE_AGE_MS) {
    destination.postCursor++
  }
  const missing = destination.postCursor + count - material.posts.length
  if (missing <= 0) return
  const bodies = Array.from({ length: missing }, clientBody)
  const requests = bodies.map((body) => toSign(material.scheme, material.key, material.key.apiKey, 'POST', CLIENTS_PATH, body, now, nonce()))
  const signatures = await pool.sign(requests.map((request) => request.data))
  requests.forEach((request, i) => material.posts.push({ headers: request.headers(signatures[i] as string), body: bodies[i] as string, signedAt: now }))
}

/** Before a measurement of (j): at least `count` unused, fresh agent-signed GETs for `destination`. */
export async function ensureAgentGets (material: SignedMaterial, pool: SigningPool, destination: Destination, count: number): Promise<void> {
  const agent = destination.agent
  if (agent === undefined) throw new Error('agent-signed GETs go to an agent route (j)')
  const now = Date.now()
  // the used ones are spent: drop them, and any too old to send
  agent.signed = agent.signed.slice(agent.cursor).filter((signed) => now - signed.signedAt <= MAX_SIGNATURE_AGE_MS)
  agent.cursor = 0
  const missing = count - agent.signed.length
  if (missing <= 0) return
  const requests = Array.from({ length: missing }, () => agentToSign(material.key, agent.keyid, agent.authority, now, nonce()))
  const signatures = await pool.sign(requests.map((request) => request.data))
  requests.forEach((request, i) => agent.signed.push({ headers: request.headers(signatures[i] as string), signedAt: now }))
}

function takeAgentGet (material: SignedMaterial, agent: AgentGets): Signed {
  const next = agent.signed[agent.cursor]
  if (next !== undefined) {
    agent.cursor++
    return next
  }
  // the pool ran out: sign here (slow, but a signature sent twice would be refused as a replay)
  material.inlineSigned++
  const request = agentToSign(material.key, agent.keyid, agent.authority, Date.now(), nonce())
  return { headers: request.headers(signOne(material.key, request.data, encodingOf(material.scheme))), signedAt: Date.now() }
}

function agentGetRequest (destination: Destination, material: SignedMaterial): autocannon.Request {
  const agent = destination.agent
  if (agent === undefined) throw new Error('agent-signed GETs go to an agent route (j)')
  return {
    method: 'GET',
    path: CLIENTS_PATH,
    setupRequest: (request) => ({ ...request, headers: { ...takeAgentGet(material, agent).headers } })
  }
}

function takePost (material: SignedMaterial, destination: Destination): SignedPost {
  const next = material.posts[destination.postCursor]
  if (next !== undefined) {
    destination.postCursor++
    return next
  }
  // The pool ran out: sign here, which is slow but keeps every POST distinct (a repeat would be refused).
  material.inlineSigned++
  const body = clientBody()
  const request = toSign(material.scheme, material.key, material.key.apiKey, 'POST', CLIENTS_PATH, body, Date.now(), nonce())
  const post = { headers: request.headers(signOne(material.key, request.data, encodingOf(material.scheme))), body, signedAt: Date.now() }
  material.posts.push(post)
  destination.postCursor = material.posts.length
  return post
}

function authHeaders (destination: Destination, signed: Signed): Record<string, string> {
  const headers: Record<string, string> = { authorization: `Bearer ${destination.token}`, ...signed.headers }
  if (destination.identityUser !== undefined) headers['x-gateway-user'] = destination.identityUser
  return headers
}

function getRequest (destination: Destination, signed: Signed): autocannon.Request {
  return { method: 'GET', path: CLIENTS_PATH, headers: authHeaders(destination, signed) }
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
      return { ...request, headers: { ...authHeaders(destination, signed), 'content-type': 'application/json' }, body: signed.body }
    }
  }
}

/**
 * --scenario mcp: a tools/call as an MCP client sends it (Streamable HTTP, protocol 2025-06-18),
 * about 200 bytes of JSON-RPC. Without a signature or token: e and k are public routes.
 */
export function mcpCall (i: number): { headers: Record<string, string>; body: string } {
  const name = MCP_TOOLS[i % MCP_TOOLS.length] as string
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1000 + i,
    method: 'tools/call',
    params: { name, arguments: { owner: 'example', repo: 'api', query: 'is:open label:bug sort:updated-desc', perPage: 20 }, _meta: { progressToken: i } }
  })
  return {
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body
  }
}

/**
 * --scenario dpop: GET /v1/clients/ on a bearer route with keygate's own token, no signature: (l)
 * as `Bearer`, (m) and (n) bound to a key, as `DPoP` with a new proof each (taken from the pool).
 */
function dpopGetRequests (destination: Destination): autocannon.Request[] {
  const dpop = destination.dpop
  if (dpop === undefined) return [{ method: 'GET', path: CLIENTS_PATH, headers: { authorization: `Bearer ${destination.token}` } }]
  return [{
    method: 'GET',
    path: CLIENTS_PATH,
    setupRequest: (request) => ({ ...request, headers: { authorization: `DPoP ${destination.token}`, dpop: takeDpopProof(dpop) } })
  }]
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
  const get = (i: number): autocannon.Request => getRequest(destination, gets[i % gets.length] as Signed)
  if (destination.kind === 'agent') {
    if (scenario !== 'get') throw new Error(`an agent route (j) is sent agent-signed GETs, not --scenario ${scenario}`)
    return [agentGetRequest(destination, material)]
  }
  switch (scenario) {
    case 'get':
      return gets.map((_, i) => get(i))
    case 'flood':
      // the good traffic; the flood itself (floodHeaders) is sent by another process
      return gets.map((_, i) => get(i))
    case 'decision':
      // to nginx alone (g: with the identity header keygate would have given), nginx asking keygate (h), keygate inline (d)
      return gets.map((_, i) => get(i))
    case 'post':
      return [postRequest(destination, material)]
    case 'mix':
      return gets.flatMap((_, i) => (i + 1) % MIX_GETS_PER_POST === 0 ? [get(i), postRequest(destination, material)] : [get(i)])
    case 'dpop':
      return dpopGetRequests(destination)
    case 'mcp':
      return Array.from({ length: MCP_CALL_POOL_SIZE }, (_, i) => ({ method: 'POST', path: MCP_PATH, ...mcpCall(i) }))
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
          requests.push(getRequest(destination, kind === 0 ? material.badSignature : kind === 1 ? material.stale : material.unknownKey))
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
  return authHeaders(destination, material.badSignature)
}
