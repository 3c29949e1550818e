import { GatewayError } from '../errors.js'
import type { KeyRegistry } from '../keys/key-registry.js'
import { required, type AuthStage } from './stage.js'

/** X-API-Key -> the registered key (from the in-process cache when known). */
export function apiKeyStage (keys: KeyRegistry): AuthStage {
  return {
    name: 'api-key',
    needsBody: false,
    async run (_request, state) {
      const { apiKey } = required(state.signatureHeaders, 'the signature headers', 'api-key')
      const key = await keys.lookup(apiKey)
      if (key === null) {
        throw new GatewayError('UNKNOWN_API_KEY', 'X-API-Key is not a registered key; send the apiKey that POST /v1/api-keys returned')
      }
      state.key = key
    }
  }
}
