// Registering a key: the name and expiry checked, possession of the private key proved (a signature
// over the name), the registrations of the owner counted, and the record stored in one atomic step
// with the owner's limit of active keys (Store.createKey); then cached here (key-cache.ts).
import type { KeyType } from '#client/protocol'
import { GatewayError } from '../errors.js'
import type { KeyRecord, Store } from '../store/index.js'
import { missingScopes, normaliseScopes, notHeldError, scopeSet } from '../users/scopes.js'
import type { KeyCache } from './key-cache.js'
import { expiryMs, parseExpiresAt } from './key-expiry.js'
import type { KeyUpkeep } from './key-upkeep.js'
import { decodeBase64, parsePublicKey, verifyWithKey } from './public-key.js'
import type { KeyRegistry, KeyRegistryOptions } from './registry-types.js'

export const HOUR_MS = 3600_000
export const DAY_MS = 24 * HOUR_MS

/**
 * A name that could begin a signing string (a timestamp's digits, a method, a path) is refused:
 * the registration signature over it would otherwise also sign that business request.
 */
const SIGNING_STRING_PREFIX = /^[0-9]{9,}[A-Za-z]+\//

/** The proof of possession registration asks of each key type, over the bytes of `name`. */
const PROOF: Readonly<Record<KeyType, string>> = {
  rsa: 'RSA-SHA256 signature',
  ed25519: 'Ed25519 signature (64 bytes: openssl pkeyutl -sign -rawin)',
  p256: 'ECDSA P-256 SHA-256 signature in DER (openssl dgst -sha256 -sign)'
}

export interface KeyRegistrationParts {
  upkeep: KeyUpkeep
  cache: Pick<KeyCache, 'remember'>
  /** a key registered for a user removed meanwhile is revoked again (key-lifecycle.ts) */
  revoke: KeyRegistry['revoke']
}

export function createKeyRegistration (
  store: Pick<Store, 'countRate' | 'createKey' | 'getUser'>,
  options: Pick<KeyRegistryOptions, 'maxKeysPerOwner' | 'registrationLimits'>,
  { upkeep, cache, revoke }: KeyRegistrationParts
): Pick<KeyRegistry, 'register' | 'registerForUser'> {
  /**
   * Creation times, strictly increasing in this process: listings are newest first by createdAt
   * (to the millisecond), so two keys registered here within one millisecond still list in the
   * order they were made. At most a few ms ahead of the clock, and only under a burst.
   */
  let lastCreatedMs = 0
  const nextCreatedAt = (): string => {
    lastCreatedMs = Math.max(Date.now(), lastCreatedMs + 1)
    return new Date(lastCreatedMs).toISOString()
  }
  const countRegistration = async (owner: string): Promise<void> => {
    const limits = options.registrationLimits
    if (limits === undefined) return
    const counters = [
      { key: `registrations:hour:${owner}`, limit: limits.perHour, windowMs: HOUR_MS },
      { key: `registrations:day:${owner}`, limit: limits.perDay, windowMs: DAY_MS }
    ]
    const outcome = await store.countRate(counters)
    if (outcome.allowed) return
    // a refused registration counted nowhere: it fits again once each counter has drained by the excess
    const waitMs = Math.max(...counters.map((c, i) => (outcome.backlogMs[i] ?? 0) + c.windowMs / c.limit - c.windowMs))
    const retryAfter = Math.max(1, Math.ceil(waitMs / 1000))
    throw new GatewayError('RATE_LIMITED', `Too many key registrations by one user (at most ${limits.perHour} an hour and ${limits.perDay} a day); ` +
      `try again in ${retryAfter} s`, { headers: { 'retry-after': String(retryAfter) }, extra: { retryAfterSeconds: retryAfter } })
  }

  const register: KeyRegistry['register'] = async ({ owner, name, publicKey, signature, expiresAt, scopes: scopesAsked }) => {
    if (SIGNING_STRING_PREFIX.test(name)) {
      throw new GatewayError('VALIDATION_FAILED', 'name must not look like the start of a signing string (digits, a method, a path)', {
        extra: { errors: [{ field: 'name', message: 'must not start with digits followed by a method and "/"' }] }
      })
    }
    const expires = expiresAt === undefined ? undefined : parseExpiresAt(expiresAt, Date.now())
    const scopes = scopesAsked === undefined ? undefined : normaliseScopes(scopesAsked)
    const parsed = parsePublicKey(publicKey)
    const signatureBytes = decodeBase64(signature)
    if (signatureBytes === undefined || !verifyWithKey(parsed.keyObject, parsed.keyType, Buffer.from(name, 'utf8'), signatureBytes)) {
      throw new GatewayError('INVALID_SIGNATURE', `signature is not a base64 ${PROOF[parsed.keyType]} of the exact bytes of name ` +
        'made with the private half of publicKey', { status: 400 })
    }
    await upkeep.keyIndexReady()
    await countRegistration(owner)
    await upkeep.prune(true).catch(() => {})
    const record: KeyRecord = {
      apiKey: parsed.apiKey,
      owner,
      name,
      publicKey: parsed.pem,
      fingerprint: parsed.fingerprint,
      createdAt: nextCreatedAt(),
      ...(expires !== undefined && { expiresAt: expires }),
      ...(scopes !== undefined && { scopes })
    }
    const outcome = await store.createKey(record, options.maxKeysPerOwner)
    if (outcome === 'exists') {
      // Revoked and expired keys stay registered: the same words for all, whoever asks.
      throw new GatewayError('DUPLICATE_KEY', 'This public key is already registered, in this or another encoding (a revoked or expired key stays so); ' +
        'generate a new key pair', { extra: { apiKey: parsed.apiKey } })
    }
    if (outcome === 'limit-reached') {
      const most = options.maxKeysPerOwner ?? 0
      throw new GatewayError('KEY_LIMIT_REACHED', `You have ${most} active API keys, the most a user may have; revoke one you no longer use ` +
        '(GET /v1/api-keys lists them, DELETE /v1/api-keys/{apiKey} revokes one), then register again', { extra: { maxKeys: most } })
    }
    cache.remember({
      apiKey: parsed.apiKey,
      owner,
      name,
      keyObject: parsed.keyObject,
      fingerprint: parsed.fingerprint,
      keyType: parsed.keyType,
      scopes: scopes === undefined ? undefined : scopeSet(scopes)
    }, expiryMs(expires))
    return record
  }

  return {
    register,
    async registerForUser ({ userId, heldScopes, ...input }) {
      const isOwner = (user: { id: string } | null): boolean => user !== null && (userId === undefined || user.id === userId)
      const user = await store.getUser(input.owner)
      if (user === null || !isOwner(user)) return undefined
      // Without scopes: a snapshot of the user's now, so granting the user more later does not
      // widen keys already made for narrower jobs.
      const held = heldScopes === undefined ? user.scopes : [...heldScopes]
      let scopes = held
      if (input.scopes !== undefined) {
        scopes = normaliseScopes(input.scopes)
        const extra = missingScopes(scopes, new Set(held))
        if (extra.length > 0) throw notHeldError(extra, held, 'your user')
      }
      const record = await register({ ...input, scopes })
      // A removal that ran in between revoked the keys it could see, not this one.
      if (!isOwner(await store.getUser(input.owner))) {
        await revoke(record.apiKey)
        return undefined
      }
      return record
    }
  }
}
