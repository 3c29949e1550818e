// Request signing for the load generator, in either scheme (--scheme): the seed's (timestamp +
// METHOD + target + body) or RFC 9421's signature base, with the bench key's algorithm (--key):
// RSA-2048 PKCS#1 v1.5 with SHA-256, Ed25519, or ECDSA P-256 with SHA-256 (DER in the seed
// scheme, raw r||s in RFC 9421). One RSA signature costs the client about 1.4 ms here, so requests
// are signed before a measurement, never during one, and large batches are spread over worker threads.
import { createHash, createPublicKey, generateKeyPair, randomBytes, sign, type KeyObject } from 'node:crypto'
import { promisify } from 'node:util'
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import {
  ALGORITHMS_OF_KEY_TYPE, contentDigestValue, requestComponentValue, serializeSignatureParams, signatureBase, type ComponentId, type KeyType
} from '../client/src/protocol/index.js'

export const BENCH_SCHEMES = ['seed', 'rfc9421'] as const
export type BenchScheme = typeof BENCH_SCHEMES[number]
/** how an ECDSA signature is encoded: DER in the seed scheme (what openssl makes), raw r||s in RFC 9421 */
export type DsaEncoding = 'der' | 'ieee-p1363'
export const encodingOf = (scheme: BenchScheme): DsaEncoding => scheme === 'rfc9421' ? 'ieee-p1363' : 'der'

export interface BenchKey {
  type: KeyType
  privateKey: KeyObject
  privatePem: string
  publicPem: string
  /** hex SHA-256 of the DER SubjectPublicKeyInfo, as keygate names keys */
  apiKey: string
}

const GENERATE: Record<KeyType, () => Promise<{ privateKey: KeyObject; publicKey: KeyObject }>> = {
  rsa: async () => await promisify(generateKeyPair)('rsa', { modulusLength: 2048 }),
  ed25519: async () => await promisify(generateKeyPair)('ed25519'),
  p256: async () => await promisify(generateKeyPair)('ec', { namedCurve: 'P-256' })
}

/** Off the main thread (an RSA key takes most of a second), so it overlaps starting the services. */
export async function generateBenchKey (type: KeyType = 'rsa'): Promise<BenchKey> {
  const { privateKey, publicKey } = await GENERATE[type]()
  return {
    type,
    privateKey,
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    apiKey: createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex')
  }
}

export function signingString (timestamp: string, method: string, target: string, body = ''): string {
  return `${timestamp}${method}${target}${body}`
}

/** The signature of `data` by the key, base64: what keygate verifies (a registration proof is a seed-scheme signature). */
export function signOne (key: BenchKey, data: string, encoding: DsaEncoding = 'der'): string {
  return sign(key.type === 'ed25519' ? null : 'sha256', Buffer.from(data, 'utf8'), { key: key.privateKey, dsaEncoding: encoding }).toString('base64')
}

/** A request to sign: the bytes to sign, and the headers that carry the signature once made. */
export interface ToSign {
  data: string
  headers: (signatureBase64: string) => Record<string, string>
}

const GET_COMPONENTS: ComponentId[] = [{ name: '@method' }, { name: '@path' }]
const BODY_COMPONENTS: ComponentId[] = [...GET_COMPONENTS, { name: 'content-digest' }, { name: 'content-type' }]

/**
 * What to sign for one request of `scheme`, signed at `timeMs` as key `apiKey` (another key's
 * apiKey: a request keygate refuses as an unknown key). RFC 9421 as @keygate/client signs it
 * behind a balancer: @method, @path, and for a body content-digest and content-type (JSON);
 * created, keyid, alg and a nonce (`nonce`, distinct per request).
 */
export function toSign (scheme: BenchScheme, key: BenchKey, apiKey: string, method: string, target: string, body: string | undefined,
  timeMs: number, nonce: string): ToSign {
  if (scheme === 'seed') {
    const timestamp = String(timeMs)
    return {
      data: signingString(timestamp, method, target, body),
      headers: (signature) => ({ 'x-api-key': apiKey, 'x-api-timestamp': timestamp, 'x-api-signature': signature })
    }
  }
  const fields: Record<string, string[]> = {}
  if (body !== undefined) {
    fields['content-digest'] = [contentDigestValue('sha-256', createHash('sha256').update(body).digest('base64'))]
    fields['content-type'] = ['application/json']
  }
  const components = body === undefined ? GET_COMPONENTS : BODY_COMPONENTS
  const params = serializeSignatureParams(components, [
    ['created', Math.floor(timeMs / 1000)], ['keyid', apiKey], ['alg', ALGORITHMS_OF_KEY_TYPE[key.type][0] as string], ['nonce', nonce]
  ])
  const message = { method, target, scheme: 'http', authority: 'localhost', field: (name: string) => fields[name] }
  return {
    data: signatureBase(components.map((component) => [component, requestComponentValue(message, component)] as const), params),
    headers: (signature) => ({
      ...(body !== undefined && { 'content-digest': (fields['content-digest'] as string[])[0] as string }),
      'signature-input': `sig1=${params}`,
      signature: `sig1=:${signature}:`
    })
  }
}

