// When a key may sign: its status at a moment (revoked is forever, expired from its expiresAt on),
// and the one check of an expiry an owner or operator asks for (registration, a change).
import type { KeyRecord } from '../store/index.js'
import { GatewayError } from '../errors.js'

export type KeyStatus = 'active' | 'revoked' | 'expired'

/** the furthest ahead `expiresAt` may be: keys are meant to be rotated */
export const MAX_KEY_LIFETIME_MS = 5 * 366 * 24 * 3600 * 1000
/** ISO 8601 date and time with seconds optional, fraction optional and a mandatory zone */
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/

/** ms since the epoch, or NaN unless every field is in range (Date.parse rolls 02-31 into March) */
function parseIsoDateTime (value: string): number {
  const m = ISO_DATE_TIME.exec(value)
  if (m === null) return Number.NaN
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m.slice(1).map((f) => Number(f ?? 0)) as number[]
  const daysInMonth = new Date(Date.UTC(year ?? 0, month ?? 0, 0)).getUTCDate()
  const inRange = (month ?? 0) >= 1 && (month ?? 0) <= 12 && (day ?? 0) >= 1 && (day ?? 0) <= daysInMonth &&
    (hour ?? 0) <= 23 && (minute ?? 0) <= 59 && (second ?? 0) <= 59 && (offsetHours ?? 0) <= 23 && (offsetMinutes ?? 0) <= 59
  return inRange ? Date.parse(value) : Number.NaN
}

/** A stored expiry as ms since the epoch; Infinity when the key does not expire. */
export function expiryMs (expiresAt: string | undefined): number {
  return expiresAt === undefined ? Number.POSITIVE_INFINITY : Date.parse(expiresAt)
}

export function keyStatus (record: Pick<KeyRecord, 'revokedAt' | 'expiresAt'>, nowMs: number): KeyStatus {
  if (record.revokedAt !== undefined) return 'revoked'
  if (record.expiresAt !== undefined && Date.parse(record.expiresAt) <= nowMs) return 'expired'
  return 'active'
}

/** The `expiresAt` of a registration as stored (ISO 8601 UTC), or a VALIDATION_FAILED. */
export function parseExpiresAt (value: string, nowMs: number): string {
  const ms = parseIsoDateTime(value)
  const invalid = (message: string): GatewayError => new GatewayError('VALIDATION_FAILED', `expiresAt ${message}`, {
    extra: { errors: [{ field: 'expiresAt', message }] }
  })
  if (!Number.isFinite(ms)) throw invalid('must be an ISO 8601 date and time with a time zone, e.g. 2030-01-31T12:00:00Z')
  if (ms <= nowMs) throw invalid('must be in the future')
  if (ms > nowMs + MAX_KEY_LIFETIME_MS) throw invalid('must be at most 5 years ahead')
  return new Date(ms).toISOString()
}
