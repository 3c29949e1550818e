// The store's key indexes kept up by the registry: the one-time backfill of fingerprints (before
// this process registers anything) and revoked keys past their retention cut to tombstones.
import { createPublicKey } from 'node:crypto'
import type { Store } from '../store/index.js'
import { keyFingerprint } from './public-key.js'

/** revoked keys cut to tombstones per registration or listing, at most: bounded work per request */
const PRUNE_BATCH = 100
const PRUNE_INTERVAL_MS = 60_000

export interface KeyUpkeep {
  /**
   * Records stored before fingerprints get theirs before this process registers anything (once
   * per store, ever: Store.backfillKeyIndex); a failed attempt is tried again by the next call.
   */
  keyIndexReady: () => Promise<void>
  /**
   * Revoked keys past their retention become tombstones: lazily, a batch per listing that met such
   * a key, and per registration at most once a PRUNE_INTERVAL_MS in this process (a registration
   * costs one store round trip more at most that often; a listing with nothing due, none).
   */
  prune: (onRegistration: boolean) => Promise<void>
}

/** `revokedKeyRetentionMs`: KeyRegistryOptions' (unset: nothing is pruned). */
export function createKeyUpkeep (store: Pick<Store, 'backfillKeyIndex' | 'pruneRevokedKeys'>, revokedKeyRetentionMs: number | undefined): KeyUpkeep {
  let indexed: Promise<unknown> | undefined
  const keyIndexReady = async (): Promise<void> => {
    indexed ??= store.backfillKeyIndex((pem) => {
      try {
        return keyFingerprint(createPublicKey(pem))
      } catch {
        return undefined
      }
    }).catch((err: unknown) => {
      indexed = undefined
      throw err
    })
    await indexed
  }
  let prunedAtMs = Number.NEGATIVE_INFINITY
  const prune = async (onRegistration: boolean): Promise<void> => {
    if (revokedKeyRetentionMs === undefined) return
    const nowMs = Date.now()
    if (onRegistration && nowMs - prunedAtMs < PRUNE_INTERVAL_MS) return
    prunedAtMs = nowMs
    await keyIndexReady()
    await store.pruneRevokedKeys(nowMs - revokedKeyRetentionMs, PRUNE_BATCH)
  }
  return { keyIndexReady, prune }
}
