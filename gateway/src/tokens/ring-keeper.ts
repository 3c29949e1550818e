// The token service's key ring as this gateway holds it: with KEYGATE_JWT_KEY_FILE that one key;
// otherwise the ring shared through the store (signing-key-ring.ts), read at start, re-read every
// 30 s and when a token names a kid this gateway does not know (one read at a time, such reads at
// most once per `unknownKidRefreshMs`, each waiter served by a read that started after it
// arrived), and replaced at once by a rotation made here.
import { createPrivateKey } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import type { Store } from '../store/types.js'
import {
  generateSigningKeyPem, parseSigningKey, REFRESH_INTERVAL_MS, rotateStoredSigningKey, UNKNOWN_KID_REFRESH_MS, type RingKey, type RotationResult
} from './signing-key-ring.js'

export interface Ring {
  current: RingKey
  /** every key that verifies, current included */
  byKid: Map<string, RingKey>
}

export interface RingKeeper {
  /** the ring as this gateway holds it now */
  readonly ring: Ring
  /** the ring is the store's, shared by every gateway on it (false: a key file) */
  readonly shared: boolean
  /** close() was called: no more re-reads */
  readonly closed: boolean
  /** how many re-reads have started: a verification notes it when a token arrives */
  readsStarted: () => number
  /** resolves once a read that started after the first `seen` reads has completed */
  refreshAfter: (seen: number) => Promise<void>
  /** makes a new current key on the store, the replaced one retiring after `retireAfter` ms; this gateway's ring follows at once */
  rotate: (retireAfter: number) => Promise<Pick<RotationResult, 'kid' | 'replaced'>>
  /** stops the periodic re-read; safe to call more than once */
  close: () => void
}

export interface RingOptions {
  /** PEM private key (Ed25519 or P-256); unset: the key ring shared through the store */
  keyFile: string | undefined
  /** how often the ring is re-read from the store (default 30 s) */
  refreshIntervalMs?: number | undefined
  /** the least time between two re-reads caused by tokens with an unknown kid (default 1 s) */
  unknownKidRefreshMs?: number | undefined
  now: () => number
}

async function readKeyFile (keyFile: string): Promise<RingKey> {
  let pem: string
  try {
    pem = await readFile(keyFile, 'utf8')
    createPrivateKey(pem)
  } catch (err) {
    throw new Error(`KEYGATE_JWT_KEY_FILE: cannot read a PEM private key from ${keyFile}: ${(err as Error).message}`, { cause: err })
  }
  return await parseSigningKey(pem, undefined)
}

export async function keepRing (store: Store, options: RingOptions): Promise<RingKeeper> {
  const { now, keyFile } = options
  const refreshIntervalMs = options.refreshIntervalMs ?? REFRESH_INTERVAL_MS
  const unknownKidRefreshMs = options.unknownKidRefreshMs ?? UNKNOWN_KID_REFRESH_MS
  /** parsed keys by PEM, so a re-read of an unchanged ring parses nothing */
  const parsed = new Map<string, RingKey>()

  const keyOf = async (pem: string, retiresAt: number | undefined): Promise<RingKey> => {
    const known = parsed.get(pem) ?? await parseSigningKey(pem, undefined)
    parsed.set(pem, known)
    return { ...known, retiresAt }
  }

  const ringFrom = async (stored: { current: string; previous: Array<{ pem: string; retiresAt: number }> }): Promise<Ring> => {
    const current = await keyOf(stored.current, undefined)
    const byKid = new Map([[current.kid, current]])
    for (const { pem, retiresAt } of stored.previous) {
      const key = await keyOf(pem, retiresAt)
      if (!byKid.has(key.kid)) byKid.set(key.kid, key)
    }
    for (const pem of parsed.keys()) if (pem !== stored.current && !stored.previous.some((p) => p.pem === pem)) parsed.delete(pem)
    return { current, byKid }
  }

  // With KEYGATE_JWT_KEY_FILE the ring is that one key, and nothing is shared through the store.
  // Rotating a file key is a restart with the new file (out of scope here: tokens signed with
  // the old file's key stop verifying at that restart).
  let ring: Ring
  if (keyFile !== undefined) {
    const key = await readKeyFile(keyFile)
    ring = { current: key, byKid: new Map([[key.kid, key]]) }
  } else {
    // The first gateway on this store generates the key and every other one adopts it.
    const current = await store.getOrCreateSigningKey(generateSigningKeyPem())
    ring = await ringFrom(await store.getSigningKeyRing() ?? { current, previous: [] })
  }
  const shared = keyFile === undefined

  // Re-reading the ring: one read at a time, and reads caused by unknown kids at most once per
  // `unknownKidRefreshMs`. A token whose kid is unknown waits for a read that started after it
  // arrived (so a rotation made just before is seen), rather than being refused while one that
  // started earlier is still running or the rate limit holds. Reads are numbered in order.
  let running: { read: number; done: Promise<void> } | undefined
  let readsStarted = 0
  let readsCompleted = 0
  let lastStartedAt = Number.NEGATIVE_INFINITY
  let scheduled: Promise<void> | undefined
  let closed = false
  /** bumped by rotate(): a read that started before a rotation must not undo it */
  let generation = 0

  const startRefresh = (): Promise<void> => {
    if (running !== undefined) return running.done
    const read = ++readsStarted
    const startedGeneration = generation
    lastStartedAt = now()
    const done = (async () => {
      await null // `running` is set before anything below can clear it
      try {
        const stored = await store.getSigningKeyRing()
        const next = stored === null ? undefined : await ringFrom(stored)
        if (next !== undefined && generation === startedGeneration) ring = next
      } catch {
        // The store is away: keep the ring we have and try again at the next occasion.
      } finally {
        readsCompleted = read
        running = undefined
      }
    })()
    running = { read, done }
    return done
  }

  /** Resolves once a read that started after the first `seen` reads has completed. */
  const refreshAfter = async (seen: number): Promise<void> => {
    if (readsCompleted > seen) return
    if (running !== undefined && running.read > seen) return await running.done
    scheduled ??= (async () => {
      // First yield, so that `scheduled` is set before this body can clear it. Then loop until
      // no read runs and the rate limit allows one, and start it in that same tick, so that it
      // starts after every waiter arrived.
      await null
      for (;;) {
        if (running !== undefined) {
          await running.done
          continue
        }
        const wait = lastStartedAt + unknownKidRefreshMs - now()
        if (wait <= 0) break
        await new Promise((resolve) => setTimeout(resolve, wait).unref())
      }
      scheduled = undefined
      await startRefresh()
    })()
    await scheduled
  }

  const timer = shared ? setInterval(() => { if (!closed) void startRefresh() }, refreshIntervalMs) : undefined
  timer?.unref()

  return {
    get ring () { return ring },
    shared,
    get closed () { return closed },
    readsStarted: () => readsStarted,
    refreshAfter,
    async rotate (retireAfter) {
      const { kid, replaced, rotation } = await rotateStoredSigningKey(store, retireAfter)
      generation++
      ring = await ringFrom(rotation)
      return { kid, replaced }
    },
    close () {
      closed = true
      if (timer !== undefined) clearInterval(timer)
    }
  }
}
