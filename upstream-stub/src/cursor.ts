/*
 * A cursor is base64url("seq:<n>"), where n is the insertion sequence number of
 * the last item on the previous page. It is opaque to callers but not secret or
 * signed: a forged one can only move the caller's position within their own
 * list, because the store always filters by user first.
 */

const PREFIX = 'seq:'
const SEQ = /^[1-9][0-9]{0,15}$/

export function encodeCursor (seq: number): string {
  return Buffer.from(`${PREFIX}${seq}`, 'utf8').toString('base64url')
}

/** Returns the sequence number, or null for anything we did not issue. */
export function decodeCursor (cursor: string): number | null {
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8')
  if (!decoded.startsWith(PREFIX)) return null
  const digits = decoded.slice(PREFIX.length)
  if (!SEQ.test(digits)) return null
  const seq = Number(digits)
  // Node's base64 decoder silently skips characters it does not understand, so
  // only a byte-for-byte round trip proves the input is a cursor we issued.
  if (!Number.isSafeInteger(seq) || encodeCursor(seq) !== cursor) return null
  return seq
}
