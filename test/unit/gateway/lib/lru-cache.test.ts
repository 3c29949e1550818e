// The in-process caches' eviction: bounded, and what was read recently stays.
import t from 'tap'
import { LruCache } from '../../../../gateway/src/lib/lru-cache.js'

t.test('never holds more than its size; the entry nobody read goes first', async (t) => {
  const cache = new LruCache<string, number>(3)
  cache.set('a', 1)
  cache.set('b', 2)
  cache.set('c', 3)
  t.equal(cache.get('a'), 1)
  cache.set('d', 4)
  t.equal(cache.size, 3)
  t.equal(cache.get('b'), undefined, 'b, never read, was evicted rather than a, which was')
  t.same(['a', 'c', 'd'].map((k) => cache.get(k)), [1, 3, 4])
  // a, c and d have all been read now: each gets its second chance, then one of them goes,
  // never the entry being added
  cache.set('e', 5)
  t.equal(cache.size, 3)
  t.equal(cache.get('e'), 5, 'the new entry is kept')
  t.equal(['a', 'c', 'd'].filter((k) => cache.get(k) === undefined).length, 1, 'exactly one of the old ones went')
})

t.test('set on a known key replaces its value; delete and clear empty it', async (t) => {
  const cache = new LruCache<string, number>(2)
  cache.set('a', 1)
  cache.set('a', 2)
  t.equal(cache.size, 1)
  t.equal(cache.get('a'), 2)
  cache.delete('a')
  t.equal(cache.get('a'), undefined)
  cache.set('b', 1)
  cache.clear()
  t.equal(cache.size, 0)
})

t.test('a size of 0 caches nothing', async (t) => {
  const cache = new LruCache<string, number>(0)
  cache.set('a', 1)
  t.equal(cache.get('a'), undefined)
  t.equal(cache.size, 0)
})

t.test('under churn a hot entry survives and the size holds', async (t) => {
  const cache = new LruCache<number, number>(100)
  cache.set(-1, -1)
  for (let i = 0; i < 10_000; i++) {
    t.equal(cache.get(-1), -1, `the hot entry is there at ${i}`)
    cache.set(i, i)
    if (cache.size > 100) t.fail(`size ${cache.size} over 100`)
  }
  t.equal(cache.size, 100)
})

t.test('onEvict hears of each entry the bound pushes out, and only of those; values() lists what is held', async (t) => {
  const evicted: Array<[string, number]> = []
  const cache = new LruCache<string, number>(2, (key, value) => { evicted.push([key, value]) })
  cache.set('a', 1)
  cache.set('b', 2)
  cache.set('a', 10)
  cache.delete('b')
  t.same(evicted, [], 'a value replaced or an entry deleted: not an eviction')
  cache.set('c', 3)
  cache.set('d', 4)
  // a, written again, counts as used: its second chance sends it to the young end, and c goes
  t.same(evicted, [['c', 3]], 'the oldest unused entry went for d: heard once, with its value')
  t.same([...cache.values()].sort((x, y) => x - y), [4, 10], 'what is held')
})
