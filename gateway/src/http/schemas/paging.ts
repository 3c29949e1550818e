// The wire shape of every paged list (the user API's keys, the admin API's keys and users): the
// query it takes and the page it answers. The paging itself is lib/paging.ts.
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { DEFAULT_PAGE_LIMIT, MAX_CURSOR_LENGTH, MAX_PAGE_LIMIT, PAGE_LIMIT_DIGITS, type Page, type PageRequest } from '../../lib/paging.js'

/** `?limit=&cursor=` of every paged list (lib/paging.ts), with the list's own fields besides */
export const PageQuery = Type.Object({
  // digits: a query string is text (no type coercion here); the range is checked by lib/paging.ts
  limit: Type.Optional(Type.String({
    pattern: PAGE_LIMIT_DIGITS, description: `items per page, 1 to ${MAX_PAGE_LIMIT}; default ${DEFAULT_PAGE_LIMIT}`
  })),
  cursor: Type.Optional(Type.String({
    minLength: 1, maxLength: MAX_CURSOR_LENGTH, description: 'the `next_cursor` of the page before, as it was given; absent: the first page'
  }))
}, { additionalProperties: false })
export type PageQuery = Static<typeof PageQuery>

/**
 * A page of a list: `items` and `next_cursor`, the shape of every list keygate answers (as the
 * clients list of the example service: CONTRACT.md), so one paging loop serves them all.
 */
export const PageOf = <T extends TSchema>(item: T, order: string, description?: string) => Type.Object({
  items: Type.Array(item, { description: order }),
  next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'give it as `cursor` for the next page; null: this page is the last' })
}, description === undefined ? {} : { description })

/** A PageQuery as it passed the schema (limit: digits) as the page to ask for. */
export const pageRequestOf = ({ limit, cursor }: PageQuery): PageRequest =>
  ({ ...(limit !== undefined && { limit: Number(limit) }), ...(cursor !== undefined && { cursor }) })

/** A page as a PageOf answers it. */
export const pageAnswer = <T>({ items, nextCursor }: Page<T>): { items: T[]; next_cursor: string | null } => ({ items, next_cursor: nextCursor })
