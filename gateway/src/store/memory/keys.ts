// API keys in one process: the records and, beside them, what the Redis store's indexes hold
// (redis/keys.ts): each owner's keys, fingerprint -> apiKey, the revoked keys not yet pruned, the
// last use of each key. Revocations and changes are announced (key-events.ts).
import { newestFirst, type KeyEvent, type KeyRecord, type KeyStore } from '../types.js'

/** A revoked record cut down to what "never again" and "it was revoked" need (Store.pruneRevokedKeys). */
function tombstone (record: KeyRecord, prunedAt: string): KeyRecord {
  const { apiKey, owner, name, createdAt, revokedAt, fingerprint } = record
  return {
    apiKey,
    owner,
    name,
    createdAt,
    ...(revokedAt !== undefined && { revokedAt }),
    // without a fingerprint (a record an older gateway stored) the public key is what still names the key
    ...(fingerprint === undefined ? { publicKey: record.publicKey } : { fingerprint }),
    prunedAt
  }
}

/** How many of `owned` are active at `t`: neither revoked nor expired (createKey's limit). */
function activeKeys (keys: ReadonlyMap<string, KeyRecord>, owned: Iterable<string>, t: number): number {
  let active = 0
  for (const apiKey of owned) {
    const key = keys.get(apiKey)
    if (key !== undefined && key.revokedAt === undefined && (key.expiresAt === undefined || Date.parse(key.expiresAt) > t)) active++
  }
  return active
}

/** `revokeOwnerKeys`: a user's removal (users.ts), which announces what it revoked. */
export function memoryKeys (now: () => number, announce: (event: KeyEvent) => void): KeyStore & { revokeOwnerKeys: (owner: string, at: string) => string[] } {
  const keys = new Map<string, KeyRecord>()
  /** owner -> apiKeys: what the Redis store's per-owner index holds */
  const ownerKeys = new Map<string, Set<string>>()
  /** apiKey -> ms of the last recorded use */
  const lastUsed = new Map<string, number>()
  /** fingerprint -> apiKey: the Redis store's fingerprint index */
  const fingerprints = new Map<string, string>()
  /** apiKey -> ms of its revocation, until it is pruned: the Redis store's sorted set */
  const revokedIndex = new Map<string, number>()
  let keyIndexDone = false
  // Copies in and out, lists included: a caller changing what it got changes nothing stored.
  const withLastUse = (record: KeyRecord): KeyRecord => {
    const used = lastUsed.get(record.apiKey)
    const copy = record.scopes === undefined ? { ...record } : { ...record, scopes: [...record.scopes] }
    return used === undefined ? copy : { ...copy, lastUsedAt: new Date(used).toISOString() }
  }

  return {
    revokeOwnerKeys (owner, at) {
      const revokedKeys: string[] = []
      for (const apiKey of ownerKeys.get(owner) ?? []) {
        const record = keys.get(apiKey)
        if (record === undefined || record.revokedAt !== undefined) continue
        keys.set(apiKey, { ...record, revokedAt: at })
        revokedIndex.set(apiKey, Date.parse(at))
        revokedKeys.push(apiKey)
      }
      ownerKeys.delete(owner)
      return revokedKeys
    },
    async getKey (apiKey) {
      const key = keys.get(apiKey)
      return key === undefined ? null : withLastUse(key)
    },
    async createKey (record, maxActiveKeys) {
      // No await between the checks and the write: one step, as the Redis script is.
      if (keys.has(record.apiKey)) return 'exists'
      if (record.fingerprint !== undefined && fingerprints.has(record.fingerprint)) return 'exists'
      let owned = ownerKeys.get(record.owner)
      if (maxActiveKeys !== undefined && activeKeys(keys, owned ?? [], now()) >= maxActiveKeys) return 'limit-reached'
      const { lastUsedAt: _, ...stored } = record
      keys.set(record.apiKey, stored.scopes === undefined ? stored : { ...stored, scopes: [...stored.scopes] })
      if (owned === undefined) ownerKeys.set(record.owner, owned = new Set())
      owned.add(record.apiKey)
      if (record.fingerprint !== undefined) fingerprints.set(record.fingerprint, record.apiKey)
      return 'created'
    },
    async listKeys (owner) {
      const apiKeys = owner === undefined ? [...keys.keys()] : [...ownerKeys.get(owner) ?? []]
      return apiKeys.flatMap((apiKey) => {
        const record = keys.get(apiKey)
        return record === undefined || record.prunedAt !== undefined ? [] : [withLastUse(record)]
      }).sort(newestFirst)
    },
    async revokeKey (apiKey, at, owner) {
      const record = keys.get(apiKey)
      if (record === undefined || (owner !== undefined && record.owner !== owner)) return { outcome: 'not-found', record: null }
      if (record.revokedAt !== undefined) return { outcome: 'already-revoked', record: withLastUse(record) }
      const revoked = { ...record, revokedAt: at }
      keys.set(apiKey, revoked)
      revokedIndex.set(apiKey, Date.parse(at))
      announce({ type: 'revoked', apiKey })
      return { outcome: 'revoked', record: withLastUse(revoked) }
    },
    async updateKey (apiKey, { scopes, expiresAt }) {
      const record = keys.get(apiKey)
      if (record === undefined) return { outcome: 'not-found', record: null }
      if (record.revokedAt !== undefined) return { outcome: 'revoked', record: withLastUse(record) }
      const { expiresAt: oldExpiry, ...rest } = record
      const expiry = expiresAt === undefined ? oldExpiry : expiresAt ?? undefined
      const updated: KeyRecord = {
        ...rest,
        ...(expiry !== undefined && { expiresAt: expiry }),
        ...(scopes !== undefined && { scopes: [...scopes] })
      }
      keys.set(apiKey, updated)
      announce({ type: 'changed', apiKey })
      return { outcome: 'updated', record: withLastUse(updated) }
    },
    async pruneRevokedKeys (revokedBefore, max) {
      const due = [...revokedIndex].filter(([, at]) => at <= revokedBefore).sort((a, b) => a[1] - b[1]).slice(0, max)
      let pruned = 0
      for (const [apiKey] of due) {
        revokedIndex.delete(apiKey)
        const record = keys.get(apiKey)
        if (record?.revokedAt === undefined) continue
        keys.set(apiKey, tombstone(record, new Date(now()).toISOString()))
        ownerKeys.get(record.owner)?.delete(apiKey)
        lastUsed.delete(apiKey)
        pruned++
      }
      return pruned
    },
    async backfillKeyIndex (fingerprintOf) {
      if (keyIndexDone) return 0
      let indexed = 0
      for (const [apiKey, record] of keys) {
        const fingerprint = record.fingerprint ?? (record.publicKey === undefined ? undefined : fingerprintOf(record.publicKey))
        if (fingerprint === undefined) continue
        if (record.fingerprint === undefined) keys.set(apiKey, { ...record, fingerprint })
        if (!fingerprints.has(fingerprint)) fingerprints.set(fingerprint, apiKey)
        if (record.revokedAt !== undefined && record.prunedAt === undefined && !revokedIndex.has(apiKey)) revokedIndex.set(apiKey, Date.parse(record.revokedAt))
        indexed++
      }
      keyIndexDone = true
      return indexed
    },
    async touchKey (apiKey, atMs) {
      if (!keys.has(apiKey)) return
      if ((lastUsed.get(apiKey) ?? 0) < atMs) lastUsed.set(apiKey, atMs)
    }
  }
}
