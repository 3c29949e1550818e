// What happens once, in one process: replay marks (rememberOnce), one-time values (putOnce,
// takeOnce) and shared values (shareValue), each until it expires. `sweep`: the store's timer drops the expired ones.
import type { OnceStore } from '../types.js'

export function memoryOnce (now: () => number): OnceStore & { sweep: (t: number) => void } {
  /** rememberOnce's marks: when each expires, and which call made it (forget takes back only its own) */
  const remembered = new Map<string, { expiresAt: number; serial: number }>()
  let marks = 0
  /** putOnce's values, each taken at most once */
  const onces = new Map<string, { value: string; expiresAt: number }>()
  /** shareValue's values, until each expires */
  const shared = new Map<string, { value: string; expiresAt: number }>()
  return {
    sweep: (t) => {
      for (const [key, { expiresAt }] of remembered) if (expiresAt <= t) remembered.delete(key)
      for (const [key, { expiresAt }] of onces) if (expiresAt <= t) onces.delete(key)
      for (const [key, { expiresAt }] of shared) if (expiresAt <= t) shared.delete(key)
    },
    async rememberOnce (key, ttlMs) {
      // Nothing here can time out: a call that fails has written nothing.
      const existing = remembered.get(key)
      if (existing !== undefined && existing.expiresAt > now()) return false
      const serial = ++marks
      remembered.set(key, { expiresAt: now() + ttlMs, serial })
      return {
        forget: async () => {
          if (remembered.get(key)?.serial === serial) remembered.delete(key)
        }
      }
    },
    async putOnce (key, value, ttlMs) {
      onces.set(key, { value, expiresAt: now() + ttlMs })
    },
    async shareValue (key, candidate, ttlMs) {
      const held = shared.get(key)
      if (held !== undefined && held.expiresAt > now()) return held.value
      shared.set(key, { value: candidate, expiresAt: now() + ttlMs })
      return candidate
    },
    async takeOnce (key) {
      const held = onces.get(key)
      onces.delete(key)
      return held !== undefined && held.expiresAt > now() ? held.value : null
    }
  }
}
