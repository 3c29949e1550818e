// One contract, two stores: the embedded memory store and Redis pass the same suite, Redis in each
// of its shapes: one node, a Redis Cluster of three masters, a master found through Sentinel.
import t from 'tap'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createRedisStore } from '../../../../gateway/src/store/redis.js'
import { hashedPart, sameSlotKey } from '../../../../gateway/src/store/redis/key-names.js'
import type { RedisConnection } from '../../../../gateway/src/store/redis-connection.js'
import type { KeyEvent, KeyRecord, Store } from '../../../../gateway/src/store/index.js'
import { Redis } from 'ioredis'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { startRedisCluster, startRedisSentinel } from '../../../helpers/redis-topology.js'

type Test = Parameters<Parameters<typeof t.test>[0]>[0]
type StoreFactory = (t: Test) => Promise<Store>

/** A Redis store under a prefix of its own, deleted afterwards. */
const onRedis = (connection: RedisConnection): StoreFactory => async (t) => {
  const prefix = uniquePrefix('store')
  const store = await createRedisStore({ connection, prefix, commandTimeoutMs: 500 })
  t.teardown(async () => {
    await store.close()
    await deletePrefix(connection, prefix)
  })
  return store
}

const at = (iso: string): string => new Date(iso).toISOString()
const record = (apiKey: string, owner = 'alice'): KeyRecord => ({ apiKey, owner, name: 'k', publicKey: 'PEM', createdAt: '2026-01-01T00:00:00.000Z' })

