// A key's scopes through the registry, on both stores: what registerForUser stores (a subset of
// the user's, by default a snapshot of them), and `update` (scopes and expiry): checked, refused
// for a revoked or expired key, and seen by this process's cache at once.
import t from 'tap'
import { createKeyRegistry, type KeyRegistry } from '../../../../gateway/src/keys/key-registry.js'
import type { Store } from '../../../../gateway/src/store/index.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createRedisStore } from '../../../../gateway/src/store/redis.js'
import { captureGatewayError, rsaPair, signBase64, type RsaPair } from '../../../helpers/auth-fixtures.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const stores: Record<string, (t: Test) => Promise<Store>> = {
  memory: async () => createMemoryStore(),
  redis: async (t) => {
    const url = await testRedisUrl()
    const prefix = uniquePrefix('key-scopes')
    const store = await createRedisStore({ url, prefix, commandTimeoutMs: 1000 })
    t.teardown(async () => {
      await store.close()
      await deletePrefix(url, prefix)
    })
    return store
  }
}

const input = (pair: RsaPair, name: string, scopes?: string[]) => ({
  owner: 'alice', name, publicKey: pair.spkiPem, signature: signBase64(pair.privateKey, name), ...(scopes !== undefined && { scopes })
})

/** the scopes the cached key carries now (undefined: every scope of its user) */
async function cachedScopes (keys: KeyRegistry, apiKey: string): Promise<readonly string[] | undefined> {
  const found = await keys.check(apiKey)
  if (found?.status !== 'active') throw new Error(`${apiKey} is not active`)
  return found.key.scopes?.list
}

for (const [kind, make] of Object.entries(stores)) {
  t.test(`${kind} store`, async (t) => {
    const store = await make(t)
    const keys = createKeyRegistry(store, { cacheSize: 100 })
    t.teardown(async () => { await keys.close() })
    await store.putUser('alice', 'hash', ['clients:read', 'clients:write'])

    t.test('registerForUser: a subset, a snapshot by default, never more than the user has', async (t) => {
      const narrow = await keys.registerForUser(input(rsaPair(), 'narrow', ['clients:read']))
      t.same(narrow?.scopes, ['clients:read'])
      const all = rsaPair()
      const snapshot = await keys.registerForUser(input(all, 'all'))
      t.same(snapshot?.scopes, ['clients:read', 'clients:write'], 'no scopes asked: the user\'s, stored with the key')
      t.same(await cachedScopes(keys, all.apiKey), ['clients:read', 'clients:write'])
      const extra = rsaPair()
      const err = await captureGatewayError(() => keys.registerForUser(input(extra, 'extra', ['clients:read', 'admin'])))
      t.equal(err.code, 'VALIDATION_FAILED')
      t.match(err.message, /admin is not among the scopes of your user \(clients:read, clients:write\)/)
      t.same(err.extra, { errors: [{ field: 'scopes', message: err.message.replace(/^scopes: /, '') }] })
      t.equal(await store.getKey(extra.apiKey), null, 'nothing stored')
      t.equal((await captureGatewayError(() => keys.registerForUser(input(extra, 'extra', ['bad scope'])))).code, 'VALIDATION_FAILED')
      t.equal(await keys.registerForUser({ ...input(extra, 'extra'), owner: 'nobody' }), undefined, 'no such user: nothing registered')
    })

    t.test('update: scopes and expiry, checked first, applied for this process at once', async (t) => {
      const pair = rsaPair()
      await keys.registerForUser(input(pair, 'to change', ['clients:read']))
      t.same(await cachedScopes(keys, pair.apiKey), ['clients:read'], 'cached with its scopes')

      const widened = await keys.update(pair.apiKey, { scopes: ['clients:write', 'clients:read'] })
      t.equal(widened.outcome, 'updated')
      t.match(widened.record, { apiKey: pair.apiKey, scopes: ['clients:read', 'clients:write'], status: 'active' })
      t.same(await cachedScopes(keys, pair.apiKey), ['clients:read', 'clients:write'], 'the cached key has the new scopes at once')

      const expiresAt = new Date(Date.now() + 3_600_000).toISOString()
      const expiring = await keys.update(pair.apiKey, { expiresAt: expiresAt.replace('Z', '+00:00') })
      t.equal(expiring.record?.expiresAt, expiresAt, 'an expiry, as registration takes it, stored in UTC')
      t.same(expiring.record?.scopes, ['clients:read', 'clients:write'], 'the scopes kept')
      const cleared = await keys.update(pair.apiKey, { expiresAt: null })
      t.equal(cleared.record?.expiresAt, undefined, 'null: no expiry')
      t.same((await store.getKey(pair.apiKey))?.expiresAt, undefined)

      const cases: Array<[string, Parameters<KeyRegistry['update']>[1], RegExp]> = [
        ['nothing to change', {}, /Give scopes, expiresAt or both/],
        ['a scope the user does not have', { scopes: ['clients:read', 'admin', 'ops'] }, /^scopes: admin, ops are not among the scopes of its user alice/],
        ['not a scope', { scopes: ['a b'] }, /^scopes: "a b" is not a scope/],
        ['an expiry in the past', { expiresAt: '2020-01-01T00:00:00Z' }, /^expiresAt must be in the future/],
        ['an expiry without a zone', { expiresAt: '2030-01-01T00:00:00' }, /^expiresAt must be an ISO 8601 date and time with a time zone/]
      ]
      for (const [label, changes, message] of cases) {
        const err = await captureGatewayError(() => keys.update(pair.apiKey, changes))
        t.equal(err.code, 'VALIDATION_FAILED', label)
        t.match(err.message, message, label)
      }
      t.same((await store.getKey(pair.apiKey))?.scopes, ['clients:read', 'clients:write'], 'no refused change changed anything')
      t.same(await keys.update('f'.repeat(64), { scopes: [] }), { outcome: 'not-found', record: null })
      t.same(await keys.update('not an apiKey', { scopes: [] }), { outcome: 'not-found', record: null })
      t.same((await keys.update(pair.apiKey, { scopes: [] })).record?.scopes, [], 'every scope taken: an empty list')
      t.same(await cachedScopes(keys, pair.apiKey), [])
    })

    t.test('update: a revoked or expired key is left as it is', async (t) => {
      const revoked = rsaPair()
      await keys.registerForUser(input(revoked, 'revoked'))
      await keys.revoke(revoked.apiKey)
      const answer = await keys.update(revoked.apiKey, { scopes: ['clients:read'] })
      t.equal(answer.outcome, 'revoked')
      t.equal(answer.record?.status, 'revoked')
      t.same((await store.getKey(revoked.apiKey))?.scopes, ['clients:read', 'clients:write'], 'unchanged')

      const expired = rsaPair()
      await keys.registerForUser({ ...input(expired, 'expired'), expiresAt: new Date(Date.now() + 1000).toISOString() })
      const later = Date.now() + 5000
      const late = await keys.update(expired.apiKey, { expiresAt: new Date(later + 3_600_000).toISOString() }, later)
      t.equal(late.outcome, 'expired', 'an expired key stays expired: register a new one')
      t.equal(late.record?.status, 'expired')
    })
  })
}
