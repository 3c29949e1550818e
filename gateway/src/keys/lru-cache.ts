/** Hits and misses of an in-process cache, counted by its owner (plain numbers: free on the hot path). */
export interface CacheStats {
  hits: number
  misses: number
}

/**
 * A bounded map that forgets the least recently used entry first. A Map keeps insertion order,
 * so re-inserting on a hit moves an entry to the young end and the oldest is the first key.
 */
export class LruCache<K, V> {
  readonly #entries = new Map<K, V>()

  constructor (readonly maxEntries: number) {}

  get (key: K): V | undefined {
    const value = this.#entries.get(key)
    if (value !== undefined) {
      this.#entries.delete(key)
      this.#entries.set(key, value)
    }
    return value
  }

  set (key: K, value: V): void {
    if (this.maxEntries <= 0) return
    this.#entries.delete(key)
    this.#entries.set(key, value)
    if (this.#entries.size > this.maxEntries) {
      const oldest = this.#entries.keys().next()
      if (oldest.done !== true) this.#entries.delete(oldest.value)
    }
  }

  delete (key: K): void {
    this.#entries.delete(key)
  }

  clear (): void {
    this.#entries.clear()
  }

  get size (): number {
    return this.#entries.size
  }
}
