// One contract, two stores: the embedded memory store and Redis pass the same suite, Redis in each
// of its shapes: one node, a Redis Cluster of three masters, a master found through Sentinel.
import t from 'tap'
import { createMemoryStore } from '../../gateway/src/store/memory.js'
import { createRedisStore } from '../../gateway/src/store/redis.js'
import type { RedisConnection } from '../../gateway/src/store/redis-connection.js'
import type { KeyRecord, Store } from '../../gateway/src/store/index.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { startRedisCluster, startRedisSentinel } from '../helpers/redis-topology.js'

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
      t.equal((await store.getUser('alice'))?.passwordHash, 'hash-2')
      await store.putUser('bob', 'hash-3')
      t.equal(await store.countUsers(), 2)

      t.equal(await store.getKey('a'.repeat(64)), null)
      t.equal(await store.createKey(record('a'.repeat(64))), true)
      t.same(await store.getKey('a'.repeat(64)), record('a'.repeat(64)))
      t.equal(await store.createKey(record('a'.repeat(64), 'bob')), false, 'a second registration of one apiKey fails, by anyone')
      t.equal((await store.getKey('a'.repeat(64)))?.owner, 'alice', 'and changes nothing')

      const racers = await Promise.all(Array.from({ length: 20 }, (_, i) => store.createKey(record('b'.repeat(64), `user${i}`))))
      t.equal(racers.filter(Boolean).length, 1, 'of 20 concurrent registrations exactly one wins')

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

  for (const [kind, make] of Object.entries(factories)) {
    t.test(`${kind} store: remember-once and hit counters`, async (t) => {
      const store = await make(t)
      t.equal(await store.rememberOnce('sig-1', 60_000), true)
      t.equal(await store.rememberOnce('sig-1', 60_000), false, 'a second time within the ttl: false')
      t.equal(await store.rememberOnce('sig-2', 60_000), true)
      const racers = await Promise.all(Array.from({ length: 50 }, () => store.rememberOnce('sig-3', 60_000)))
      t.equal(racers.filter(Boolean).length, 1, 'of 50 concurrent calls exactly one is first')
      t.equal(await store.rememberOnce('short', 50), true)
      await new Promise((resolve) => setTimeout(resolve, 120))
      t.equal(await store.rememberOnce('short', 50), true, 'after the ttl it is new again')

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
}

storeSuites(t, { memory: async () => createMemoryStore(), redis: async (t) => await onRedis(await testRedisUrl())(t) })

// Started once for both suites, stopped when they end.
t.test('Redis Cluster and Redis Sentinel', async (t) => {
  const [cluster, sentinel] = await Promise.all([startRedisCluster(t), startRedisSentinel(t)])
  storeSuites(t, { 'redis cluster': onRedis(cluster.connection), 'redis sentinel': onRedis(sentinel.connection) })
})
