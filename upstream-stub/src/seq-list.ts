/*
 * The paging engine shared by every collection. Items are kept in insertion
 * order together with a store-wide sequence number (`seq`); pages are read
 * newest first and resume strictly before a given seq. Ordering by seq rather
 * than created_at keeps the order total even when several items share a
 * millisecond, and keeps a cursor valid while newer items are added.
 */

export interface PageRequest {
  /** How many items at most; the route has already bounded it. */
  limit: number
  /** Only items inserted before this seq (the previous page's `next`). */
  before?: number | undefined
}

export interface Page<T> {
  items: T[]
  /** Pass back as `before` to get the next page; null when this was the last. */
  next: number | null
}

interface Entry<T> {
  readonly seq: number
  readonly item: T
}

export class SeqList<T> {
  /** Ascending by seq, because entries are only ever appended. */
  readonly #entries: Entry<T>[] = []

  /** `seq` must be greater than every seq already in the list. */
  append (seq: number, item: T): void {
    const last = this.#entries.at(-1)
    // Binary search below relies on the order; a violation is a bug in the store.
    if (last !== undefined && seq <= last.seq) throw new Error(`seq ${seq} is not after ${last.seq}`)
    this.#entries.push({ seq, item })
  }

  /** Newest first. */
  page ({ limit, before }: PageRequest): Page<T> {
    const entries = this.#entries
    const end = before === undefined ? entries.length : this.#firstIndexAtOrAfter(before)
    const start = Math.max(0, end - limit)
    const page = entries.slice(start, end).reverse()
    const oldest = page.at(-1)
    return {
      items: page.map((entry) => entry.item),
      next: start > 0 && oldest !== undefined ? oldest.seq : null,
    }
  }

  /** Binary search, so deep pages stay O(log n + limit). */
  #firstIndexAtOrAfter (seq: number): number {
    let lo = 0
    let hi = this.#entries.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      const entry = this.#entries[mid]
      if (entry !== undefined && entry.seq < seq) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}
