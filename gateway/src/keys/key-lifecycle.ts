// A registered key's life after registration: its record read and listed (with its status), its
// scopes and expiry changed, its revocation, its uses noted. Each change reaches this process's
// cache at once (key-cache.ts), and every other gateway's through the store's announcement.
import { API_KEY_PATTERN } from '#client/protocol'
import { GatewayError } from '../errors.js'
import { LruCache } from '../lib/lru-cache.js'
import { decodeCursor, pageOf } from '../lib/paging.js'
import { newestFirst, type KeyRecord, type Store } from '../store/index.js'
import { missingScopes, normaliseScopes, notHeldError } from '../users/scopes.js'
import type { KeyCache } from './key-cache.js'
import { keyStatus, parseExpiresAt, type KeyStatus } from './key-expiry.js'
import type { KeyUpkeep } from './key-upkeep.js'
import type { KeyRegistry, KeyRegistryOptions } from './registry-types.js'

export const DEFAULT_LAST_USED_INTERVAL_MS = 60_000

/** The keys after a key-list cursor ([createdAt, apiKey] of the last key given), in newestFirst order. */
function afterKeyCursor (cursor: string | undefined): ((record: KeyRecord) => boolean) | undefined {
  if (cursor === undefined) return undefined
  const [createdAt, apiKey] = decodeCursor(cursor, 2, (part, i) => i === 0 ? !Number.isNaN(Date.parse(part)) : API_KEY_PATTERN.test(part)) as [string, string]
  const last = { apiKey, createdAt } as KeyRecord
  return (record) => newestFirst(record, last) > 0
}

function withStatus (records: KeyRecord[], nowMs: number): Array<KeyRecord & { status: KeyStatus }> {
  return records.map((record) => ({ ...record, status: keyStatus(record, nowMs) }))
}

export interface KeyLifecycleParts {
  upkeep: Pick<KeyUpkeep, 'prune'>
  cache: Pick<KeyCache, 'onEvent'>
}

export function createKeyLifecycle (
  store: Pick<Store, 'getKey' | 'listKeys' | 'revokeKey' | 'updateKey' | 'getUser' | 'touchKey'>,
  options: Pick<KeyRegistryOptions, 'cacheSize' | 'revokedKeyRetentionMs' | 'lastUsedIntervalMs' | 'onRecordUseError'>,
  { upkeep, cache }: KeyLifecycleParts
): Pick<KeyRegistry, 'get' | 'list' | 'listAll' | 'revoke' | 'update' | 'recordUse'> {
  const lastUsedIntervalMs = options.lastUsedIntervalMs ?? DEFAULT_LAST_USED_INTERVAL_MS
  /** apiKey -> when this process last wrote a use; kept apart from the cache so a resync keeps it */
  const usesRecorded = new LruCache<string, number>(Math.max(options.cacheSize, 1024))
  return {
    async get (apiKey, nowMs = Date.now()) {
      if (!API_KEY_PATTERN.test(apiKey)) return null
      const record = await store.getKey(apiKey)
      return record === null ? null : { ...record, status: keyStatus(record, nowMs) }
    },

    async list (owner, page = {}, nowMs = Date.now()) {
      // checked before any store work
      const after = afterKeyCursor(page.cursor)
      let records = await store.listKeys(owner)
      // Past its retention a revoked key is listed no more, cut to a tombstone yet or not (a prune
      // batch is the oldest keys of every owner, not necessarily these); only then is it worth a prune.
      const retentionMs = options.revokedKeyRetentionMs
      if (retentionMs !== undefined) {
        const due = (record: KeyRecord): boolean => record.revokedAt !== undefined && Date.parse(record.revokedAt) <= nowMs - retentionMs
        if (records.some(due)) {
          await upkeep.prune(false).catch(() => {})
          records = records.filter((record) => !due(record))
        }
      }
      const listed = pageOf(records, page, (record) => [record.createdAt, record.apiKey], after)
      return { items: withStatus(listed.items, nowMs), nextCursor: listed.nextCursor }
    },

    async listAll (owner, nowMs = Date.now()) {
      return withStatus(await store.listKeys(owner), nowMs)
    },

    async revoke (apiKey, owner) {
      if (!API_KEY_PATTERN.test(apiKey)) return { outcome: 'not-found', record: null }
      const result = await store.revokeKey(apiKey, new Date().toISOString(), owner)
      // This process at once, whatever the announcement's way back.
      if (result.outcome !== 'not-found') cache.onEvent({ type: 'revoked', apiKey })
      return result
    },

    async update (apiKey, changes, nowMs = Date.now()) {
      if (changes.scopes === undefined && changes.expiresAt === undefined) {
        throw new GatewayError('VALIDATION_FAILED', 'Give scopes, expiresAt or both: the changes to make', {
          extra: { errors: [{ field: 'scopes', message: 'give scopes, expiresAt or both' }] }
        })
      }
      const scopes = changes.scopes === undefined ? undefined : normaliseScopes(changes.scopes)
      const expiresAt = changes.expiresAt === undefined || changes.expiresAt === null ? changes.expiresAt : parseExpiresAt(changes.expiresAt, nowMs)
      if (!API_KEY_PATTERN.test(apiKey)) return { outcome: 'not-found', record: null }
      const current = await store.getKey(apiKey)
      if (current === null) return { outcome: 'not-found', record: null }
      const status = keyStatus(current, nowMs)
      // An expired key stays expired, as a revoked one stays revoked: register a new one.
      if (status !== 'active') return { outcome: status, record: { ...current, status } }
      if (scopes !== undefined) {
        const held = (await store.getUser(current.owner))?.scopes ?? []
        const extra = missingScopes(scopes, new Set(held))
        if (extra.length > 0) throw notHeldError(extra, held, `its user ${current.owner}`)
      }
      const result = await store.updateKey(apiKey, { ...(scopes !== undefined && { scopes }), ...(expiresAt !== undefined && { expiresAt }) })
      // This process at once, whatever the announcement's way back.
      if (result.outcome !== 'not-found') cache.onEvent({ type: 'changed', apiKey })
      return { outcome: result.outcome, record: result.record === null ? null : { ...result.record, status: keyStatus(result.record, nowMs) } }
    },

    recordUse (key, nowMs = Date.now()) {
      const last = usesRecorded.get(key.apiKey)
      if (last !== undefined && nowMs - last < lastUsedIntervalMs) return
      usesRecorded.set(key.apiKey, nowMs)
      store.touchKey(key.apiKey, nowMs).catch((err: unknown) => { options.onRecordUseError?.(err, key.apiKey) })
    }
  }
}
