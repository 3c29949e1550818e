// One interface for users, keys and the shared token-signing key. Redis is the system of record;
// the memory store is the embedded stand-in used when no REDIS_URL is set. Both pass one test
// suite (test/gateway/store.test.ts). Every method may throw STORE_UNAVAILABLE.

export interface UserRecord {
  username: string
  /** PHC string, see users/passwords.ts */
  passwordHash: string
  createdAt: string
  updatedAt: string
}

export interface KeyRecord {
  /** lowercase hex SHA-256 of the key's DER SubjectPublicKeyInfo */
  apiKey: string
  owner: string
  name: string
  /** SPKI PEM, as normalised at registration */
  publicKey: string
  createdAt: string
}

/**
 * The token-signing keys shared by every gateway on a store: the one new tokens are signed with,
 * and earlier ones that still verify the tokens they signed until `retiresAt`.
 */
export interface SigningKeyRing {
  /** PKCS#8 PEM of the current signing key */
  current: string
  /** earlier keys, not yet retired, oldest retirement first */
  previous: Array<{ pem: string; /** ms since the epoch; from then on the key verifies nothing */ retiresAt: number }>
}

/** The ring after a rotation, and the key the rotation replaced (null when there was none). */
export interface SigningKeyRotation extends SigningKeyRing {
  replaced: { pem: string; retiresAt: number } | null
}

export interface Store {
  readonly kind: 'redis' | 'memory'
  /** store operations that failed for want of an answer (Redis down, slow, reset), since start */
  readonly errors: number
  getUser: (username: string) => Promise<UserRecord | null>
  /** creates the user, or replaces its password hash keeping its creation time */
  putUser: (username: string, passwordHash: string) => Promise<UserRecord>
  countUsers: () => Promise<number>
  getKey: (apiKey: string) => Promise<KeyRecord | null>
  /** atomic: false when a key with this apiKey exists already (by anyone) */
  createKey: (record: KeyRecord) => Promise<boolean>
  /**
   * Returns the token-signing key shared by every gateway on this store: the one stored, or
   * `candidate` when none was stored yet (set-if-absent, so concurrent starters agree).
   */
  getOrCreateSigningKey: (candidate: string) => Promise<string>
  /** The shared signing-key ring without its retired keys; null while no key was ever stored. */
  getSigningKeyRing: () => Promise<SigningKeyRing | null>
  /**
   * Atomically makes `candidate` the current signing key; the key it replaces stays in the ring
   * as a previous key until `retireAfterMs` from now, and keys already retired leave the ring.
   * Returns the ring after the rotation and the key it replaced.
   */
  rotateSigningKey: (candidate: string, retireAfterMs: number) => Promise<SigningKeyRotation>
  /**
   * Set-if-absent with an expiry: true the first time `key` is remembered within `ttlMs`, false
   * on every later call until it expires. Atomic across every gateway on the store (replay checks).
   */
  rememberOnce: (key: string, ttlMs: number) => Promise<boolean>
  /**
   * Counts a hit in a fixed window that starts with the first hit: returns the count so far and
   * the ms until the window ends (rate limits).
   */
  hit: (key: string, windowMs: number) => Promise<{ count: number; resetMs: number }>
  /** forgets a counter (a success resets the failures) */
  resetHits: (key: string) => Promise<void>
  /** resolves when the store answers; throws STORE_UNAVAILABLE otherwise */
  ping: () => Promise<void>
  close: () => Promise<void>
}
