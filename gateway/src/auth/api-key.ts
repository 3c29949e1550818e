import { GatewayError } from '../errors.js'
import type { KeyCheck, KeyRegistry } from '../keys/key-registry.js'
import { required, type AuthStage, type AuthState } from './stage.js'

/**
 * X-API-Key -> the registered key (from the in-process cache when known). A revoked or expired
 * key is refused like an unknown one (UNKNOWN_API_KEY, the same code); only its owner is told
 * which, so a key's state is news to no one else.
 */
export function accept (found: KeyCheck | null, state: AuthState, field = 'X-API-Key'): void {
  if (found === null || (found.status !== 'active' && found.owner !== state.user)) {
    throw new GatewayError('UNKNOWN_API_KEY', `${field} is not a registered key; send the apiKey that POST /v1/api-keys returned`)
  }
  if (found.status !== 'active') {
    const what = found.status === 'revoked' ? 'was revoked' : 'expired'
    throw new GatewayError('UNKNOWN_API_KEY', `${field} ${what} at ${found.at}; register a new key`, { extra: { keyStatus: found.status } })
  }
  state.key = found.key
}

export function apiKeyStage (keys: KeyRegistry, now: () => number = Date.now): AuthStage {
  return {
    name: 'api-key',
    needsBody: false,
    run (_request, state) {
      const { apiKey } = required(state.signatureHeaders, 'the signature headers', 'api-key')
      const found = keys.check(apiKey, now())
      // a key this process knows: no promise; else one store read
      if (found instanceof Promise) return found.then((key) => { accept(key, state) })
      accept(found, state)
    }
  }
}
