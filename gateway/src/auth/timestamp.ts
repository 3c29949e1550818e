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

/**
 * RFC 9421: the chosen signature's `created` (integer seconds), required, within the same window
 * as X-API-Timestamp; its `expires`, when present, not past (both TIMESTAMP_OUT_OF_RANGE).
 */
export function createdStage (now: () => number = Date.now): AuthStage {
  return {
    name: 'timestamp',
    needsBody: false,
    run (_request, state) {
      const { created, expires, label } = required(state.messageSignature, 'the RFC 9421 signature', 'timestamp')
      const serverTime = now()
      const extra = { serverTime, maxSkewMs: MAX_TIMESTAMP_SKEW_MS, label }
      if (created === undefined) {
        throw new GatewayError('TIMESTAMP_INVALID', `Signature-Input ${label} has no created parameter; ` +
          'send created=<seconds since the Unix epoch> (e.g. Math.floor(Date.now() / 1000))', { extra })
      }
      const createdMs = created * 1000
      if (MILLIS.test(String(created))) {
        throw new GatewayError('TIMESTAMP_INVALID',
          `Signature-Input ${label}: created looks like milliseconds; RFC 9421 counts seconds since the Unix epoch`, { extra })
      }
      if (Math.abs(serverTime - createdMs) > MAX_TIMESTAMP_SKEW_MS) {
        throw new GatewayError('TIMESTAMP_OUT_OF_RANGE',
          `Signature-Input ${label}: created is ${Math.round((createdMs - serverTime) / 1000)} s from server time; ` +
          `at most ${MAX_TIMESTAMP_SKEW_MS / 60000} minutes either way is accepted (GET /v1/time gives the server's time)`, { extra })
      }
      if (expires !== undefined && expires * 1000 <= serverTime) {
        throw new GatewayError('TIMESTAMP_OUT_OF_RANGE',
          `Signature-Input ${label}: the signature expired ${Math.round(serverTime / 1000 - expires)} s ago (expires=${expires})`, { extra })
      }
      state.timestampMs = createdMs
    }
  }
}
