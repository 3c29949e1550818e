// Key pairs and request signing for tests, written from docs/signing.md's rules independently of the gateway's
// verifier (the openssl test checks both against a third implementation).
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'

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

export function rsaKeyPair (modulusLength = 2048): TestKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength })
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
