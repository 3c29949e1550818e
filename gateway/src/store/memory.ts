// Size: TEMPORARY (issue 33): the house-store branch splits this file by concern; drop this line when that split is merged.
import type { KeyEvent, KeyEventListener, KeyRecord, RateCounter, RateOutcome, SigningKeyRing, Store, UserRecord } from './types.js'
import { RATE_SLACK_MS, newUserId, newestFirst } from './types.js'

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

/** The embedded store: one process's memory, lost at exit. Same contract as the Redis store. */
export function createMemoryStore (now: () => number = Date.now): Store {
  // Expiring entries are swept lazily on access and by a timer that never keeps the process alive.
  /** rememberOnce's marks: when each expires, and which call made it (forget takes back only its own) */
  const remembered = new Map<string, { expiresAt: number; serial: number }>()
  let marks = 0
  const counters = new Map<string, { count: number; expiresAt: number }>()
  /** putOnce's values, each taken at most once */
  const onces = new Map<string, { value: string; expiresAt: number }>()
  /** rate counter key -> the ms from which it is back to its full limit (types.ts: RateCounter) */
  const rates = new Map<string, number>()
  /** usage analytics' buckets (Store.addUsageCounts): field -> count, and when the bucket expires */
  const usage = new Map<string, { expiresAt: number; counts: Map<string, number> }>()
  const sweep = setInterval(() => {
    const t = now()
    for (const [key, { expiresAt }] of remembered) if (expiresAt <= t) remembered.delete(key)
    for (const [key, counter] of counters) if (counter.expiresAt <= t) counters.delete(key)
    for (const [key, { expiresAt }] of onces) if (expiresAt <= t) onces.delete(key)
    for (const [key, fullAt] of rates) if (fullAt <= t) rates.delete(key)
    for (const [name, bucket] of usage) if (bucket.expiresAt <= t) usage.delete(name)
  }, 10_000)
  sweep.unref()
  const users = new Map<string, UserRecord>()
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
  const listeners = new Set<KeyEventListener>()
  // Copies in and out, lists included: a caller changing what it got changes nothing stored.
  const withLastUse = (record: KeyRecord): KeyRecord => {
    const used = lastUsed.get(record.apiKey)
    const copy = record.scopes === undefined ? { ...record } : { ...record, scopes: [...record.scopes] }
    return used === undefined ? copy : { ...copy, lastUsedAt: new Date(used).toISOString() }
  }
  const userCopy = (user: UserRecord): UserRecord => ({ ...user, scopes: [...user.scopes] })
  const announce = (event: KeyEvent): void => {
    for (const listener of listeners) listener(event)
  }
  /** The same steps as the Redis script, with no await between the check and the count. */
  const rate = (counters: readonly RateCounter[], count: boolean): RateOutcome => {
    const t = now()
    let allowed = true
    const backlogMs = counters.map(({ key, limit, windowMs }) => {
      const backlog = Math.max(0, (rates.get(key) ?? 0) - t)
      if (backlog + windowMs / limit > windowMs + RATE_SLACK_MS) allowed = false
      return backlog
    })
    if (count && allowed) {
      counters.forEach(({ key, limit, windowMs }, i) => {
        const backlog = (backlogMs[i] as number) + windowMs / limit
        backlogMs[i] = backlog
        rates.set(key, t + backlog)
      })
    }
    return { allowed, backlogMs }
  }
  const announceRevoked = (apiKey: string): void => { announce({ type: 'revoked', apiKey }) }
  let signingKey: string | undefined
  /** previous signing keys (PEM) and the ms at which each retires */
  const previousSigningKeys = new Map<string, number>()
  const signingKeyRing = (): SigningKeyRing | null => {
    if (signingKey === undefined) return null
    const t = now()
    for (const [pem, retiresAt] of previousSigningKeys) if (retiresAt <= t) previousSigningKeys.delete(pem)
    const previous = [...previousSigningKeys].map(([pem, retiresAt]) => ({ pem, retiresAt })).sort((a, b) => a.retiresAt - b.retiresAt)
    return { current: signingKey, previous }
  }

  return {
    kind: 'memory',
    // nothing here can fail to answer
    errors: 0,
    async getUser (username) {
      const user = users.get(username)
      return user === undefined ? null : userCopy(user)
    },
    async putUser (username, passwordHash, scopes) {
      const at = new Date(now()).toISOString()
      const existing = users.get(username)
      const user = {
        username,
        passwordHash,
        createdAt: existing?.createdAt ?? at,
        updatedAt: at,
        scopes: [...scopes ?? existing?.scopes ?? []],
        id: existing?.id ?? newUserId(),
        credential: newUserId()
      }
      users.set(username, user)
      // a new password (or a new user under an old name) ends the tokens issued before: say so
      announce({ type: 'user-changed', username })
      return userCopy(user)
    },
    async setUserScopes (username, scopes) {
      const user = users.get(username)
      if (user === undefined) return null
      user.scopes = [...scopes]
      announce({ type: 'user-changed', username })
      return userCopy(user)
    },
    async countUsers () {
      return users.size
    },
    async listUsers () {
      return [...users.values()].map(userCopy).sort((a, b) => a.username < b.username ? -1 : 1)
    },
    async removeUser (username) {
      const revokedKeys: string[] = []
      const at = new Date(now()).toISOString()
      for (const apiKey of ownerKeys.get(username) ?? []) {
        const record = keys.get(apiKey)
        if (record === undefined || record.revokedAt !== undefined) continue
        keys.set(apiKey, { ...record, revokedAt: at })
        revokedIndex.set(apiKey, Date.parse(at))
        revokedKeys.push(apiKey)
      }
      ownerKeys.delete(username)
      const removed = users.delete(username)
      for (const apiKey of revokedKeys) announceRevoked(apiKey)
      if (removed) announce({ type: 'user-changed', username })
      return { removed, revokedKeys }
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
      if (maxActiveKeys !== undefined) {
        const t = now()
        let active = 0
        for (const apiKey of owned ?? []) {
          const key = keys.get(apiKey)
          if (key !== undefined && key.revokedAt === undefined && (key.expiresAt === undefined || Date.parse(key.expiresAt) > t)) active++
        }
        if (active >= maxActiveKeys) return 'limit-reached'
      }
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
      announceRevoked(apiKey)
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
    },
    async watchKeys (listener) {
      // One process: nothing can be missed, but a listener starts from a clean slate as on Redis.
      listeners.add(listener)
      listener({ type: 'resync' })
      return async () => { listeners.delete(listener) }
    },
    async getOrCreateSigningKey (candidate) {
      signingKey ??= candidate
      return signingKey
    },
    async getSigningKeyRing () {
      return signingKeyRing()
    },
    async rotateSigningKey (candidate, retireAfterMs) {
      const retiresAt = now() + retireAfterMs
      const replaced = signingKey !== undefined && signingKey !== candidate ? { pem: signingKey, retiresAt } : null
      if (replaced !== null) previousSigningKeys.set(replaced.pem, retiresAt)
      previousSigningKeys.delete(candidate)
      signingKey = candidate
      return { ...signingKeyRing() as SigningKeyRing, replaced }
    },
    async rememberOnce (key, ttlMs) {
      // Nothing here can time out: a call that fails has written nothing.
      const existing = remembered.get(key)
      if (existing !== undefined && existing.expiresAt > now()) return false
      const serial = ++marks
      remembered.set(key, { expiresAt: now() + ttlMs, serial })
      return {
        forget: async () => {
          if (remembered.get(key)?.serial === serial) remembered.delete(key)
        }
      }
    },
    async putOnce (key, value, ttlMs) {
      onces.set(key, { value, expiresAt: now() + ttlMs })
    },
    async takeOnce (key) {
      const held = onces.get(key)
      onces.delete(key)
      return held !== undefined && held.expiresAt > now() ? held.value : null
    },
    async hit (key, windowMs) {
      const t = now()
      let counter = counters.get(key)
      if (counter === undefined || counter.expiresAt <= t) {
        counter = { count: 0, expiresAt: t + windowMs }
        counters.set(key, counter)
      }
      counter.count++
      return { count: counter.count, resetMs: counter.expiresAt - t }
    },
    async resetHits (key) {
      counters.delete(key)
    },
    async countRate (counters) {
      return rate(counters, true)
    },
    async peekRate (counters) {
      return rate(counters, false)
    },
    async addUsageCounts (buckets) {
      const t = now()
      for (const { name, ttlSeconds, counts } of buckets) {
        let bucket = usage.get(name)
        if (bucket === undefined || bucket.expiresAt <= t) usage.set(name, bucket = { expiresAt: 0, counts: new Map() })
        bucket.expiresAt = t + ttlSeconds * 1000
        for (const [field, n] of counts) bucket.counts.set(field, (bucket.counts.get(field) ?? 0) + n)
      }
    },
    async readUsageCounts (names) {
      const t = now()
      return names.map((name) => {
        const bucket = usage.get(name)
        return bucket === undefined || bucket.expiresAt <= t ? new Map() : new Map(bucket.counts)
      })
    },
    async ping () {},
    async close () { clearInterval(sweep) }
  }
}
