import { createPublicKey } from 'node:crypto'
import type { KeyType } from '#client/protocol'
import type { KeyRecord } from '../store/index.js'
import type { KeyStatus } from './key-registry.js'
import { keyTypeOf } from './public-key.js'

/** A key as its owner and operators see it: never the public key's text. */
export interface KeyView {
  apiKey: string
  name: string
  createdAt: string
  lastUsedAt: string | null
  status: KeyStatus
  /** null: every scope of its user (a key registered before scopes existed) */
  scopes: string[] | null
  /** rsa, ed25519 or p256: read from the stored PEM (absent only for a key of no type keygate registers) */
  keyType?: KeyType
  expiresAt?: string
  revokedAt?: string
  /** the revoked key was cut down to a tombstone after KEYGATE_REVOKED_KEY_RETENTION_DAYS (admin API only: listings leave it out) */
  prunedAt?: string
}

/** The type of a stored key, from its PEM; undefined when it cannot be read as one keygate registers. */
function storedKeyType (publicKey: string | undefined): KeyType | undefined {
  if (publicKey === undefined) return undefined
  try {
    return keyTypeOf(createPublicKey(publicKey))
  } catch {
    return undefined
  }
}

export function keyView (record: KeyRecord & { status: KeyStatus }): KeyView {
  const keyType = storedKeyType(record.publicKey)
  return {
    apiKey: record.apiKey,
    name: record.name,
    createdAt: record.createdAt,
    lastUsedAt: record.lastUsedAt ?? null,
    status: record.status,
    scopes: record.scopes ?? null,
    ...(keyType !== undefined && { keyType }),
    ...(record.expiresAt !== undefined && { expiresAt: record.expiresAt }),
    ...(record.revokedAt !== undefined && { revokedAt: record.revokedAt }),
    ...(record.prunedAt !== undefined && { prunedAt: record.prunedAt })
  }
}
