import type { KeyRecord } from '../store/index.js'
import type { KeyStatus } from './key-registry.js'

/** A key as its owner and operators see it: never the public key's text. */
export interface KeyView {
  apiKey: string
  name: string
  createdAt: string
  lastUsedAt: string | null
  status: KeyStatus
  expiresAt?: string
  revokedAt?: string
  /** null: every scope of its user (a key registered before scopes existed) */
  scopes: string[] | null
}

export function keyView (record: KeyRecord & { status: KeyStatus }): KeyView {
  return {
    apiKey: record.apiKey,
    name: record.name,
    createdAt: record.createdAt,
    lastUsedAt: record.lastUsedAt ?? null,
    status: record.status,
    scopes: record.scopes ?? null,
    ...(record.expiresAt !== undefined && { expiresAt: record.expiresAt }),
    ...(record.revokedAt !== undefined && { revokedAt: record.revokedAt })
  }
}
