// The key pairs this browser made, in IndexedDB (database "keygate-portal", store "keys", keyed by
// apiKey). A CryptoKey is stored as it is (structured clone): a non-extractable private key stays
// non-extractable, and IndexedDB holds it for this origin only. Nothing here is ever sent anywhere.
import type { KeyType } from '@keygate/client'

export interface HeldKey {
  apiKey: string
  /** the keygate user who registered it: one browser may serve several users */
  user: string
  name: string
  keyType: KeyType
  privateKey: CryptoKey
  publicKey: CryptoKey
  /** true when the private key was made exportable (and downloaded) */
  exportable: boolean
  createdAt: string
}

const DB = 'keygate-portal'
const STORE = 'keys'

let opened: Promise<IDBDatabase> | undefined

function database (): Promise<IDBDatabase> {
  opened ??= new Promise<IDBDatabase>((resolve, reject) => {
    const request = indexedDB.open(DB, 1)
    request.onupgradeneeded = () => { request.result.createObjectStore(STORE, { keyPath: 'apiKey' }) }
    request.onsuccess = () => { resolve(request.result) }
    request.onerror = () => { reject(request.error ?? new Error('IndexedDB would not open')) }
  })
  return opened
}

async function run<T> (mode: IDBTransactionMode, act: (store: IDBObjectStore) => IDBRequest): Promise<T> {
  const db = await database()
  return await new Promise<T>((resolve, reject) => {
    const transaction = db.transaction(STORE, mode)
    const request = act(transaction.objectStore(STORE))
    // resolved once the transaction is done: a write is then stored, not merely asked for
    transaction.oncomplete = () => { resolve(request.result as T) }
    transaction.onerror = () => { reject(transaction.error ?? request.error ?? new Error('IndexedDB failed')) }
    transaction.onabort = () => { reject(transaction.error ?? new Error('IndexedDB transaction aborted')) }
  })
}

export async function saveKey (key: HeldKey): Promise<void> {
  await run('readwrite', (store) => store.put(key))
}

export async function forgetKey (apiKey: string): Promise<void> {
  await run('readwrite', (store) => store.delete(apiKey))
}

/** The keys this browser holds for `user`, oldest first. */
export async function heldKeys (user: string): Promise<HeldKey[]> {
  const all = await run<HeldKey[]>('readonly', (store) => store.getAll())
  return all.filter((key) => key.user === user).sort((a, b) => a.createdAt.localeCompare(b.createdAt))
}

export async function heldKey (user: string, apiKey: string): Promise<HeldKey | undefined> {
  const key = await run<HeldKey | undefined>('readonly', (store) => store.get(apiKey))
  return key?.user === user ? key : undefined
}