/** The contract, for each store `factories` makes. */
function storeSuites (t: Test, factories: Record<string, StoreFactory>): void {
  for (const [kind, make] of Object.entries(factories)) {
    t.test(`${kind} store`, async (t) => {
      const store = await make(t)
      t.equal(store.kind, kind === 'memory' ? 'memory' : 'redis')
      await store.ping()

      t.equal(await store.getUser('alice'), null)
      t.equal(await store.countUsers(), 0)
      const created = await store.putUser('alice', 'hash-1')
      t.match(created, { username: 'alice', passwordHash: 'hash-1' })
      t.same(await store.getUser('alice'), created)
      const updated = await store.putUser('alice', 'hash-2')
      t.equal(updated.createdAt, created.createdAt, 'an update keeps the creation time')
      t.match(created.id, /^[\w-]{22}$/, 'a new user has a random id')
      t.equal(updated.id, created.id, 'a password change keeps the id')
      t.match(updated.credential, /^[\w-]{22}$/)
      t.not(updated.credential, created.credential, 'and makes a new credential (tokens issued before end)')
      t.equal((await store.getUser('alice'))?.passwordHash, 'hash-2')
      await store.putUser('bob', 'hash-3')
      t.equal(await store.countUsers(), 2)

      t.equal(await store.getKey('a'.repeat(64)), null)
      t.equal(await store.createKey(record('a'.repeat(64))), 'created')
      t.same(await store.getKey('a'.repeat(64)), record('a'.repeat(64)))
      t.equal(await store.createKey(record('a'.repeat(64), 'bob')), 'exists', 'a second registration of one apiKey fails, by anyone')
      t.equal((await store.getKey('a'.repeat(64)))?.owner, 'alice', 'and changes nothing')

      const racers = await Promise.all(Array.from({ length: 20 }, (_, i) => store.createKey(record('b'.repeat(64), `user${i}`))))
      t.equal(racers.filter((outcome) => outcome === 'created').length, 1, 'of 20 concurrent registrations exactly one wins')

      const first = await store.getOrCreateSigningKey('candidate-1')
      t.equal(first, 'candidate-1')
      t.equal(await store.getOrCreateSigningKey('candidate-2'), 'candidate-1', 'the first stored signing key stays')
      t.same(await store.getSigningKeyRing(), { current: 'candidate-1', previous: [] }, 'a ring of one key')

      // Rotation: the replaced key stays as a previous key until it retires.
      const before = Date.now()
      const rotated = await store.rotateSigningKey('key-2', 60_000)
      t.equal(rotated.current, 'key-2')
      t.equal(rotated.replaced?.pem, 'candidate-1', 'the rotation names the key it replaced')
      const retiresAt = rotated.replaced?.retiresAt ?? 0
      t.ok(retiresAt >= before + 60_000 && retiresAt <= Date.now() + 60_000, 'which retires after the time given')
      t.same(rotated.previous, [{ pem: 'candidate-1', retiresAt }])
      t.same(await store.getSigningKeyRing(), { current: 'key-2', previous: [{ pem: 'candidate-1', retiresAt }] })
      t.equal(await store.getOrCreateSigningKey('candidate-3'), 'key-2', 'get-or-create answers the current key after a rotation')

      // A short-lived previous key leaves the ring once retired; the others stay.
      await store.rotateSigningKey('key-3', 100)
      t.same((await store.getSigningKeyRing())?.previous.map((p) => p.pem).sort(), ['candidate-1', 'key-2'])
      await new Promise((resolve) => setTimeout(resolve, 150))
      t.same(await store.getSigningKeyRing(), { current: 'key-3', previous: [{ pem: 'candidate-1', retiresAt }] }, 'a retired key leaves the ring')

      // Concurrent rotations: each demotes the key it replaced; one is current, none is lost.
      const rotations = await Promise.all(['r1', 'r2', 'r3', 'r4'].map(async (pem) => await store.rotateSigningKey(pem, 60_000)))
      const ring = await store.getSigningKeyRing()
      const all = [ring?.current, ...(ring?.previous.map((p) => p.pem) ?? [])].sort()
      t.same(all, ['candidate-1', 'key-3', 'r1', 'r2', 'r3', 'r4'], 'every key is in the ring once')
      t.same(rotations.map((r) => r.replaced?.pem).sort(), ['key-3', ...['r1', 'r2', 'r3', 'r4'].filter((pem) => pem !== ring?.current)].sort(),
        'each rotation replaced a different key')
    })
  }

  /** forget() does not wait for Redis: the first non-false answer within 2 s */
  async function waitFor<T> (attempt: () => Promise<T | false>): Promise<T | false> {
    for (let waited = 0; ; waited += 10) {
      const value = await attempt()
      if (value !== false || waited > 2000) return value
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }

  for (const [kind, make] of Object.entries(factories)) {
    t.test(`${kind} store: remember-once and hit counters`, async (t) => {
      const store = await make(t)
      const first1 = await store.rememberOnce('sig-1', 60_000)
      t.not(first1, false, 'the first time: a mark')
      t.equal(await store.rememberOnce('sig-1', 60_000), false, 'a second time within the ttl: false')
      t.not(await store.rememberOnce('sig-2', 60_000), false)
      const racers = await Promise.all(Array.from({ length: 50 }, () => store.rememberOnce('sig-3', 60_000)))
      t.equal(racers.filter(Boolean).length, 1, 'of 50 concurrent calls exactly one is first')
      t.not(await store.rememberOnce('short', 50), false)
      await new Promise((resolve) => setTimeout(resolve, 120))
      const again = await store.rememberOnce('short', 50)
      t.not(again, false, 'after the ttl it is new again')
      // A mark taken back is gone (a refused request may come again); only its own call's mark goes.
      if (first1 === false) throw new Error('unreachable')
      await first1.forget()
      const retried = await waitFor(async () => await store.rememberOnce('sig-1', 60_000))
      t.not(retried, false, 'after forget, the same key is new again')
      await first1.forget()
      t.equal(await store.rememberOnce('sig-1', 60_000), false, 'a second forget of the old mark leaves the new one in place')

      // putOnce / takeOnce: a value taken once, by one of concurrent takers; gone after its ttl
      t.equal(await store.takeOnce('login:none'), null, 'never put: null')
      await store.putOnce('login:a', '{"v":1}', 60_000)
      t.equal(await store.takeOnce('login:a'), '{"v":1}', 'the value put')
      t.equal(await store.takeOnce('login:a'), null, 'a second take: null')
      await store.putOnce('login:b', 'b', 60_000)
      const takers = await Promise.all(Array.from({ length: 20 }, async () => await store.takeOnce('login:b')))
      t.same(takers.filter((v) => v !== null), ['b'], 'of 20 concurrent takes exactly one gets it')
      await store.putOnce('login:short', 's', 50)
      await new Promise((resolve) => setTimeout(resolve, 120))
      t.equal(await store.takeOnce('login:short'), null, 'after its ttl: null')

      // shareValue: the first value stays, every later caller gets it; a new one after its ttl
      t.equal(await store.shareValue('nonce:1', 'first', 60_000), 'first', 'none there: the candidate')
      const later = await Promise.all(['a', 'b', 'c'].map(async (v) => await store.shareValue('nonce:1', v, 60_000)))
      t.same(later, ['first', 'first', 'first'], 'later callers: the first value')
      t.equal(await store.shareValue('nonce:short', 'x', 50), 'x')
      await new Promise((resolve) => setTimeout(resolve, 120))
      t.equal(await store.shareValue('nonce:short', 'y', 50), 'y', 'after its ttl: the new candidate')

      const first = await store.hit('user:alice', 60_000)
      t.equal(first.count, 1)
      t.ok(first.resetMs > 59_000 && first.resetMs <= 60_000)
      t.equal((await store.hit('user:alice', 60_000)).count, 2)
      t.equal((await store.hit('user:bob', 60_000)).count, 1, 'counters are per key')
      await store.resetHits('user:alice')
      t.equal((await store.hit('user:alice', 60_000)).count, 1, 'a reset starts again')
      await store.hit('window', 50)
      await new Promise((resolve) => setTimeout(resolve, 120))
      t.equal((await store.hit('window', 50)).count, 1, 'a new window after the old one ends')
    })
  }

  for (const [kind, make] of Object.entries(factories)) {
    t.test(`${kind} store: rate counters (GCRA), all of a request's or none`, async (t) => {
      const store = await make(t)
      const perMinute = { key: 'key:a:60s', limit: 3, windowMs: 60_000 }
      const first = await store.countRate([perMinute])
      t.equal(first.allowed, true)
      t.ok((first.backlogMs[0] ?? 0) > 19_000 && (first.backlogMs[0] ?? 0) <= 20_000, 'one request adds window / limit to the backlog')
      t.equal((await store.countRate([perMinute])).allowed, true)
      t.equal((await store.countRate([perMinute])).allowed, true, 'exactly the limit passes')
      const refused = await store.countRate([perMinute])
      t.equal(refused.allowed, false, 'one more is refused')
      t.ok((refused.backlogMs[0] ?? 0) > 59_000 && (refused.backlogMs[0] ?? 0) <= 60_000, 'the backlog of a refusal is the state before it')
      t.equal((await store.countRate([{ ...perMinute, key: 'key:b:60s' }])).allowed, true, 'another counter is apart')

      // Several counters: a request is counted in all of them, or in none.
      const small = { key: 'multi:small', limit: 2, windowMs: 60_000 }
      const large = { key: 'multi:large', limit: 10, windowMs: 60_000 }
      t.equal((await store.countRate([small, large])).allowed, true)
      t.equal((await store.countRate([small, large])).allowed, true)
      const blocked = await store.countRate([large, small])
      t.equal(blocked.allowed, false, 'the full counter refuses the request')
      const largeShare = large.windowMs / large.limit
      const peeked = await store.peekRate([large, small])
      t.ok((peeked.backlogMs[0] ?? 0) <= 2 * largeShare && (peeked.backlogMs[0] ?? 0) > 2 * largeShare - 1000,
        'and the other counted nothing: two requests in it, not three')
      t.equal(peeked.allowed, false, 'a peek says one more would not pass')
      const again = await store.peekRate([large])
      t.ok((again.backlogMs[0] ?? 0) <= 2 * largeShare, 'a peek counts nothing')
      t.equal(again.allowed, true)

      // Concurrent requests: exactly the limit passes. The other counter has room for all 20: in a
      // Cluster the counters are counted side by side (countRateOneByOne), so one that refused some
      // of the 20 (large has room for 8) would refund racer's count after the others saw it full.
      const racer = { key: 'race', limit: 5, windowMs: 60_000 }
      const roomy = { key: 'race:roomy', limit: 100, windowMs: 60_000 }
      const outcomes = await Promise.all(Array.from({ length: 20 }, async () => await store.countRate([racer, roomy])))
      t.equal(outcomes.filter((o) => o.allowed).length, 5, 'of 20 concurrent requests with a limit of 5 (and room elsewhere), exactly 5 pass')
      // With a second counter that refuses some of them too: never more than either limit allows
      const tight = { key: 'race:tight', limit: 5, windowMs: 60_000 }
      const squeezed = await Promise.all(Array.from({ length: 20 }, async () => await store.countRate([tight, large])))
      const passed = squeezed.filter((o) => o.allowed).length
      t.ok(passed <= 5, `of 20 concurrent requests against limits of 5 and of 8 left, ${passed} pass: never more than 5`)

      // A counter drains: the GCRA lets one request more through every window / limit, and is full again after the window.
      const short = { key: 'short', limit: 2, windowMs: 200 }
      t.equal((await store.countRate([short])).allowed, true)
      t.equal((await store.countRate([short])).allowed, true)
      t.equal((await store.countRate([short])).allowed, false)
      await new Promise((resolve) => setTimeout(resolve, 250))
      t.same((await store.peekRate([short])).backlogMs, [0], 'after the window the counter is back to its full limit')
      t.equal((await store.countRate([short])).allowed, true)
      t.equal((await store.countRate([short])).allowed, true, 'its whole limit again')
      t.same(await store.countRate([]), { allowed: true, backlogMs: [] }, 'no counters: nothing to refuse')
    })
  }

  for (const [kind, make] of Object.entries(factories)) {
    t.test(`${kind} store: key lifecycle (list, revoke, last use, events)`, async (t) => {
      const store = await make(t)
      const events: KeyEvent[] = []
      const unwatch = await store.watchKeys((event) => { events.push(event) })
      // The first (re)subscription is announced as a resync, before any revocation is heard.
      await until(() => events.some((e) => e.type === 'resync'))
      t.same(events[0], { type: 'resync' }, 'a listener first hears resync')

      const older = { ...record('1'.repeat(64)), createdAt: at('2026-01-01T00:00:00Z'), expiresAt: at('2030-01-01T00:00:00Z') }
      const newer = { ...record('2'.repeat(64)), createdAt: at('2026-02-01T00:00:00Z') }
      const bobs = record('3'.repeat(64), 'bob')
      for (const r of [older, newer, bobs]) t.equal(await store.createKey(r), 'created')
      t.same(await store.listKeys('alice'), [newer, older], "the owner's keys, newest first, with their expiry")
      t.same(await store.listKeys('nobody'), [])
      t.same((await store.listKeys()).map((r) => r.apiKey), [newer.apiKey, older.apiKey, bobs.apiKey], 'every key without an owner')

      // Last use: kept beside the record, a later use wins, an unknown key records nothing.
      await store.touchKey(newer.apiKey, Date.parse('2026-03-01T00:00:00Z'))
      await store.touchKey(newer.apiKey, Date.parse('2026-02-15T00:00:00Z'))
      await store.touchKey('9'.repeat(64), Date.now())
      t.equal((await store.getKey(newer.apiKey))?.lastUsedAt, at('2026-03-01T00:00:00Z'), 'a later use wins over an earlier one')
      t.equal((await store.getKey(older.apiKey))?.lastUsedAt, undefined, 'never used: no lastUsedAt')
      t.equal((await store.listKeys('alice'))[0]?.lastUsedAt, at('2026-03-01T00:00:00Z'), 'listed with its last use')
      t.equal(await store.getKey('9'.repeat(64)), null, 'touching an unknown key creates nothing')

      // Revocation: only the owner's (when one is named), once, announced, durable.
      t.same(await store.revokeKey(newer.apiKey, at('2026-04-01T00:00:00Z'), 'bob'), { outcome: 'not-found', record: null }, "another owner's key is not found")
      t.same(await store.revokeKey('8'.repeat(64), at('2026-04-01T00:00:00Z')), { outcome: 'not-found', record: null })
      t.equal((await store.getKey(newer.apiKey))?.revokedAt, undefined, 'and nothing changed')
      const revoked = await store.revokeKey(newer.apiKey, at('2026-04-01T00:00:00Z'), 'alice')
      t.equal(revoked.outcome, 'revoked')
      t.same(revoked.record, { ...newer, revokedAt: at('2026-04-01T00:00:00Z'), lastUsedAt: at('2026-03-01T00:00:00Z') })
      const again = await store.revokeKey(newer.apiKey, at('2026-05-01T00:00:00Z'))
      t.equal(again.outcome, 'already-revoked')
      t.equal(again.record?.revokedAt, at('2026-04-01T00:00:00Z'), 'the first revocation time stays')
      t.same(await store.getKey(newer.apiKey), { ...newer, revokedAt: at('2026-04-01T00:00:00Z'), lastUsedAt: at('2026-03-01T00:00:00Z') })
      t.equal(await store.createKey({ ...newer, owner: 'bob' }), 'exists', 'a revoked apiKey cannot be registered again, by anyone')
      t.same((await store.listKeys('alice')).map((r) => r.apiKey), [newer.apiKey, older.apiKey], 'a revoked key stays listed')
      await until(() => events.some((e) => e.type === 'revoked'))
      t.same(events.filter((e) => e.type === 'revoked'), [{ type: 'revoked', apiKey: newer.apiKey }], 'the revocation is announced once')

      // Concurrent revocations of one key: exactly one revokes.
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => store.revokeKey(older.apiKey, new Date().toISOString())))
      t.equal(outcomes.filter((o) => o.outcome === 'revoked').length, 1, 'of 10 concurrent revocations exactly one revokes')

      await unwatch()
      await store.revokeKey(bobs.apiKey, new Date().toISOString())
      await new Promise((resolve) => setTimeout(resolve, 100))
      t.notOk(events.some((e) => e.type === 'revoked' && e.apiKey === bobs.apiKey), 'an unwatched listener hears nothing')
    })

    t.test(`${kind} store: users listed and removed, their keys revoked`, async (t) => {
      const store = await make(t)
      const events: KeyEvent[] = []
      await store.watchKeys((event) => { events.push(event) })
      await until(() => events.length > 0)
      await store.putUser('carol', 'hash-c')
      await store.putUser('alice', 'hash-a')
      t.same((await store.listUsers()).map((u) => [u.username, u.passwordHash]), [['alice', 'hash-a'], ['carol', 'hash-c']], 'every user, by name')

      const active = record('4'.repeat(64), 'carol')
      const alreadyRevoked = record('5'.repeat(64), 'carol')
      const alices = record('6'.repeat(64), 'alice')
      for (const r of [active, alreadyRevoked, alices]) await store.createKey(r)
      await store.revokeKey(alreadyRevoked.apiKey, at('2026-01-02T00:00:00Z'))
      await until(() => events.some((e) => e.type === 'revoked'))
      events.length = 0

      const result = await store.removeUser('carol')
      t.equal(result.removed, true)
      t.same(result.revokedKeys, [active.apiKey], 'the keys it revoked (not the one already revoked)')
      t.equal(await store.getUser('carol'), null, 'the user is gone')
      t.same((await store.listUsers()).map((u) => u.username), ['alice'])
      t.equal(await store.countUsers(), 1)
      t.ok((await store.getKey(active.apiKey))?.revokedAt, 'the key record stays, revoked')
      t.equal((await store.getKey(alreadyRevoked.apiKey))?.revokedAt, at('2026-01-02T00:00:00Z'), 'an earlier revocation keeps its time')
      t.same(await store.listKeys('carol'), [], 'the user\'s key index is gone: a new carol starts with no keys')
      t.equal((await store.getKey(alices.apiKey))?.revokedAt, undefined, "other users' keys are untouched")
      await until(() => events.some((e) => e.type === 'revoked'))
      t.same(events.filter((e) => e.type === 'revoked'), [{ type: 'revoked', apiKey: active.apiKey }], 'the revocation is announced')

      t.same(await store.removeUser('carol'), { removed: false, revokedKeys: [] }, 'removing an unknown user removes nothing')
    })

    t.test(`${kind} store: user scopes, key scopes and key changes, each announced`, async (t) => {
      const store = await make(t)
      const events: KeyEvent[] = []
      await store.watchKeys((event) => { events.push(event) })
      await until(() => events.length > 0)
      events.length = 0

      // A user is created with scopes, or without (none); a password change keeps them.
      t.same((await store.putUser('dave', 'hash-d')).scopes, [], 'a user created without scopes has none')
      const erin = await store.putUser('erin', 'hash-e', ['clients:read', 'clients:write'])
      t.same(erin.scopes, ['clients:read', 'clients:write'], 'a user created with scopes')
      t.same((await store.getUser('erin'))?.scopes, ['clients:read', 'clients:write'])
      const changed = await store.putUser('erin', 'hash-e2')
      t.same(changed.scopes, ['clients:read', 'clients:write'], 'a password change keeps the scopes')
      t.equal((await store.getUser('erin'))?.passwordHash, 'hash-e2')
      t.same((await store.listUsers()).map((u) => [u.username, u.scopes]), [['dave', []], ['erin', ['clients:read', 'clients:write']]],
        'listed with their scopes')
      await until(() => events.filter((e) => e.type === 'user-changed').length >= 3)
      t.same(events, [{ type: 'user-changed', username: 'dave' }, { type: 'user-changed', username: 'erin' }, { type: 'user-changed', username: 'erin' }],
        'each creation and each password change is announced (tokens issued before it end)')
      events.length = 0
      // Removed and created again under the same name: another person, another id.
      const daveBefore = await store.getUser('dave')
      await store.removeUser('dave')
      const daveAgain = await store.putUser('dave', 'hash-d')
      t.not(daveAgain.id, daveBefore?.id, 'a user created again under a removed name has a new id')
      await until(() => events.filter((e) => e.type === 'user-changed').length >= 2)
      events.length = 0
      await store.removeUser('dave')
      await until(() => events.filter((e) => e.type === 'user-changed').length >= 1)
      events.length = 0

      // setUserScopes: replaces them, announces it; null for nobody.
      const set = await store.setUserScopes('erin', ['clients:read'])
      t.same(set?.scopes, ['clients:read'])
      t.equal(set?.passwordHash, 'hash-e2', 'the rest of the record stays')
      t.same((await store.getUser('erin'))?.scopes, ['clients:read'])
      t.same((await store.setUserScopes('erin', []))?.scopes, [], 'scopes can be emptied')
      t.same((await store.getUser('erin'))?.scopes, [])
      t.equal(await store.setUserScopes('nobody', ['a']), null, 'no such user: null')
      t.equal(await store.getUser('nobody'), null, 'and no user is made')
      await until(() => events.filter((e) => e.type === 'user-changed').length >= 2)
      t.same(events, [{ type: 'user-changed', username: 'erin' }, { type: 'user-changed', username: 'erin' }], 'each change announced once')
      events.length = 0

      // Keys: scopes stored at registration; a record without them stays without (a legacy key).
      const scoped = { ...record('c'.repeat(64), 'erin'), scopes: ['clients:read'] }
      const empty = { ...record('d'.repeat(64), 'erin'), scopes: [] }
      const legacy = record('e'.repeat(64), 'erin')
      for (const r of [scoped, empty, legacy]) t.equal(await store.createKey(r), 'created')
      t.same(await store.getKey(scoped.apiKey), scoped)
      t.same(await store.getKey(empty.apiKey), empty, 'an empty list stays an empty list')
      t.equal((await store.getKey(legacy.apiKey))?.scopes, undefined, 'no scopes given: none stored (every scope of its owner)')

      // updateKey: scopes, expiry set and cleared; announced; the record after the change.
      const later = at('2030-06-01T00:00:00Z')
      const updated = await store.updateKey(scoped.apiKey, { scopes: ['clients:read', 'clients:write'], expiresAt: later })
      t.same(updated, { outcome: 'updated', record: { ...scoped, scopes: ['clients:read', 'clients:write'], expiresAt: later } })
      t.same(await store.getKey(scoped.apiKey), { ...scoped, scopes: ['clients:read', 'clients:write'], expiresAt: later })
      t.same((await store.updateKey(scoped.apiKey, { scopes: [] })).record, { ...scoped, scopes: [], expiresAt: later }, 'scopes emptied, the expiry kept')
      t.same((await store.getKey(scoped.apiKey))?.scopes, [], 'read back as an empty list')
      t.same((await store.updateKey(scoped.apiKey, { expiresAt: null })).record, { ...scoped, scopes: [] }, 'expiresAt null: the key no longer expires')
      t.same((await store.updateKey(legacy.apiKey, { expiresAt: later })).record, { ...legacy, expiresAt: later }, 'a legacy key keeps having no scopes')
      t.same(await store.updateKey('f'.repeat(64), { scopes: ['a'] }), { outcome: 'not-found', record: null })
      await until(() => events.filter((e) => e.type === 'changed').length >= 4)
      t.same(events, [scoped, scoped, scoped, legacy].map((r) => ({ type: 'changed', apiKey: r.apiKey })), 'each change announced once')
      events.length = 0

      // A revoked key is not changed.
      await store.revokeKey(empty.apiKey, at('2026-03-01T00:00:00Z'))
      const refused = await store.updateKey(empty.apiKey, { scopes: ['clients:read'], expiresAt: later })
      t.equal(refused.outcome, 'revoked')
      t.same(refused.record, { ...empty, revokedAt: at('2026-03-01T00:00:00Z') }, 'the record as it is')
      t.same(await store.getKey(empty.apiKey), { ...empty, revokedAt: at('2026-03-01T00:00:00Z') }, 'unchanged, its empty scopes included')

      // Concurrent changes: each applied whole (the last one wins), none lost half-way.
      await Promise.all(Array.from({ length: 10 }, async (_, i) => await store.updateKey(legacy.apiKey, { scopes: [`s${i}`], expiresAt: later })))
      const final = await store.getKey(legacy.apiKey)
      t.equal(final?.scopes?.length, 1, 'one whole set of scopes')
      t.equal(final?.expiresAt, later)

      // Removing the user announces it (and revokes its keys, as before).
      events.length = 0
      await store.removeUser('erin')
      await until(() => events.some((e) => e.type === 'user-changed'))
      t.same(events.filter((e) => e.type === 'user-changed'), [{ type: 'user-changed', username: 'erin' }], 'the removal is announced')
    })

    t.test(`${kind} store: one fingerprint, one key; revoked keys pruned to tombstones; the one-time backfill`, async (t) => {
      const store = await make(t)
      const fp = (c: string): string => c.repeat(43)
      const keyed = (apiKey: string, fingerprint: string, owner = 'alice', createdAt = '2026-01-01T00:00:00.000Z'): KeyRecord =>
        ({ ...record(apiKey, owner), fingerprint, createdAt, scopes: ['a'] })
      t.equal(await store.createKey(keyed('1'.repeat(64), fp('x'))), 'created')
      t.equal(await store.createKey(keyed('2'.repeat(64), fp('x'), 'bob')), 'exists', 'another apiKey with a stored fingerprint: exists, for anyone')
      t.equal(await store.getKey('2'.repeat(64)), null, 'and nothing is stored')
      const racers = await Promise.all(Array.from({ length: 10 }, async (_, i) => await store.createKey(keyed(String(i).padStart(64, 'c'), fp('y'), `u${i}`))))
      t.equal(racers.filter((o) => o === 'created').length, 1, 'of 10 concurrent registrations of one fingerprint under 10 apiKeys, one wins')

      // revoked at two times; the cut-off between them
      await store.touchKey('1'.repeat(64), Date.parse('2026-01-02T00:00:00Z'))
      await store.revokeKey('1'.repeat(64), '2026-01-05T00:00:00.000Z')
      t.equal(await store.createKey(keyed('3'.repeat(64), fp('z'), 'alice', '2026-01-03T00:00:00.000Z')), 'created')
      await store.revokeKey('3'.repeat(64), '2026-02-01T00:00:00.000Z')
      t.equal(await store.pruneRevokedKeys(Date.parse('2026-01-10T00:00:00Z'), 100), 1, 'only the key revoked before the cut-off')
      t.same(await store.getKey('1'.repeat(64)), {
        apiKey: '1'.repeat(64),
        owner: 'alice',
        name: 'k',
        createdAt: '2026-01-01T00:00:00.000Z',
        revokedAt: '2026-01-05T00:00:00.000Z',
        fingerprint: fp('x'),
        prunedAt: (await store.getKey('1'.repeat(64)))?.prunedAt
      }, 'a tombstone: no public key, scopes or last use')
      t.match((await store.getKey('1'.repeat(64)))?.prunedAt, /^\d{4}-\d\d-\d\dT/)
      t.same((await store.listKeys('alice')).map((k) => k.apiKey), ['3'.repeat(64)], 'it leaves its owner\'s list')
      t.notOk((await store.listKeys()).some((k) => k.apiKey === '1'.repeat(64)), 'and the list of every key')
      t.equal(await store.createKey(keyed('4'.repeat(64), fp('x'))), 'exists', 'its fingerprint still refuses the key')
      t.equal(await store.createKey(keyed('1'.repeat(64), fp('w'))), 'exists', 'and its apiKey')
      t.equal(await store.pruneRevokedKeys(Date.parse('2026-01-10T00:00:00Z'), 100), 0, 'pruned once')
      t.equal(await store.pruneRevokedKeys(Date.now(), 100), 1, 'the other, later')

      // removal revokes, and the revoked keys are pruned like any
      t.equal(await store.createKey(keyed('5'.repeat(64), fp('v'), 'gone')), 'created')
      await store.removeUser('gone')
      t.equal(await store.pruneRevokedKeys(Date.now(), 100), 1, 'a removed user\'s key is pruned too')
      t.ok((await store.getKey('5'.repeat(64)))?.prunedAt)

      // records as an older gateway stored them: no fingerprint; one revoked
      const legacy = (apiKey: string, publicKey: string): KeyRecord => ({ ...record(apiKey, 'old'), publicKey })
      t.equal(await store.createKey(legacy('6'.repeat(64), 'PEM-A')), 'created')
      t.equal(await store.createKey(legacy('7'.repeat(64), 'PEM-B')), 'created')
      await store.revokeKey('7'.repeat(64), '2026-01-01T00:00:00.000Z')
      const fingerprintOf = (pem: string): string | undefined => pem === 'PEM-A' ? fp('a') : pem === 'PEM-B' ? fp('b') : undefined
      const indexed = await store.backfillKeyIndex(fingerprintOf)
      t.ok(indexed >= 2, `the backfill indexed the older records (${indexed})`)
      t.equal((await store.getKey('6'.repeat(64)))?.fingerprint, fp('a'), 'the record has its fingerprint')
      t.equal(await store.createKey(keyed('8'.repeat(64), fp('a'))), 'exists', 'and the index refuses the key in another encoding')
      t.equal(await store.createKey(keyed('9'.repeat(64), fp('b'))), 'exists', 'a revoked one too')
      t.equal(await store.backfillKeyIndex(() => { throw new Error('the backfill ran twice') }), 0, 'once per store')
      t.equal(await store.pruneRevokedKeys(Date.parse('2026-01-02T00:00:00Z'), 100), 1, 'an older revoked record joined the revoked index')
      t.equal((await store.getKey('7'.repeat(64)))?.fingerprint, fp('b'))

      // an older gateway's revoked record without a fingerprint keeps its public key when pruned
      t.equal(await store.createKey(legacy('d'.repeat(64), 'PEM-D')), 'created')
      await store.revokeKey('d'.repeat(64), '2026-01-01T00:00:00.000Z')
      t.equal(await store.pruneRevokedKeys(Date.parse('2026-01-02T00:00:00Z'), 100), 1)
      t.match(await store.getKey('d'.repeat(64)), { publicKey: 'PEM-D', prunedAt: String }, 'what still names the key stays')
    })

    t.test(`${kind} store: at most maxActiveKeys active keys per owner, checked and added in one step`, async (t) => {
      const store = await make(t)
      const hex = (i: number, owner: string): string => `${owner === 'alice' ? 'a' : 'b'}${String(i).padStart(63, '0')}`
      // 10 concurrent registrations for alice with a limit of 3: exactly 3 pass
      const racers = await Promise.all(Array.from({ length: 10 }, async (_, i) => await store.createKey(record(hex(i, 'alice')), 3)))
      t.equal(racers.filter((o) => o === 'created').length, 3, 'of 10 concurrent registrations with a limit of 3, exactly 3 are created')
      t.equal(racers.filter((o) => o === 'limit-reached').length, 7, 'and 7 reach the limit')
      t.equal((await store.listKeys('alice')).length, 3, 'only those are stored')
      t.equal(await store.createKey(record(hex(0, 'bob'), 'bob'), 3), 'created', 'another owner has a count of its own')
      t.equal(await store.createKey(record(hex(10, 'alice'))), 'created', 'no limit given: none applied (operators, tests)')
      t.equal(await store.createKey(record(hex(11, 'alice')), 3), 'limit-reached')
      t.equal(await store.createKey(record(hex(0, 'alice'), 'bob'), 3), 'exists', 'an existing apiKey is "exists", whatever the count')

      // A revoked key frees a place; so does an expired one, from its expiry on.
      const alices = (await store.listKeys('alice')).map((r) => r.apiKey)
      await store.revokeKey(alices[0] as string, new Date().toISOString())
      await store.revokeKey(alices[1] as string, new Date().toISOString())
      t.equal(await store.createKey(record(hex(12, 'alice')), 3), 'created', 'two revoked keys free two places (of 4 active, 2 remain)')
      t.equal(await store.createKey(record(hex(13, 'alice')), 3), 'limit-reached')
      const soon = new Date(Date.now() + 300).toISOString()
      t.equal(await store.createKey({ ...record(hex(14, 'bob'), 'bob'), expiresAt: soon }, 2), 'created')
      t.equal(await store.createKey(record(hex(15, 'bob'), 'bob'), 2), 'limit-reached', 'a key that has not expired yet counts')
      await new Promise((resolve) => setTimeout(resolve, 400))
      t.equal(await store.createKey(record(hex(15, 'bob'), 'bob'), 2), 'created', 'once it has expired it does not')
      const pastExpiry = { ...record(hex(16, 'bob'), 'bob'), expiresAt: new Date(Date.now() - 1000).toISOString() }
      t.equal(await store.createKey(pastExpiry, 3), 'created')
      t.equal(await store.createKey(record(hex(17, 'bob'), 'bob'), 3), 'created', 'an expired record counts for nothing')
    })
  }
}

