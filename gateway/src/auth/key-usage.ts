import type { KeyRegistry } from '../keys/key-registry.js'
import { required, type AuthStage } from './stage.js'

/**
 * The request passed every check: note the key's use for its `lastUsedAt`. Coalesced (one store
 * write per key per minute per gateway) and never awaited, so it costs the request nothing.
 */
export function keyUsageStage (keys: KeyRegistry, now: () => number = Date.now): AuthStage {
  return {
    name: 'key-usage',
    needsBody: true,
    run (_request, state) {
      keys.recordUse(required(state.key, 'the key', 'key-usage'), now())
    }
  }
}
