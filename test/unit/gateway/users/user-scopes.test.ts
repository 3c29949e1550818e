// Each user's scopes as the hot path reads them: from the store once, then from the cache, with no
// promise; dropped when the store announces a change or the user's removal, all of it on resync.
import t from 'tap'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createRedisStore } from '../../../../gateway/src/store/redis.js'
import type { Store } from '../../../../gateway/src/store/index.js'
import { createUserScopes } from '../../../../gateway/src/users/user-scopes.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'

/** Polls every 10 ms until `condition` holds; fails after 2 s. */
async function until (condition: () => boolean): Promise<void> {
  for (let waited = 0; !condition(); waited += 10) {
    if (waited > 2000) throw new Error('condition not met within 2 s')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const stores: Record<string, (t: Test) => Promise<Store>> = {
  memory: async () => createMemoryStore(),
  redis: async (t) => {
    const url = await testRedisUrl()
    const prefix = uniquePrefix('user-scopes')
    const store = await createRedisStore({ url, prefix, commandTimeoutMs: 500 })
    t.teardown(async () => {
      await store.close()
      await deletePrefix(url, prefix)
    })
    return store
  }
}

for (const [kind, make] of Object.entries(stores)) {
  t.test(`${kind} store`, async (t) => {
    const store = await make(t)
    // subscribed before the cache is made: the subscription's first resync would empty it mid-test
    let subscribed = false
    await store.watchKeys((event) => { subscribed ||= event.type === 'resync' })
    await until(() => subscribed)
    const scopes = createUserScopes(store, { cacheSize: 100 })
    t.teardown(async () => { await scopes.close() })
    await store.putUser('alice', 'hash', ['b', 'a'])

    const first = scopes.of('alice')
    t.ok(first instanceof Promise, 'the first lookup reads the store')
    t.same((await first).list, ['b', 'a'], 'the scopes as stored')
    const cached = scopes.of('alice')
    t.notOk(cached instanceof Promise, 'then no promise: the cached set')
    t.equal(cached, await first, 'the same set object each time (nothing allocated per request)')
    t.same((await scopes.of('nobody')).list, [], 'an unknown user has no scopes')
    t.same(scopes.stats, { hits: 1, misses: 2 })

    // A change made through another store on the same backing store is announced and drops the entry.
    await store.setUserScopes('alice', ['c'])
    await until(() => scopes.of('alice') instanceof Promise)
    t.same((await scopes.of('alice')).list, ['c'], 'read anew after the change')
    await store.removeUser('alice')
    await until(() => scopes.of('alice') instanceof Promise)
    t.same((await scopes.of('alice')).list, [], 'a removed user has none')
    t.equal(scopes.cacheSize, 2)
  })
}
