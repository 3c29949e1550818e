import { GatewayError } from '../errors.js'
import { required, type AuthStage } from './stage.js'

/** The key must belong to the user the bearer token names. */
export function keyOwnerStage (): AuthStage {
  return {
    name: 'key-owner',
    needsBody: false,
    run (_request, state) {
      const key = required(state.key, 'the key', 'key-owner')
      if (key.owner !== required(state.user, 'the user', 'key-owner')) {
        throw new GatewayError('KEY_OWNER_MISMATCH', 'X-API-Key belongs to another user than the bearer token; use a key registered with this token\'s user')
      }
    }
  }
}
