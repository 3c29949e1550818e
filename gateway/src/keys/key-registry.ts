// Registered keys: registration (prove, then store atomically) and the hot-path lookup. Redis is
// the system of record; an in-process LRU holds parsed KeyObjects, so a request with a known key
// parses no PEM and makes no store round trip. Keys are immutable once registered, so a cached
// entry cannot go stale; revocation (a later issue) will invalidate entries over pub/sub.
import { createPublicKey, type KeyObject } from 'node:crypto'
import { GatewayError } from '../errors.js'
import type { KeyRecord, Store } from '../store/index.js'
import { LruCache, type CacheStats } from './lru-cache.js'
import { decodeBase64, parseRsaPublicKey, verifyRsaSha256 } from './public-key.js'

export interface RegisteredKey {
  apiKey: string
  owner: string
  name: string
  keyObject: KeyObject
}

export interface KeyRegistry {
  /** the key, from the cache or the store; null when not registered */
  lookup: (apiKey: string) => Promise<RegisteredKey | null>
  register: (input: { owner: string; name: string; publicKey: string; signature: string }) => Promise<KeyRecord>
  readonly cacheSize: number
  /** lookups of well-formed apiKeys answered by the in-process cache (hits) or the store (misses) */
  readonly stats: Readonly<CacheStats>
}

const API_KEY_PATTERN = /^[0-9a-f]{64}$/
/**
 * A name that could begin a signing string (a timestamp's digits, a method, a path) is refused:
 * the registration signature over it would otherwise also sign that business request.
 */
const SIGNING_STRING_PREFIX = /^[0-9]{9,}[A-Za-z]+\//

export function createKeyRegistry (store: Store, options: { cacheSize: number }): KeyRegistry {
  const cache = new LruCache<string, RegisteredKey>(options.cacheSize)
  const stats: CacheStats = { hits: 0, misses: 0 }

  return {
    async lookup (apiKey) {
      // Not the shape of an apiKey: no store round trip for junk.
      if (!API_KEY_PATTERN.test(apiKey)) return null
      const cached = cache.get(apiKey)
      if (cached !== undefined) {
        stats.hits++
        return cached
      }
      stats.misses++
      const record = await store.getKey(apiKey)
      if (record === null) return null
      // The stored PEM was checked at registration: parse it, nothing more.
      const key = { apiKey, owner: record.owner, name: record.name, keyObject: createPublicKey(record.publicKey) }
      cache.set(apiKey, key)
      return key
    },

    async register ({ owner, name, publicKey, signature }) {
      if (SIGNING_STRING_PREFIX.test(name)) {
        throw new GatewayError('VALIDATION_FAILED', 'name must not look like the start of a signing string (digits, a method, a path)', {
          extra: { errors: [{ field: 'name', message: 'must not start with digits followed by a method and "/"' }] }
        })
      }
      const parsed = parseRsaPublicKey(publicKey)
      const signatureBytes = decodeBase64(signature)
      if (signatureBytes === undefined || !verifyRsaSha256(parsed.keyObject, Buffer.from(name, 'utf8'), signatureBytes)) {
        throw new GatewayError('INVALID_SIGNATURE', 'signature is not a base64 RSA-SHA256 signature of the exact bytes of name made with the private half of publicKey', { status: 400 })
      }
      const record: KeyRecord = { apiKey: parsed.apiKey, owner, name, publicKey: parsed.pem, createdAt: new Date().toISOString() }
      if (!await store.createKey(record)) {
        throw new GatewayError('DUPLICATE_KEY', 'This public key is already registered; generate a new key pair', { extra: { apiKey: parsed.apiKey } })
      }
      cache.set(parsed.apiKey, { apiKey: parsed.apiKey, owner, name, keyObject: parsed.keyObject })
      return record
    },

    get cacheSize () {
      return cache.size
    },

    stats
  }
}
