import { randomUUID } from 'node:crypto'

export interface Client {
  readonly id: string
  readonly name: string
  readonly email: string
  readonly tax_id: string
  readonly created_at: string
}

export interface NewClient {
  name: string
  email: string
  tax_id: string
}

export type CreateResult =
  | { ok: true; client: Client }
  | { ok: false; reason: 'tax_id_taken' }

export interface Page {
  items: Client[]
  /** Pass back as `before` to get the next page; null when this was the last. */
  next: number | null
}

/**
 * `seq` is a store-wide insertion counter. Ordering and paging use it rather
 * than created_at because several clients can share a millisecond.
 */
interface Entry {
  readonly seq: number
  readonly client: Client
}

interface UserBucket {
  /** Ascending by seq, because entries are only ever appended. */
  readonly entries: Entry[]
  readonly byId: Map<string, Entry>
  readonly byTaxId: Map<string, Entry>
}

/** In-memory, per-user client store. State lives as long as the process. */
export class ClientStore {
  readonly #users = new Map<string, UserBucket>()
  readonly #now: () => Date
  #seq = 0

  /** `now` is injectable so tests can force several clients into one millisecond. */
  constructor(now: () => Date = () => new Date()) {
    this.#now = now
  }

  create(userId: string, input: NewClient): CreateResult {
    const bucket = this.#bucket(userId)
    if (bucket.byTaxId.has(input.tax_id)) return { ok: false, reason: 'tax_id_taken' }

    const client: Client = Object.freeze({
      id: randomUUID(),
      name: input.name.trim(),
      email: input.email,
      tax_id: input.tax_id,
      created_at: this.#now().toISOString(),
    })
    const entry: Entry = { seq: ++this.#seq, client }
    bucket.entries.push(entry)
    bucket.byId.set(client.id, entry)
    bucket.byTaxId.set(client.tax_id, entry)
    return { ok: true, client }
  }

  get(userId: string, id: string): Client | undefined {
    return this.#users.get(userId)?.byId.get(id)?.client
  }

  /** Newest first; `before` restricts to entries inserted before that seq. */
  list(userId: string, { limit, before }: { limit: number; before?: number | undefined }): Page {
    const entries = this.#users.get(userId)?.entries ?? []
    const end = before === undefined ? entries.length : firstIndexAtOrAfter(entries, before)
    const start = Math.max(0, end - limit)
    const page = entries.slice(start, end).reverse()
    const oldest = page.at(-1)
    return {
      items: page.map((entry) => entry.client),
      next: start > 0 && oldest !== undefined ? oldest.seq : null,
    }
  }

  #bucket(userId: string): UserBucket {
    let bucket = this.#users.get(userId)
    if (bucket === undefined) {
      bucket = { entries: [], byId: new Map(), byTaxId: new Map() }
      this.#users.set(userId, bucket)
    }
    return bucket
  }
}

/** Binary search over the ascending seq list, so deep pages stay O(log n + limit). */
function firstIndexAtOrAfter(entries: readonly Entry[], seq: number): number {
  let lo = 0
  let hi = entries.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    const entry = entries[mid]
    if (entry !== undefined && entry.seq < seq) lo = mid + 1
    else hi = mid
  }
  return lo
}
