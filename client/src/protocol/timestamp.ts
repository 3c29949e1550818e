/**
 * X-API-Timestamp: 13 to 15 digits, milliseconds since the epoch from 2001-09-09 to year 33658.
 * Fewer digits are almost always seconds (10 digits), the classic client mistake.
 */
export const MILLISECONDS_TIMESTAMP = /^[1-9][0-9]{12,14}$/

/** How far a timestamp may be from the server's clock, either way: fixed by the interface. */
export const MAX_TIMESTAMP_SKEW_MS = 15 * 60 * 1000

/** A 9- or 10-digit number: seconds since the epoch sent where milliseconds belong. */
export function looksLikeSeconds (text: string): boolean {
  return /^[0-9]{9,10}$/.test(text)
}
