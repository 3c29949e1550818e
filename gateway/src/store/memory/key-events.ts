// Key events in one process: users.ts and keys.ts announce each change to the listeners at once,
// as the Redis store's subscriber does for every gateway (redis/key-events.ts).
import type { KeyEvent, KeyEventListener, KeyEventStore } from '../types.js'

export function memoryKeyEvents (): KeyEventStore & { announce: (event: KeyEvent) => void } {
  const listeners = new Set<KeyEventListener>()
  return {
    announce: (event) => {
      for (const listener of listeners) listener(event)
    },
    async watchKeys (listener) {
      // One process: nothing can be missed, but a listener starts from a clean slate as on Redis.
      listeners.add(listener)
      listener({ type: 'resync' })
      return async () => { listeners.delete(listener) }
    }
  }
}