storeSuites(t, { memory: async () => createMemoryStore(), redis: async (t) => await onRedis(await testRedisUrl())(t) })

// Started once for both suites, stopped when they end.
t.test('Redis Cluster and Redis Sentinel', async (t) => {
  const [cluster, sentinel] = await Promise.all([startRedisCluster(t), startRedisSentinel(t)])
  storeSuites(t, { 'redis cluster': onRedis(cluster.connection), 'redis sentinel': onRedis(sentinel.connection) })
  t.test('a cluster store refuses a prefix that no replay mark\'s cancel could share a slot with', async (t) => {
    await t.rejects(createRedisStore({ connection: cluster.connection, prefix: 'kg}:', commandTimeoutMs: 500 }), /KEYGATE_REDIS_PREFIX "kg}:" holds a }/)
  })
})

t.test('redis store: revocations reach every store on the prefix, and a resubscription after a dropped subscriber', async (t) => {
  const url = await testRedisUrl()
  const prefix = uniquePrefix('store-events')
  t.teardown(async () => { await deletePrefix(url, prefix) })
  const a = await createRedisStore({ url, prefix, commandTimeoutMs: 500 })
  const b = await createRedisStore({ url, prefix, commandTimeoutMs: 500 })
  const other = await createRedisStore({ url, prefix: uniquePrefix('store-events-other'), commandTimeoutMs: 500 })
  t.teardown(async () => { await Promise.all([a.close(), b.close(), other.close()]) })
  const heard: KeyEvent[] = []
  const heardOther: KeyEvent[] = []
  await b.watchKeys((event) => { heard.push(event) })
  await other.watchKeys((event) => { heardOther.push(event) })
  await until(() => heard.length > 0 && heardOther.length > 0)

  await a.createKey(record('7'.repeat(64)))
  await a.revokeKey('7'.repeat(64), new Date().toISOString())
  await until(() => heard.some((e) => e.type === 'revoked'))
  t.same(heard, [{ type: 'resync' }, { type: 'revoked', apiKey: '7'.repeat(64) }], 'a revocation at A is heard at B')

  // Kill B's subscriber connection: it reconnects, resubscribes and says resync.
  const admin = new Redis(url)
  t.teardown(() => { admin.disconnect() })
  const name = `keygate-sub:${prefix}`.replace(/[^\w:.@-]/g, '_')
  const killed = await killByName(admin, name)
  t.equal(killed, 1, "B's subscriber connection is killed")
  await until(() => heard.filter((e) => e.type === 'resync').length === 2)
  await a.createKey(record('6'.repeat(64)))
  await a.revokeKey('6'.repeat(64), new Date().toISOString())
  await until(() => heard.some((e) => e.type === 'revoked' && e.apiKey === '6'.repeat(64)))
  t.pass('after the resubscription, revocations are heard again')

  // Key changes and user changes reach B too.
  heard.length = 0
  await a.updateKey('6'.repeat(64), { scopes: ['x'] })
  await a.createKey(record('5'.repeat(64)))
  await a.updateKey('5'.repeat(64), { scopes: ['clients:read'] })
  await a.putUser('zoe', 'hash-z')
  await a.setUserScopes('zoe', ['clients:read'])
  await until(() => heard.length >= 3)
  t.same(heard, [{ type: 'changed', apiKey: '5'.repeat(64) }, { type: 'user-changed', username: 'zoe' }, { type: 'user-changed', username: 'zoe' }],
    'a key change, a user\'s creation and scope change at A are heard at B (a revoked key is not changed, nor announced)')
  t.same(heardOther.filter((e) => e.type === 'revoked'), [], 'another prefix hears nothing')
})

