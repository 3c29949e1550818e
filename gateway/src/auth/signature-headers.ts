import { GatewayError } from '../errors.js'
import type { AuthStage } from './stage.js'

const HEADERS = ['x-api-key', 'x-api-timestamp', 'x-api-signature'] as const

/** X-API-Key, X-API-Timestamp and X-API-Signature, each present once and non-empty. */
export function signatureHeadersStage (): AuthStage {
  return {
    name: 'signature-headers',
    needsBody: false,
    run (request, state) {
      const values = HEADERS.map((name) => request.headers[name])
      const missing = HEADERS.filter((_, i) => typeof values[i] !== 'string' || values[i] === '')
      if (missing.length > 0) {
        throw new GatewayError(
          'MISSING_SIGNATURE_HEADERS',
          `Business requests need the X-API-Key, X-API-Timestamp and X-API-Signature headers; missing: ${missing.join(', ')}`,
          { extra: { missing } }
        )
      }
      const [apiKey, timestamp, signature] = values as [string, string, string]
      state.signatureHeaders = { apiKey, timestamp, signature }
    }
  }
}
