// Registered keys: what the auth stages look up, operators and owners register, list, change and
// revoke. Redis is the system of record (the store); this process keeps parsed keys in memory. One
// file per concern, each over the store alone:
//   key-cache.ts         the hot-path lookup, kept fresh by the store's key events
//   key-registration.ts  registration: proof of possession, limits, the atomic store write
//   key-lifecycle.ts     the records read and listed, changes, revocation, last use
//   key-upkeep.ts        the store's key indexes: the one-time backfill, revoked keys pruned
//   key-expiry.ts        a key's status at a moment, and the one check of an expiry
//   registry-types.ts    what the registry promises (KeyRegistry) and its options
// This file makes one KeyRegistry of them.
import type { GatewayConfig } from '../config/env.js'
import type { Store } from '../store/index.js'
import { createKeyCache } from './key-cache.js'
import { createKeyLifecycle } from './key-lifecycle.js'
import { createKeyRegistration, DAY_MS } from './key-registration.js'
import { createKeyUpkeep } from './key-upkeep.js'
import type { KeyRegistry, KeyRegistryOptions } from './registry-types.js'

export { keyStatus, MAX_KEY_LIFETIME_MS, parseExpiresAt } from './key-expiry.js'
export { DEFAULT_LAST_USED_INTERVAL_MS } from './key-lifecycle.js'
export type {
  KeyCheck, KeyRegistry, KeyRegistryOptions, KeyStatus, KeyUpdate, KeyUpdateResult, RegisteredKey, RegistrationInput
} from './registry-types.js'

/** The registry's policy options from the gateway's config (KEYGATE_KEY_REGISTRATIONS_PER_*, KEYGATE_REVOKED_KEY_RETENTION_DAYS). */
type KeyPolicyConfig = Pick<GatewayConfig, 'maxKeysPerUser' | 'keyRegistrationsPerHour' | 'keyRegistrationsPerDay' | 'revokedKeyRetentionDays'>
export function keyPolicy (config: KeyPolicyConfig): Pick<KeyRegistryOptions, 'maxKeysPerOwner' | 'registrationLimits' | 'revokedKeyRetentionMs'> {
  return {
    maxKeysPerOwner: config.maxKeysPerUser,
    registrationLimits: { perHour: config.keyRegistrationsPerHour, perDay: config.keyRegistrationsPerDay },
    revokedKeyRetentionMs: config.revokedKeyRetentionDays * DAY_MS
  }
}

export function createKeyRegistry (store: Store, options: KeyRegistryOptions): KeyRegistry {
  const cache = createKeyCache(store, options)
  const upkeep = createKeyUpkeep(store, options.revokedKeyRetentionMs)
  const lifecycle = createKeyLifecycle(store, options, { upkeep, cache })
  const registration = createKeyRegistration(store, options, { upkeep, cache, revoke: lifecycle.revoke })
  return {
    check: cache.check,
    async lookup (apiKey) {
      const found = await cache.check(apiKey)
      return found?.status === 'active' ? found.key : null
    },
    ...registration,
    ...lifecycle,
    get cacheSize () {
      return cache.size
    },
    stats: cache.stats,
    close: cache.close
  }
}
