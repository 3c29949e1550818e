/** Hits and misses of an in-process cache, counted by its owner (plain numbers: free on the hot path). */
export interface CacheStats {
  hits: number
  misses: number
}

interface Slot<V> {
  value: V
  /** read since the slot last reached the old end (or was made) */
  used: boolean
}

/**
 * A bounded map that forgets entries nobody reads: least recently used first, approximately
 * (CLOCK, or "second chance"). A Map keeps insertion order, so its first key is the oldest. A
 * read only marks its slot: no Map write on the hot path, where every request reads two or three
 * of these caches. When the map is over its size, the oldest slot goes, unless it was read since
 * it got there: then it moves to the young end, unmarked, and the next oldest is looked at. The
 * entry being added is never the one evicted for it.
 */
export class LruCache<K, V> {
  readonly #entries = new Map<K, Slot<V>>()

  readonly maxEntries: number
  private readonly onEvict: ((key: K, value: V) => void) | undefined

  /** `onEvict` hears of each entry the size bound pushes out (not of one deleted or replaced) */
  constructor (maxEntries: number, onEvict?: (key: K, value: V) => void) {
    this.maxEntries = maxEntries
    this.onEvict = onEvict
  }

  get (key: K): V | undefined {
    const slot = this.#entries.get(key)
    if (slot === undefined) return undefined
    slot.used = true
    return slot.value
  }

  set (key: K, value: V): void {
    if (this.maxEntries <= 0) return
    const slot = this.#entries.get(key)
    if (slot !== undefined) {
      slot.value = value
      slot.used = true
      return
    }
    this.#entries.set(key, { value, used: false })
    // Each turn evicts a slot, unmarks one, or passes over the slot just made (never its own
    // victim): it ends within two rounds of the map.
    while (this.#entries.size > this.maxEntries) {
      const oldest = this.#entries.entries().next()
      if (oldest.done === true) break
      const [oldestKey, oldestSlot] = oldest.value
      this.#entries.delete(oldestKey)
      if (oldestKey === key) {
        this.#entries.set(oldestKey, oldestSlot)
      } else if (oldestSlot.used) {
        oldestSlot.used = false
        this.#entries.set(oldestKey, oldestSlot)
      } else {
        this.onEvict?.(oldestKey, oldestSlot.value)
      }
    }
  }

  delete (key: K): void {
    this.#entries.delete(key)
  }

  clear (): void {
    this.#entries.clear()
  }

  /** every key held (reading them marks none) */
  * keys (): IterableIterator<K> {
    yield * this.#entries.keys()
  }

  /** every value held (reading them marks none) */
  * values (): IterableIterator<V> {
    for (const slot of this.#entries.values()) yield slot.value
  }

  get size (): number {
    return this.#entries.size
  }
}