/** (j): the bench's Web Bot Auth agent, its directory's origin: pinned with its key in the agents file, never fetched */
export const BENCH_AGENT_ORIGIN = 'https://agent.keygate-bench.test'
/** Signature-Agent as the current draft has it: a dictionary keyed by the signature's label, an HTTPS origin */
export const BENCH_SIGNATURE_AGENT = `sig1="${BENCH_AGENT_ORIGIN}"`
const AGENT_COMPONENTS: ComponentId[] = [{ name: '@authority' }, { name: 'signature-agent' }]
/** created to expires: as long as the bench uses any signature (it re-signs after 10 minutes); keygate allows an hour */
const AGENT_SIGNATURE_SECONDS = 15 * 60

/** The agent's public key as a JWK (Ed25519: kty, crv, x), as its directory publishes it. */
export function agentPublicJwk (key: BenchKey): { kty: string; crv: string; x: string } {
  const { kty, crv, x } = createPublicKey(key.privateKey).export({ format: 'jwk' })
  if (kty !== 'OKP' || crv !== 'Ed25519' || x === undefined) throw new Error('the bench\'s agent signs with an Ed25519 key')
  return { kty, crv, x }
}

/** The agent's keyid: its key's JWK thumbprint (RFC 7638: SHA-256 of the required members in order, base64url). */
export function agentKeyId (key: BenchKey): string {
  const { crv, kty, x } = agentPublicJwk(key)
  return createHash('sha256').update(JSON.stringify({ crv, kty, x })).digest('base64url')
}

/**
 * (j): what to sign for one GET by the bench's Web Bot Auth agent to a gateway at `authority`
 * (host:port, the Host autocannon sends): RFC 9421 over @authority and signature-agent, created,
 * expires, keyid the key's JWK thumbprint, alg, a nonce (each signature good for one request), and
 * tag="web-bot-auth"; Signature-Agent names the agent's directory.
 */
export function agentToSign (key: BenchKey, keyid: string, authority: string, timeMs: number, nonce: string): ToSign {
  const created = Math.floor(timeMs / 1000)
  const params = serializeSignatureParams(AGENT_COMPONENTS, [
    ['created', created], ['expires', created + AGENT_SIGNATURE_SECONDS], ['keyid', keyid], ['alg', 'ed25519'], ['nonce', nonce], ['tag', 'web-bot-auth']
  ])
  const fields: Record<string, string[]> = { 'signature-agent': [BENCH_SIGNATURE_AGENT] }
  const message = { method: 'GET', target: '/', scheme: 'http', authority, field: (name: string) => fields[name] }
  return {
    data: signatureBase(AGENT_COMPONENTS.map((component) => [component, requestComponentValue(message, component)] as const), params),
    headers: (signature) => ({ 'signature-agent': BENCH_SIGNATURE_AGENT, 'signature-input': `sig1=${params}`, signature: `sig1=:${signature}:` })
  }
}

/** An apiKey no one registered: 64 hex digits, like a real one. */
export function unknownApiKey (): string {
  return randomBytes(32).toString('hex')
}

// Plain JavaScript, evaluated in each worker: no loader needed there.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const { createPrivateKey, sign } = require('node:crypto')
const key = { key: createPrivateKey(workerData.privatePem), dsaEncoding: workerData.encoding }
const algorithm = workerData.type === 'ed25519' ? null : 'sha256'
parentPort.on('message', ({ id, data }) => {
  parentPort.postMessage({ id, signatures: data.map((d) => sign(algorithm, Buffer.from(d, 'utf8'), key).toString('base64')) })
})
`

const BATCH = 200

/** Signs many strings on every core at once; `close` ends the workers. */
export class SigningPool {
  private readonly workers: Worker[]
  private nextId = 0
  private readonly pending = new Map<number, { resolve: (signatures: string[]) => void; reject: (err: Error) => void }>()

  constructor (key: BenchKey, encoding: DsaEncoding = 'der', threads = Math.max(1, availableParallelism())) {
    this.workers = Array.from({ length: threads }, () => {
      const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { privatePem: key.privatePem, type: key.type, encoding } })
      worker.on('message', ({ id, signatures }: { id: number; signatures: string[] }) => {
        this.pending.get(id)?.resolve(signatures)
        this.pending.delete(id)
      })
      worker.on('error', (err) => {
        for (const { reject } of this.pending.values()) reject(err)
        this.pending.clear()
      })
      return worker
    })
  }

  async sign (data: string[]): Promise<string[]> {
    const batches: Array<Promise<string[]>> = []
    for (let start = 0, n = 0; start < data.length; start += BATCH, n++) {
      const worker = this.workers[n % this.workers.length] as Worker
      const id = ++this.nextId
      batches.push(new Promise((resolve, reject) => {
        this.pending.set(id, { resolve, reject })
        worker.postMessage({ id, data: data.slice(start, start + BATCH) })
      }))
    }
    return (await Promise.all(batches)).flat()
  }

  async close (): Promise<void> {
    await Promise.all(this.workers.map(async (worker) => await worker.terminate()))
  }
}
