/*
 * The HTTP side of paging, shared by every list endpoint: the `limit` and
 * `cursor` query parameters, the page body `{ items, next_cursor }`, and the
 * translation between the two and the store's PageRequest / Page.
 */
import { Type, type TSchema } from '@sinclair/typebox'
import { decodeCursor, encodeCursor } from './cursor.js'
import type { FieldError } from './problem.js'
import type { Page, PageRequest } from './seq-list.js'

export const DEFAULT_LIMIT = 50

export const CURSOR_MESSAGE = 'must be a next_cursor value returned by this endpoint'

/**
 * Spread into an endpoint's query schema. Validated as the strings they are on
 * the wire (see validation.ts); the limit pattern is exactly the integers
 * 1-100, without signs, spaces or leading zeros.
 */
export const pageQueryProperties = {
  limit: Type.Optional(
    Type.String({ pattern: '^(?:[1-9][0-9]?|100)$', errorMessage: 'must be an integer from 1 to 100' })
  ),
  cursor: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', errorMessage: CURSOR_MESSAGE })),
}

export interface PageQuery {
  limit?: string | undefined
  cursor?: string | undefined
}

/** `{ items: [item...], next_cursor }` */
export function pageSchema<T extends TSchema> (item: T) {
  return Type.Object({
    items: Type.Array(item),
    next_cursor: Type.Union([Type.String(), Type.Null()]),
  })
}

/**
 * The store's view of a query that already passed the schema. A well-formed
 * cursor that we did not issue is pushed onto `errors` (and paging starts from
 * the top) so the handler can report it together with its own checks.
 */
export function readPageQuery ({ limit, cursor }: PageQuery, errors: FieldError[]): PageRequest {
  let before: number | undefined
  if (cursor !== undefined) {
    const seq = decodeCursor(cursor)
    if (seq === null) errors.push({ field: 'cursor', message: CURSOR_MESSAGE })
    else before = seq
  }
  return { limit: limit === undefined ? DEFAULT_LIMIT : Number(limit), before }
}

export function toPageBody<T> (page: Page<T>): { items: T[]; next_cursor: string | null } {
  return { items: page.items, next_cursor: page.next === null ? null : encodeCursor(page.next) }
}
