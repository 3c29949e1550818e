// The key pairs this browser made, in IndexedDB (database "keygate-portal", store "keys", keyed by
// apiKey). A CryptoKey is stored as it is (structured clone): a non-extractable private key stays
// non-extractable, and IndexedDB holds it for this origin only. Every private key stored is
// non-extractable, an exportable one's too (key-maker.ts keeps a non-extractable copy of it once
// exported); one an earlier version stored extractable is replaced by such a copy when next read.
// Nothing here is ever sent anywhere.
import type { KeyType } from '@keygate/client'

export interface HeldKey {
  apiKey: string
  /** the keygate user who registered it: one browser may serve several users */
  user: string
  name: string
  keyType: KeyType
  privateKey: CryptoKey
  publicKey: CryptoKey
  /** true when the private key was made exportable and downloaded (the copy held here is not extractable) */
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

/** A private key that can sign and never be exported: `privateKey` itself, or a copy of it imported non-extractable. */
async function nonExtractable (privateKey: CryptoKey): Promise<CryptoKey> {
  if (!privateKey.extractable) return privateKey
  const pkcs8 = await crypto.subtle.exportKey('pkcs8', privateKey)
  // the key's own algorithm (name, curve, hash) is what importing it back needs
  return await crypto.subtle.importKey('pkcs8', pkcs8, privateKey.algorithm, false, ['sign'])
}

/** `key` as stored from now on: an extractable private key (an earlier version kept exportable keys so) replaced by a non-extractable copy. */
async function lockedDown (key: HeldKey): Promise<HeldKey> {
  if (!key.privateKey.extractable) return key
  const locked = { ...key, privateKey: await nonExtractable(key.privateKey) }
  await saveKey(locked)
  return locked
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
  const mine = all.filter((key) => key.user === user).sort((a, b) => a.createdAt.localeCompare(b.createdAt))
  return await Promise.all(mine.map(lockedDown))
}

export async function heldKey (user: string, apiKey: string): Promise<HeldKey | undefined> {
  const key = await run<HeldKey | undefined>('readonly', (store) => store.get(apiKey))
  return key?.user === user ? await lockedDown(key) : undefined
}
