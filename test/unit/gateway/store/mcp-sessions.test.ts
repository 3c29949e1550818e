// MCP sessions in the store (bindMcpSession, mcpSessionOwner, forgetMcpSession): one contract, the
// embedded store and Redis (a prefix of this test's own). The first owner stays, a lookup renews
// the lifetime, forgetting ends it; on Redis the key is under the store's prefix and expires.
import t from 'tap'
import { Redis } from 'ioredis'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createRedisStore } from '../../../../gateway/src/store/redis.js'
import type { Store } from '../../../../gateway/src/store/index.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

async function contract (t: Test, store: Store, advance: (ms: number) => Promise<void>): Promise<void> {
  t.equal(await store.mcpSessionOwner('s-1', 60_000), null, 'a session never bound has no owner')
  t.equal(await store.bindMcpSession('s-1', 'user:alice', 60_000), 'user:alice', 'the first binding gives the session its owner')
  t.equal(await store.bindMcpSession('s-1', 'user:bob', 60_000), 'user:alice', 'a second binding changes nothing and names the owner')
  t.equal(await store.mcpSessionOwner('s-1', 60_000), 'user:alice')
  const racers = await Promise.all(['a', 'b', 'c', 'd'].map(async (name) => await store.bindMcpSession('s-race', `user:${name}`, 60_000)))
  t.equal(new Set(racers).size, 1, 'of concurrent bindings one wins, and every caller is told the same owner')

  await store.bindMcpSession('s-short', 'user:alice', 400)
  await advance(250)
  t.equal(await store.mcpSessionOwner('s-short', 400), 'user:alice', 'a lookup within the lifetime finds the owner, and renews it')
  await advance(250)
  t.equal(await store.mcpSessionOwner('s-short', 400), 'user:alice', 'past the first lifetime, still there: the lookup renewed it')
  await advance(600)
  t.equal(await store.mcpSessionOwner('s-short', 400), null, 'unused for longer than its lifetime, the session is gone')
  t.equal(await store.bindMcpSession('s-short', 'user:bob', 60_000), 'user:bob', 'an expired session can be bound anew')

  await store.forgetMcpSession('s-1')
  t.equal(await store.mcpSessionOwner('s-1', 60_000), null, 'a forgotten session has no owner')
  await store.forgetMcpSession('never-bound')
}

t.test('memory store', async (t) => {
  let clock = 1_000_000
  const store = createMemoryStore(() => clock)
  t.teardown(async () => { await store.close() })
  await contract(t, store, async (ms) => { clock += ms })
})

t.test('Redis store, under its prefix', async (t) => {
  const url = await testRedisUrl()
  const prefix = uniquePrefix('mcp-sessions')
  const store = await createRedisStore({ url, prefix, commandTimeoutMs: 500 })
  const redis = new Redis(url)
  t.teardown(async () => {
    await store.close()
    redis.disconnect()
    await deletePrefix(url, prefix)
  })
  // Redis keeps its own time: the lifetimes are real (400 ms), the waits wide of them
  await contract(t, store, async (ms) => { await new Promise((resolve) => setTimeout(resolve, ms)) })

  await store.bindMcpSession('s-2', 'user:alice', 86_400_000)
  t.equal(await redis.get(`${prefix}mcp-session:s-2`), 'user:alice', 'the session is a key under the store\'s prefix')
  const ttl = await redis.pttl(`${prefix}mcp-session:s-2`)
  t.ok(ttl > 86_000_000 && ttl <= 86_400_000, `with the session's lifetime (${ttl} ms)`)
  const other = await createRedisStore({ url, prefix, commandTimeoutMs: 500 })
  t.teardown(async () => { await other.close() })
  t.equal(await other.mcpSessionOwner('s-2', 86_400_000), 'user:alice', 'another gateway on the same Redis finds the owner')
  await other.forgetMcpSession('s-2')
  t.equal(await store.mcpSessionOwner('s-2', 86_400_000), null, 'and what it forgets is forgotten for every gateway')
})
