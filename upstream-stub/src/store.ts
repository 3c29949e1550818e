import { randomUUID } from 'node:crypto'
import { SeqList, type Page, type PageRequest } from './seq-list.js'

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

interface UserBucket {
  readonly list: SeqList<Client>
  readonly byId: Map<string, Client>
  readonly byTaxId: Map<string, Client>
}

/** In-memory, per-user client store. State lives as long as the process. */
export class ClientStore {
  readonly #users = new Map<string, UserBucket>()
  readonly #now: () => Date
  /** Store-wide insertion counter; see seq-list.ts for why paging uses it. */
  #seq = 0

  /** `now` is injectable so tests can force several clients into one millisecond. */
  constructor (now: () => Date = () => new Date()) {
    this.#now = now
  }

  create (userId: string, input: NewClient): CreateResult {
    const bucket = this.#bucket(userId)
    if (bucket.byTaxId.has(input.tax_id)) return { ok: false, reason: 'tax_id_taken' }

    const client: Client = Object.freeze({
      id: randomUUID(),
      name: input.name.trim(),
      email: input.email,
      tax_id: input.tax_id,
      created_at: this.#now().toISOString(),
    })
    bucket.list.append(++this.#seq, client)
    bucket.byId.set(client.id, client)
    bucket.byTaxId.set(client.tax_id, client)
    return { ok: true, client }
  }

  /** Another user's client is undefined, exactly like a missing one. */
  get (userId: string, id: string): Client | undefined {
    return this.#users.get(userId)?.byId.get(id)
  }

  /** Newest first. */
  list (userId: string, request: PageRequest): Page<Client> {
    return this.#users.get(userId)?.list.page(request) ?? { items: [], next: null }
  }

  #bucket (userId: string): UserBucket {
    let bucket = this.#users.get(userId)
    if (bucket === undefined) {
      bucket = { list: new SeqList(), byId: new Map(), byTaxId: new Map() }
      this.#users.set(userId, bucket)
    }
    return bucket
  }
}
