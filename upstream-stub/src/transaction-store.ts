import { randomUUID } from 'node:crypto'
import { SeqList, type Page, type PageRequest } from './seq-list.js'

export interface Transaction {
  readonly id: string
  readonly client_id: string
  /** Kept as the caller's decimal string: no float ever touches a money amount. */
  readonly amount: string
  readonly currency: string
  readonly created_at: string
}

export interface NewTransaction {
  client_id: string
  amount: string
  currency: string
}

export interface TransactionPageRequest extends PageRequest {
  /** Only this client's transactions. */
  clientId?: string | undefined
}

interface UserBucket {
  readonly all: SeqList<Transaction>
  /**
   * The same transactions again, one list per client, so a filtered page costs
   * the same as an unfiltered one instead of scanning past other clients.
   */
  readonly byClient: Map<string, SeqList<Transaction>>
  readonly byId: Map<string, Transaction>
}

/**
 * In-memory, per-user transaction store. It does not know about clients: the
 * caller checks that `client_id` is one of the user's clients before `create`.
 */
export class TransactionStore {
  readonly #users = new Map<string, UserBucket>()
  readonly #now: () => Date
  #seq = 0

  constructor (now: () => Date = () => new Date()) {
    this.#now = now
  }

  create (userId: string, input: NewTransaction): Transaction {
    const bucket = this.#bucket(userId)
    const transaction: Transaction = Object.freeze({
      id: randomUUID(),
      client_id: input.client_id,
      amount: input.amount,
      currency: input.currency,
      created_at: this.#now().toISOString(),
    })
    const seq = ++this.#seq
    bucket.all.append(seq, transaction)
    let forClient = bucket.byClient.get(transaction.client_id)
    if (forClient === undefined) {
      forClient = new SeqList()
      bucket.byClient.set(transaction.client_id, forClient)
    }
    forClient.append(seq, transaction)
    bucket.byId.set(transaction.id, transaction)
    return transaction
  }

  /** Another user's transaction is undefined, exactly like a missing one. */
  get (userId: string, id: string): Transaction | undefined {
    return this.#users.get(userId)?.byId.get(id)
  }

  /** Newest first, optionally only one client's. */
  list (userId: string, { clientId, ...request }: TransactionPageRequest): Page<Transaction> {
    const bucket = this.#users.get(userId)
    const list = clientId === undefined ? bucket?.all : bucket?.byClient.get(clientId)
    return list?.page(request) ?? { items: [], next: null }
  }

  #bucket (userId: string): UserBucket {
    let bucket = this.#users.get(userId)
    if (bucket === undefined) {
      bucket = { all: new SeqList(), byClient: new Map(), byId: new Map() }
      this.#users.set(userId, bucket)
    }
    return bucket
  }
}
