// The key registry's lifecycle parts, unit by unit: the last use written at most once per key per
// interval and never awaited, the cache dropped on revocation and on resync, and a store read that
// races a revocation never caching the stale key.
import t from 'tap'
import { createKeyRegistry } from '../../../../gateway/src/keys/key-registry.js'
import type { KeyEventListener, Store } from '../../../../gateway/src/store/index.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { countingStore, rsaPair, signBase64 } from '../../../helpers/auth-fixtures.js'

const pair = rsaPair()
const input = { owner: 'alice', name: 'laptop', publicKey: pair.spkiPem, signature: signBase64(pair.privateKey, 'laptop') }

t.test('recordUse: one store write per key per interval, whatever the traffic', async (t) => {
  const { store, calls } = countingStore()
  const keys = createKeyRegistry(store, { cacheSize: 10, lastUsedIntervalMs: 60_000 })
  const record = await keys.register(input)
  const key = await keys.lookup(record.apiKey)
  if (key === null) throw new Error('registered key not found')
  const start = 1_800_000_000_000
  for (let i = 0; i < 1000; i++) keys.recordUse(key, start + i * 50)
  t.equal(calls.touchKey, 1, '1000 uses within 50 s: one write')
  keys.recordUse(key, start + 60_000)
  t.equal(calls.touchKey, 2, 'the first use after the interval: a second write')
  await new Promise((resolve) => setImmediate(resolve))
  t.equal((await store.getKey(record.apiKey))?.lastUsedAt, new Date(start + 60_000).toISOString())
})

t.test('recordUse never waits for the store and swallows its failures', async (t) => {
  const errors: unknown[] = []
  const hanging: Store = { ...createMemoryStore(), touchKey: async () => await new Promise<void>(() => {}) }
  const failing: Store = { ...createMemoryStore(), touchKey: async () => { throw new Error('Redis is away') } }
  for (const [label, store] of [['a store that never answers', hanging], ['a store that fails', failing]] as const) {
    const keys = createKeyRegistry(store, { cacheSize: 10, onRecordUseError: (err) => { errors.push(err) } })
    const record = await keys.register(input)
    const key = await keys.lookup(record.apiKey)
    if (key === null) throw new Error('registered key not found')
    t.equal(keys.recordUse(key), undefined, `${label}: returns at once`)
  }
  await new Promise((resolve) => setImmediate(resolve))
  t.match(errors, [{ message: 'Redis is away' }], 'the failure is reported to the logger, and goes no further')
})

t.test('revocation and resync drop cached keys', async (t) => {
  const { store, calls } = countingStore()
  const writer = createKeyRegistry(store, { cacheSize: 10 })
  const reader = createKeyRegistry(store, { cacheSize: 10 })
  t.teardown(async () => { await writer.close(); await reader.close() })
  const record = await writer.register(input)
  t.ok(await reader.lookup(record.apiKey), 'read once')
  const reads = calls.getKey
  t.ok(await reader.lookup(record.apiKey), 'then from the cache')
  t.equal(calls.getKey, reads, 'no store read')
  t.equal((await writer.revoke(record.apiKey, 'alice')).outcome, 'revoked')
  t.equal(await reader.lookup(record.apiKey), null, 'the other registry heard the revocation')
  t.equal(await writer.lookup(record.apiKey), null, 'and so did the one that revoked')
  t.match(await reader.check(record.apiKey), { status: 'revoked', owner: 'alice' })
  const afterRevocation = calls.getKey
  await reader.check(record.apiKey)
  t.equal(calls.getKey, afterRevocation, 'a revoked key is cached too: hammering it costs no store read')
})

t.test('a store read that races a revocation does not cache the stale key', async (t) => {
  let announce: KeyEventListener = () => {}
  let releaseRead: () => void = () => {}
  const inner = createMemoryStore()
  const store: Store = {
    ...inner,
    watchKeys: async (listener) => { announce = listener; return async () => {} },
    getKey: async (apiKey) => {
      const record = await inner.getKey(apiKey)
      await new Promise<void>((resolve) => { releaseRead = resolve })
      return record
    }
  }
  await createKeyRegistry(inner, { cacheSize: 10 }).register(input)
  const keys = createKeyRegistry(store, { cacheSize: 10 })
  const apiKey = (await inner.listKeys('alice'))[0]?.apiKey ?? ''
  const pending = keys.check(apiKey)
  await new Promise((resolve) => setImmediate(resolve))
  // The revocation lands while the read is in flight; the read then answers the old record.
  await inner.revokeKey(apiKey, new Date().toISOString())
  announce({ type: 'revoked', apiKey })
  releaseRead()
  t.equal((await pending)?.status, 'active', 'the racing read answers what it read')
  const next = keys.check(apiKey)
  await new Promise((resolve) => setImmediate(resolve))
  releaseRead()
  t.equal((await next)?.status, 'revoked', 'but did not cache it: the next lookup reads the revocation')
})

t.test('expiry is judged against the clock given, from the cache', async (t) => {
  const { store, calls } = countingStore()
  const keys = createKeyRegistry(store, { cacheSize: 10 })
  const expiresAt = new Date(Date.now() + 60_000).toISOString()
  const record = await keys.register({ ...input, expiresAt })
  t.equal(record.expiresAt, expiresAt)
  t.equal((await keys.check(record.apiKey, Date.parse(expiresAt) - 1))?.status, 'active', 'a millisecond before: active')
  t.same(await keys.check(record.apiKey, Date.parse(expiresAt)), { status: 'expired', owner: 'alice', at: expiresAt }, 'at expiresAt: expired')
  t.equal(calls.getKey, 0, 'no store read: the cached entry holds the expiry')
})
