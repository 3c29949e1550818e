// Key pairs and request signing for tests, written from docs/signing.md's rules independently of the gateway's
// verifier (the openssl test checks both against a third implementation).
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'

export interface TestKeyPair {
  privateKey: KeyObject
  publicKey: KeyObject
  /** SPKI PEM */
  publicPem: string
  /** PKCS#1 PEM of the same key */
  pkcs1Pem: string
  /** hex SHA-256 of the DER SPKI */
  apiKey: string
}

/**
 * RSA keys made once (test/fixtures/keys/rsa-BITS.pem, README.md there): generating a 2048-bit key
 * costs ~50 ms of CPU and a 4096-bit one seconds. Each call in a process takes the next unused key
 * of its size, so the keys of one test file are distinct; past the last, new ones are generated.
 */
const pools = new Map<number, string[]>()
function pooled (modulusLength: number): KeyObject | undefined {
  let pool = pools.get(modulusLength)
  if (pool === undefined) {
    const file = new URL(`../fixtures/keys/rsa-${modulusLength}.pem`, import.meta.url)
    pool = existsSync(file) ? readFileSync(file, 'utf8').split(/(?=-----BEGIN PRIVATE KEY-----)/) : []
    pools.set(modulusLength, pool)
  }
  const pem = pool.shift()
  return pem === undefined ? undefined : createPrivateKey(pem)
}

export function rsaKeyPair (modulusLength = 2048): TestKeyPair {
  return testKeyPairOf(pooled(modulusLength) ?? generateKeyPairSync('rsa', { modulusLength }).privateKey)
}

/** An RSA private key (a fixture file's, say) as a TestKeyPair: its public half, PEMs and apiKey. */
export function testKeyPairOf (privateKey: KeyObject): TestKeyPair {
  const publicKey = createPublicKey(privateKey)
  return {
    privateKey,
    publicKey,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    pkcs1Pem: publicKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
    apiKey: createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex')
  }
}

export function signBase64 (privateKey: KeyObject, data: string | Buffer): string {
  return sign('sha256', Buffer.from(data), privateKey).toString('base64')
}

export interface SignedRequestInput {
  keys: TestKeyPair
  token: string
  method: string
  target: string
  body?: string | Buffer
  timestamp?: number | string
}

/** The four auth headers of a business request. */
export function signedHeaders ({ keys, token, method, target, body, timestamp = Date.now() }: SignedRequestInput): Record<string, string> {
  const payload = Buffer.concat([Buffer.from(`${timestamp}${method}${target}`, 'latin1'), Buffer.from(body ?? '')])
  return {
    authorization: `Bearer ${token}`,
    'x-api-key': keys.apiKey,
    'x-api-timestamp': String(timestamp),
    'x-api-signature': signBase64(keys.privateKey, payload)
  }
}
