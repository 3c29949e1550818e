// Pages of a list (the user API's keys, the admin API's keys and users, the CLI): `limit` items
// after an opaque `cursor`, and the cursor of the next page (null on the last). A cursor names the
// last item given (its sort key), not a position: an item added or removed meanwhile shifts
// nothing, so paging through a list that changes never repeats or skips an item that stays.
import { GatewayError } from '../errors.js'

/** items per page when no `limit` is given */
export const DEFAULT_PAGE_LIMIT = 100
/** the most items a page holds */
export const MAX_PAGE_LIMIT = 1000
/** a `limit` as text (a query string, the CLI's --limit) is these digits; pageLimit checks the range */
export const PAGE_LIMIT_DIGITS = '^[0-9]{1,9}$'
/** the longest cursor taken */
export const MAX_CURSOR_LENGTH = 1024

export interface PageRequest {
  /** 1 to MAX_PAGE_LIMIT; default DEFAULT_PAGE_LIMIT */
  limit?: number
  /** the `nextCursor` of the page before; absent: the first page */
  cursor?: string
}

export interface Page<T> {
  items: T[]
  /** give it as `cursor` for the next page; null: this is the last */
  nextCursor: string | null
}

const invalid = (field: 'limit' | 'cursor', message: string): GatewayError =>
  new GatewayError('VALIDATION_FAILED', `${field} ${message}`, { extra: { errors: [{ field, message }] } })

/** The limit asked for, checked: VALIDATION_FAILED unless a whole number from 1 to MAX_PAGE_LIMIT. */
export function pageLimit (limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE_LIMIT
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) throw invalid('limit', `must be a whole number from 1 to ${MAX_PAGE_LIMIT}`)
  return limit
}

/** A sort key as an opaque cursor: base64url of its JSON. */
export function encodeCursor (key: readonly string[]): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url')
}

/** The sort key a cursor holds, of `parts` strings each passing `valid`; VALIDATION_FAILED otherwise. */
export function decodeCursor (cursor: string, parts: number, valid: (part: string, i: number) => boolean): string[] {
  let key: unknown
  try {
    key = cursor.length <= MAX_CURSOR_LENGTH && /^[A-Za-z0-9_-]+$/.test(cursor) ? JSON.parse(Buffer.from(cursor, 'base64url').toString()) : undefined
  } catch {}
  if (!Array.isArray(key) || key.length !== parts || !key.every((part, i) => typeof part === 'string' && valid(part, i))) {
    throw invalid('cursor', 'is not a cursor this list gave (give the nextCursor of the page before, unchanged)')
  }
  return key as string[]
}

/**
 * One page of `sorted` (in the list's order): the items after the cursor's key (`after` says
 * whether an item lies past it), at most `limit`.
 */
export function pageOf<T> (sorted: readonly T[], request: PageRequest, keyOf: (item: T) => string[],
  after: ((item: T) => boolean) | undefined): Page<T> {
  const limit = pageLimit(request.limit)
  const rest = after === undefined ? sorted : sorted.filter(after)
  const items = rest.slice(0, limit)
  const last = items[items.length - 1]
  return { items, nextCursor: rest.length > limit && last !== undefined ? encodeCursor(keyOf(last)) : null }
}
