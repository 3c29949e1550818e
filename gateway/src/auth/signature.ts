import { GatewayError } from '../errors.js'
import { decodeBase64, verifyRsaSha256 } from '../keys/public-key.js'
import { required, type AuthStage } from './stage.js'

const EMPTY = Buffer.alloc(0)

/**
 * The signing string of SPEC.md §5 as bytes: timestamp + METHOD + raw request target + raw body.
 * The target is the request line's, undecoded, query included (CONTRACT.md); the app has already
 * refused targets with bytes outside URI characters, so latin1 is the identity on it.
 */
export function signingString (timestamp: string, method: string, target: string, body: Buffer | undefined): Buffer[] {
  const head = Buffer.from(timestamp + method + target, 'latin1')
  return body === undefined || body.length === 0 ? [head] : [head, body]
}

/**
 * X-API-Signature: RSA-SHA256 over the signing string, with the registered key.
 * `observeVerification` gets the seconds the RSA verification alone took (the metrics).
 */
export function signatureStage (observeVerification?: (seconds: number) => void): AuthStage {
  return {
    name: 'signature',
    needsBody: true,
    run (request, state) {
      const { timestamp, signature } = required(state.signatureHeaders, 'the signature headers', 'signature')
      const key = required(state.key, 'the key', 'signature')
      const body = Buffer.isBuffer(request.body) ? request.body : EMPTY
      const signed = signingString(timestamp, request.raw.method ?? '', request.raw.url ?? '', body)
      const bytes = decodeBase64(signature)
      let verified = false
      if (bytes !== undefined) {
        const started = performance.now()
        verified = verifyRsaSha256(key.keyObject, signed, bytes)
        observeVerification?.((performance.now() - started) / 1000)
      }
      if (!verified) {
        throw new GatewayError('INVALID_SIGNATURE', 'X-API-Signature does not verify: sign timestamp + METHOD + path (with ?query if any) + the exact body bytes, with the private key of X-API-Key, and send it as single-line base64')
      }
    }
  }
}