/** Kills the client connections with this name; returns how many. */
async function killByName (admin: Redis, name: string): Promise<number> {
  const list = String(await admin.call('CLIENT', 'LIST'))
  const ids = list.split('\n').filter((line) => line.includes(` name=${name} `)).map((line) => /(?:^|\s)id=(\d+)/.exec(line)?.[1])
  let killed = 0
  for (const id of ids) if (id !== undefined) killed += Number(await admin.call('CLIENT', 'KILL', 'ID', id))
  return killed
}

/** Polls every 10 ms until `condition` holds; fails after 2 s. */
async function until (condition: () => boolean): Promise<void> {
  for (let waited = 0; !condition(); waited += 10) {
    if (waited > 2000) throw new Error('condition not met within 2 s')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

t.test('sameSlotKey: a key Redis Cluster hashes as the name it is given (a replay mark and its cancel), or an Error', async (t) => {
  for (const name of ['keygate:once:replay:ab', 'k{t}:once:replay:ab', 'a{b:once:replay:ab', 'a{b}{c}:once:x', '{:once:x']) {
    const key = sameSlotKey(name, ':cancelled:v')
    t.ok(key.includes(name) && key.endsWith(':cancelled:v'), `${name}: ${key}`)
    t.equal(hashedPart(key), hashedPart(name), `${name}: the same hashed part, so the same slot`)
  }
  t.equal(hashedPart('k{t}x'), 't')
  t.equal(hashedPart('k{}x{t}'), 'k{}x{t}', 'an empty first tag: the whole key')
  for (const name of ['a}b:once:x', '{}:once:x', 'x{}y}:once:x']) {
    t.throws(() => sameSlotKey(name, ':cancelled:v'), /no key can share the hash slot/, `${name}: no such key`)
  }
})
