import { looksLikeSeconds, MAX_TIMESTAMP_SKEW_MS, MILLISECONDS_TIMESTAMP as MILLIS } from '#client/protocol'
import { GatewayError } from '../errors.js'
import { required, type AuthStage } from './stage.js'

/** X-API-Timestamp: decimal milliseconds, no more than 15 minutes from the server's clock. */
export function timestampStage (now: () => number = Date.now): AuthStage {
  return {
    name: 'timestamp',
    needsBody: false,
    run (_request, state) {
      const { timestamp } = required(state.signatureHeaders, 'the signature headers', 'timestamp')
      const serverTime = now()
      const extra = { serverTime, maxSkewMs: MAX_TIMESTAMP_SKEW_MS }
      if (!MILLIS.test(timestamp)) {
        throw new GatewayError('TIMESTAMP_INVALID', looksLikeSeconds(timestamp)
          ? 'X-API-Timestamp looks like seconds; send milliseconds since the Unix epoch (e.g. Date.now())'
          : 'X-API-Timestamp must be the decimal number of milliseconds since the Unix epoch', { extra })
      }
      const timestampMs = Number(timestamp)
      if (Math.abs(serverTime - timestampMs) > MAX_TIMESTAMP_SKEW_MS) {
        throw new GatewayError('TIMESTAMP_OUT_OF_RANGE', `X-API-Timestamp is ${Math.round((timestampMs - serverTime) / 1000)} s from server time; ` +
          `at most ${MAX_TIMESTAMP_SKEW_MS / 60000} minutes either way is accepted (GET /v1/time gives the server's time)`, { extra })
      }
      state.timestampMs = timestampMs
    }
  }
}
