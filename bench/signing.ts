// Request signing for the load generator (the seed scheme, as the README states it): RSA-2048,
// PKCS#1 v1.5 with SHA-256, over timestamp + METHOD + target + body. One signature costs the
// client about 1.4 ms here, so requests are signed before a measurement, never during one, and
// large batches are spread over worker threads.
import { createHash, generateKeyPair, randomBytes, sign, type KeyObject } from 'node:crypto'
import { promisify } from 'node:util'
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'

export interface BenchKey {
  privateKey: KeyObject
  privatePem: string
  publicPem: string
  /** hex SHA-256 of the DER SubjectPublicKeyInfo, as keygate names keys */
  apiKey: string
}

/** Off the main thread (it takes most of a second), so it overlaps starting the services. */
export async function generateBenchKey (): Promise<BenchKey> {
  const { privateKey, publicKey } = await promisify(generateKeyPair)('rsa', { modulusLength: 2048 })
  return {
    privateKey,
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    apiKey: createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex')
  }
}

export function signingString (timestamp: string, method: string, target: string, body = ''): string {
  return `${timestamp}${method}${target}${body}`
}

export function signOne (key: BenchKey, data: string): string {
  return sign('sha256', Buffer.from(data, 'utf8'), key.privateKey).toString('base64')
}

/** An apiKey no one registered: 64 hex digits, like a real one. */
export function unknownApiKey (): string {
  return randomBytes(32).toString('hex')
}

// Plain JavaScript, evaluated in each worker: no loader needed there.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const { createPrivateKey, sign } = require('node:crypto')
const key = createPrivateKey(workerData.privatePem)
parentPort.on('message', ({ id, data }) => {
  parentPort.postMessage({ id, signatures: data.map((d) => sign('sha256', Buffer.from(d, 'utf8'), key).toString('base64')) })
})
`

const BATCH = 200

/** Signs many strings on every core at once; `close` ends the workers. */
export class SigningPool {
  private readonly workers: Worker[]
  private nextId = 0
  private readonly pending = new Map<number, { resolve: (signatures: string[]) => void; reject: (err: Error) => void }>()

  constructor (key: BenchKey, threads = Math.max(1, availableParallelism())) {
    this.workers = Array.from({ length: threads }, () => {
      const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { privatePem: key.privatePem } })
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
