import { createHash, generateKeyPairSync, sign } from 'node:crypto'
import t from 'tap'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { createKeyRegistry } from '../../../../gateway/src/keys/key-registry.js'
import type { KeyRecord, Store } from '../../../../gateway/src/store/index.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { captureGatewayError, countingStore, rsaPair, signBase64 } from '../../../helpers/auth-fixtures.js'

const pair = rsaPair()
const other = rsaPair()
const spkiHash = (pemText: string): string =>
  createHash('sha256').update(Buffer.from(pemText.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64')).digest('hex')
const input = (
  over: Partial<{ owner: string; name: string; publicKey: string; signature: string }> = {}
): { owner: string; name: string; publicKey: string; signature: string } => {
  const name = over.name ?? 'laptop'
  return { owner: 'alice', name, publicKey: pair.spkiPem, signature: signBase64(pair.privateKey, name), ...over }
}

t.test('register: the happy path stores and returns the record', async (t) => {
  const store = createMemoryStore()
  const keys = createKeyRegistry(store, { cacheSize: 10 })
  const before = Date.now()
  const record = await keys.register(input())
  t.equal(record.apiKey, spkiHash(pair.spkiPem))
  t.equal(record.owner, 'alice')
  t.equal(record.name, 'laptop')
  t.equal(spkiHash(record.publicKey ?? ''), record.apiKey, 'stored as SPKI PEM')
  t.match(record.publicKey, /^-----BEGIN PUBLIC KEY-----\n/)
  t.ok(Date.parse(record.createdAt) >= before - 1000 && Date.parse(record.createdAt) <= Date.now() + 1000, 'createdAt is now')
  t.same(await store.getKey(record.apiKey), record, 'the store holds the record')
})

t.test('register: a PKCS#1 key is registered under the SPKI hash', async (t) => {
  const keys = createKeyRegistry(createMemoryStore(), { cacheSize: 10 })
  const record = await keys.register(input({ publicKey: pair.pkcs1Pem }))
  t.equal(record.apiKey, spkiHash(pair.spkiPem))
})

t.test('register: a name with non-ASCII characters is signed over its UTF-8 bytes', async (t) => {
  const keys = createKeyRegistry(createMemoryStore(), { cacheSize: 10 })
  const record = await keys.register(input({ name: 'clé de Zoë 🔑' }))
  t.equal(record.name, 'clé de Zoë 🔑')
})

t.test('register: a signature that does not prove the name is INVALID_SIGNATURE', async (t) => {
  const good = signBase64(pair.privateKey, 'laptop')
  const cases: Array<[string, Partial<{ name: string; signature: string; publicKey: string }>]> = [
    ['signature over another name', { signature: signBase64(pair.privateKey, 'desktop') }],
    ['signature over the name plus a newline', { signature: signBase64(pair.privateKey, 'laptop\n') }],
    ['signature over the public key instead of the name', { signature: signBase64(pair.privateKey, pair.spkiPem) }],
    ['signature by another key pair', { signature: signBase64(other.privateKey, 'laptop') }],
    ['right signature, another public key', { publicKey: other.spkiPem, signature: good }],
    ['signature not base64', { signature: 'not base64!' }],
    ['signature wrapped over lines', { signature: (good.match(/.{1,64}/g) ?? []).join('\n') }],
    ['signature with a trailing newline', { signature: `${good}\n` }],
    ['signature truncated', { signature: good.slice(0, -4) }],
    ['empty signature', { signature: '' }]
  ]
  for (const [label, over] of cases) {
    t.test(label, async (t) => {
      const store = createMemoryStore()
      const keys = createKeyRegistry(store, { cacheSize: 10 })
      const err = await captureGatewayError(() => keys.register(input(over)))
      t.equal(err.code, 'INVALID_SIGNATURE')
      t.equal(err.statusCode, 400)
      t.equal(await store.getKey(spkiHash(over.publicKey ?? pair.spkiPem)), null, 'nothing stored')
      t.equal(await keys.lookup(spkiHash(over.publicKey ?? pair.spkiPem)), null, 'nothing cached')
    })
  }
})

t.test('register: a bad public key is INVALID_PUBLIC_KEY, checked before the signature', async (t) => {
  const keys = createKeyRegistry(createMemoryStore(), { cacheSize: 10 })
  const err = await captureGatewayError(() => keys.register(input({ publicKey: rsaPair(1024).spkiPem, signature: 'x' })))
  t.equal(err.code, 'INVALID_PUBLIC_KEY')
  t.equal(err.statusCode, 400)
})

t.test('register: a key registered once is a DUPLICATE_KEY in any form, for anyone', async (t) => {
  const store = createMemoryStore()
  const keys = createKeyRegistry(store, { cacheSize: 10 })
  const first = await keys.register(input())
  const cases: Array<[string, Partial<{ owner: string; name: string; publicKey: string; signature: string }>]> = [
    ['the same PEM again', {}],
    ['PKCS#1 form of the same key', { publicKey: pair.pkcs1Pem }],
    ['SPKI re-wrapped on one line with CRLF', {
      publicKey: `-----BEGIN PUBLIC KEY-----\r\n${pair.spkiPem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '')}\r\n-----END PUBLIC KEY-----\r\n`
    }],
    ['another name', { name: 'phone', signature: signBase64(pair.privateKey, 'phone') }],
    ['another owner', { owner: 'bob' }]
  ]
  for (const [label, over] of cases) {
    t.test(label, async (t) => {
      const err = await captureGatewayError(() => keys.register(input(over)))
      t.equal(err.code, 'DUPLICATE_KEY')
      t.equal(err.statusCode, 409)
      t.equal(err.extra?.apiKey, first.apiKey)
    })
  }
  t.same(await store.getKey(first.apiKey), first, 'the first registration is untouched')
  t.equal((await keys.lookup(first.apiKey))?.owner, 'alice', 'and so is the cached key')

  t.test('across registries sharing one store (two gateways)', async (t) => {
    const second = createKeyRegistry(store, { cacheSize: 10 })
    const err = await captureGatewayError(() => second.register(input({ owner: 'bob', publicKey: pair.pkcs1Pem })))
    t.equal(err.code, 'DUPLICATE_KEY')
  })
})

t.test('register: of two concurrent registrations of one key, exactly one succeeds', async (t) => {
  const variants: Array<[string, Store]> = [
    ['memory store', createMemoryStore()],
    ['memory store answering after a turn of the event loop', slowStore(createMemoryStore())]
  ]
  for (const [label, store] of variants) {
    t.test(label, async (t) => {
      const a = createKeyRegistry(store, { cacheSize: 10 })
      const b = createKeyRegistry(store, { cacheSize: 10 })
      const results = await Promise.allSettled([
        a.register(input({ owner: 'alice' })),
        b.register(input({ owner: 'bob', publicKey: pair.pkcs1Pem })),
        a.register(input({ owner: 'carol', name: 'other', signature: signBase64(pair.privateKey, 'other') }))
      ])
      const fulfilled = results.filter((r): r is PromiseFulfilledResult<KeyRecord> => r.status === 'fulfilled')
      const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      t.equal(fulfilled.length, 1, 'exactly one fulfils')
      t.same(rejected.map((r) => (r.reason as { code?: string }).code), ['DUPLICATE_KEY', 'DUPLICATE_KEY'])
      const winner = fulfilled[0]?.value
      t.same(await store.getKey(spkiHash(pair.spkiPem)), winner, 'the store holds the winner')
      t.equal((await a.lookup(spkiHash(pair.spkiPem)))?.owner, winner?.owner, 'registry a answers the winner')
      t.equal((await b.lookup(spkiHash(pair.spkiPem)))?.owner, winner?.owner, 'registry b answers the winner')
    })
  }
})

t.test('lookup', async (t) => {
  t.test('after register, from the cache: no store round trip', async (t) => {
    const { store, calls } = countingStore()
    const keys = createKeyRegistry(store, { cacheSize: 10 })
    const record = await keys.register(input())
    const key = await keys.lookup(record.apiKey)
    t.equal(calls.getKey, 0, 'store.getKey not called')
    t.equal((keys.check(record.apiKey) as { status?: string }).status, 'active', 'a cached key is answered at once, not through a promise')
    t.equal(key?.apiKey, record.apiKey)
    t.equal(key?.owner, 'alice')
    t.equal(key?.name, 'laptop')
    t.ok(key?.keyObject.equals(pair.publicKey))
  })

  t.test('a key registered elsewhere: one store read, then cached', async (t) => {
    const { store, calls } = countingStore()
    await createKeyRegistry(store, { cacheSize: 10 }).register(input())
    const keys = createKeyRegistry(store, { cacheSize: 10 })
    const apiKey = spkiHash(pair.spkiPem)
    const first = await keys.lookup(apiKey)
    t.equal(calls.getKey, 1)
    const second = await keys.lookup(apiKey)
    t.equal(calls.getKey, 1, 'the second lookup is served from the cache')
    t.equal(first?.owner, 'alice')
    t.equal(second?.owner, 'alice')
    t.ok(second?.keyObject.equals(pair.publicKey))
    t.equal(keys.cacheSize, 1)
  })

  t.test('with a cache of size 0, every lookup reads the store', async (t) => {
    const { store, calls } = countingStore()
    const keys = createKeyRegistry(store, { cacheSize: 0 })
    const record = await keys.register(input())
    t.equal((await keys.lookup(record.apiKey))?.owner, 'alice')
    t.equal((await keys.lookup(record.apiKey))?.owner, 'alice')
    t.equal(calls.getKey, 2)
    t.equal(keys.cacheSize, 0)
  })

  t.test('unknown and malformed keys are null; junk never reaches the store', async (t) => {
    const { store, calls } = countingStore()
    const keys = createKeyRegistry(store, { cacheSize: 10 })
    const apiKey = (await keys.register(input())).apiKey
    const cases: Array<[string, string, number]> = [
      ['well-formed, unknown', '0'.repeat(64), 1],
      ['uppercase hex of a registered key', apiKey.toUpperCase(), 0],
      ['63 characters', apiKey.slice(1), 0],
      ['65 characters', apiKey + 'a', 0],
      ['with a newline', apiKey + '\n', 0],
      ['empty', '', 0]
    ]
    for (const [label, value, reads] of cases) {
      const before = calls.getKey ?? 0
      t.equal(await keys.lookup(value), null, label)
      t.equal((calls.getKey ?? 0) - before, reads, `${label}: ${reads} store read(s)`)
    }
  })
  t.test('an unknown key is remembered as unknown for a second, not longer; registering it here forgets that', async (t) => {
    const { store, calls } = countingStore()
    const keys = createKeyRegistry(store, { cacheSize: 10 })
    const elsewhere = createKeyRegistry(store, { cacheSize: 10 })
    const apiKey = spkiHash(pair.spkiPem)
    const now = Date.now()
    for (let i = 0; i < 100; i++) t.equal(await keys.check(apiKey, now + i), null)
    t.equal(calls.getKey, 1, '100 asks in the same second: one store read')
    await elsewhere.register(input())
    t.equal(await keys.check(apiKey, now + 999), null, 'registered at another gateway: still unknown here within the second')
    t.equal((await keys.check(apiKey, now + 1000))?.status, 'active', 'and known after it')
    t.equal(calls.getKey, 2)

    const other2 = createKeyRegistry(store, { cacheSize: 10 })
    const otherKey = spkiHash(other.spkiPem)
    t.equal(await other2.check(otherKey), null)
    await other2.register({ owner: 'bob', name: 'phone', publicKey: other.spkiPem, signature: signBase64(other.privateKey, 'phone') })
    t.equal((await other2.check(otherKey))?.status, 'active', 'registered here: known at once')
  })
})

/** The memory store, but every call answers after a macrotask (as a network store would). */
function slowStore (inner: Store): Store {
  const wrapped = { ...inner } as Record<string, unknown>
  for (const [name, value] of Object.entries(inner)) {
    if (typeof value !== 'function') continue
    wrapped[name] = async (...args: unknown[]) => {
      await new Promise((resolve) => setImmediate(resolve))
      return await (value as (...a: unknown[]) => Promise<unknown>)(...args)
    }
  }
  return wrapped as unknown as Store
}

t.test('list: keys registered back to back list newest first, even within one millisecond', async (t) => {
  const keys = createKeyRegistry(createMemoryStore(), { cacheSize: 10 })
  const made: string[] = []
  for (let i = 0; i < 8; i++) {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519')
    const name = `k${i}`
    const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString()
    const record = await keys.register({ owner: 'alice', name, publicKey: pem, signature: sign(null, Buffer.from(name), privateKey).toString('base64') })
    made.unshift(record.apiKey)
  }
  const listed = (await keys.list('alice')).items
  t.same(listed.map((k) => k.apiKey), made, 'the order they were made, newest first')
  const times = listed.map((k) => Date.parse(k.createdAt))
  t.ok(times.every((ms, i) => i === 0 || ms < (times[i - 1] ?? 0)), 'each creation time is its own')
  t.ok((times[0] ?? 0) <= Date.now() + made.length, 'ahead of the clock by at most a millisecond a key')
})

t.test('list: a revoked key past its retention is left out; only a listing that meets one prunes', async (t) => {
  const DAY_MS = 24 * 3600_000
  const { store, calls } = countingStore()
  const keys = createKeyRegistry(store, { cacheSize: 10, revokedKeyRetentionMs: DAY_MS })
  const kept = await keys.register(input())
  const old = await keys.register(input({ name: 'phone', publicKey: other.spkiPem, signature: signBase64(other.privateKey, 'phone') }))
  const pruned = calls.pruneRevokedKeys ?? 0
  t.same((await keys.list('alice')).items.map((k) => k.name), ['phone', 'laptop'])
  await keys.revoke(kept.apiKey)
  t.same((await keys.list('alice')).items.map((k) => [k.name, k.status]), [['phone', 'active'], ['laptop', 'revoked']], 'within the retention: listed')
  t.equal(calls.pruneRevokedKeys, pruned, 'listings with nothing past the retention cost no prune')

  await store.revokeKey(old.apiKey, new Date(Date.now() - 2 * DAY_MS).toISOString())
  t.same((await keys.list('alice')).items.map((k) => k.name), ['laptop'], 'past the retention: left out')
  t.equal(calls.pruneRevokedKeys, pruned + 1, 'and that listing prunes')
  t.match(await store.getKey(old.apiKey), { prunedAt: String }, 'to a tombstone')
  t.same((await keys.list('alice')).items.map((k) => k.name), ['laptop'])
  t.equal(calls.pruneRevokedKeys, pruned + 1, 'once: a tombstone is not listed, so not due again')
})

t.test('list: a key past its retention that a prune left whole (another batch, a failed prune) is left out all the same', async (t) => {
  const DAY_MS = 24 * 3600_000
  const inner = createMemoryStore()
  const store: Store = { ...inner, pruneRevokedKeys: async () => { throw new Error('the store did not answer') } }
  const keys = createKeyRegistry(store, { cacheSize: 10, revokedKeyRetentionMs: DAY_MS })
  const record = await keys.register(input())
  await store.revokeKey(record.apiKey, new Date(Date.now() - 2 * DAY_MS).toISOString())
  const page = await keys.list('alice')
  t.same(page, { items: [], nextCursor: null }, 'not listed, and the failed prune fails no listing')
  t.equal((await store.getKey(record.apiKey))?.prunedAt, undefined, 'the record is still whole')
  t.equal((await keys.listAll('alice')).length, 1, 'listAll counts it (none pruned)')
})

t.test('register: a failed backfill of the key index fails the registration, and the next one tries it again; a failed prune fails none', async (t) => {
  const inner = createMemoryStore()
  let backfills = 0
  let prunes = 0
  const store: Store = {
    ...inner,
    backfillKeyIndex: async (fingerprintOf) => {
      if (++backfills === 1) throw new GatewayError('STORE_UNAVAILABLE', 'the store did not answer')
      return await inner.backfillKeyIndex(fingerprintOf)
    },
    pruneRevokedKeys: async () => {
      prunes++
      throw new GatewayError('STORE_UNAVAILABLE', 'the store did not answer')
    }
  }
  const keys = createKeyRegistry(store, { cacheSize: 10, revokedKeyRetentionMs: 1000 })
  t.equal((await captureGatewayError(async () => await keys.register(input()))).code, 'STORE_UNAVAILABLE', 'the first registration meets the failed backfill')
  t.equal(await inner.getKey(spkiHash(pair.spkiPem)), null, 'and stores nothing')
  t.equal((await keys.register(input())).apiKey, spkiHash(pair.spkiPem), 'the next one backfills again, and registers in spite of a failed prune')
  t.equal(prunes, 1, 'the prune was tried')
  await keys.register(input({ name: 'phone', publicKey: other.spkiPem, signature: signBase64(other.privateKey, 'phone') }))
  t.equal(backfills, 2, 'a backfill that succeeded is not run again by this process')
})
