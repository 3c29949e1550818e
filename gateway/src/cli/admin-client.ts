// The operator commands' other way in: a gateway's admin API (KEYGATE_ADMIN_URL, with
// KEYGATE_ADMIN_TOKEN), so `keygate users ...` and `keygate keys ...` run anywhere that reaches the
// admin port, with no Redis access. The same operations as on the store (admin/operations.ts):
// a 404 is "no such user or key", as there; an error from the catalog is rethrown as the same
// GatewayError the direct way throws, so the command prints the same. What only this way meets
// (the admin API unreachable, the token refused) is said in words that name the variable to fix.
import type { KeyChange, KeyRevocation, OperatorKey, OperatorKeyDetail, Operations, UserPut, UserRemoval, UserSummary } from '../admin/operations.js'
import { ERRORS, GatewayError, type ErrorCode } from '../errors.js'
import type { Page, PageRequest } from '../lib/paging.js'
import type { OperatorBackend } from './operator.js'

/** an admin request that has no answer within this fails */
export const ADMIN_REQUEST_TIMEOUT_MS = 15_000

export interface Answer { status: number; body: unknown }

/** Requests to the admin API at `url` (its origin, e.g. http://10.0.0.7:9180), and what their answers mean. */
export interface AdminApi {
  base: string
  call: (method: string, path: string, body?: unknown) => Promise<Answer>
  /** the body of a 2xx; null for a 404 of `notFound`; any other answer thrown (a catalog error as its GatewayError) */
  expect: <T>(answer: Answer, notFound?: ErrorCode) => T | null
}

export function adminApi (url: string, token: string): AdminApi {
  const base = url.replace(/\/+$/, '')

  const call = async (method: string, path: string, body?: unknown): Promise<Answer> => {
    let res: Response
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(ADMIN_REQUEST_TIMEOUT_MS)
      })
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause
      const why = cause?.code ?? cause?.message ?? (err as Error).message
      throw new Error(`the admin API at ${base} cannot be reached (${why}): check KEYGATE_ADMIN_URL, ` +
        'and that the gateway runs with KEYGATE_ADMIN_PORT set and this machine can reach that port')
    }
    const text = await res.text()
    let parsed: unknown
    try { parsed = text === '' ? undefined : JSON.parse(text) } catch { parsed = text }
    if (res.status === 401) {
      throw new Error(`the admin API at ${base} refused the token (${problemCode(parsed) ?? res.status}): ` +
        'KEYGATE_ADMIN_TOKEN must be the gateway\'s own KEYGATE_ADMIN_TOKEN')
    }
    return { status: res.status, body: parsed }
  }

  const expect = <T>(answer: Answer, notFound?: ErrorCode): T | null => {
    if (answer.status >= 200 && answer.status < 300) return answer.body as T
    const code = problemCode(answer.body)
    if (answer.status === 404 && code === notFound) return null
    if (code !== undefined && code in ERRORS) {
      const { detail, ...extra } = answer.body as { detail?: string }
      throw new GatewayError(code as ErrorCode, detail ?? ERRORS[code as ErrorCode].title, { status: answer.status, extra })
    }
    const shown = typeof answer.body === 'string' ? answer.body.slice(0, 200) : JSON.stringify(answer.body)
    throw new Error(`the admin API at ${base} answered ${answer.status}: ${shown}`)
  }
  return { base, call, expect }
}

/** The operations through the admin API at `url` (its origin, e.g. http://10.0.0.7:9180). */
export function adminApiBackend (url: string, token: string): OperatorBackend {
  const { base, call, expect } = adminApi(url, token)
  const where = `the store behind the admin API at ${base}`
  const must = <T>(answer: Answer): T => expect<T>(answer) as T
  const user = (name: string): string => `/v1/users/${encodeURIComponent(name)}`
  const key = (apiKey: string): string => `/v1/keys/${encodeURIComponent(apiKey)}`

  /** `path` with the page's query (and `more`), `?a=1&b=2` */
  const paged = (path: string, page: PageRequest | undefined, more: Record<string, string> = {}): string => {
    const query = new URLSearchParams(more)
    if (page?.limit !== undefined) query.set('limit', String(page.limit))
    if (page?.cursor !== undefined) query.set('cursor', page.cursor)
    const text = query.toString()
    return text === '' ? path : `${path}?${text}`
  }
  const pageFrom = <T>(answer: Answer): Page<T> => {
    const { items, next_cursor: nextCursor } = must<{ items: T[]; next_cursor: string | null }>(answer)
    return { items, nextCursor }
  }

  const operations: Operations = {
    listUsers: async (page) => pageFrom<UserSummary>(await call('GET', paged('/v1/users', page))),
    getUser: async (name) => expect<UserSummary>(await call('GET', user(name)), 'USER_NOT_FOUND'),
    async putUser (name, input): Promise<UserPut> {
      const answer = await call('PUT', user(name), input)
      return { user: must<UserSummary>(answer), created: answer.status === 201 }
    },
    async removeUser (name): Promise<UserRemoval | null> {
      const removed = expect<UserRemoval>(await call('DELETE', user(name)), 'USER_NOT_FOUND')
      return removed === null ? null : { username: removed.username, revokedKeys: removed.revokedKeys }
    },
    listKeys: async (owner, page) => pageFrom<OperatorKey>(await call('GET', paged('/v1/keys', page, owner === undefined ? {} : { user: owner }))),
    getKey: async (apiKey) => expect<OperatorKeyDetail>(await call('GET', key(apiKey)), 'API_KEY_NOT_FOUND'),
    async revokeKey (apiKey): Promise<KeyRevocation | null> {
      const revoked = expect<OperatorKey & { alreadyRevoked: boolean }>(await call('DELETE', key(apiKey)), 'API_KEY_NOT_FOUND')
      if (revoked === null) return null
      const { alreadyRevoked, ...view } = revoked
      return { key: view, alreadyRevoked }
    },
    async updateKey (apiKey, changes): Promise<KeyChange | null> {
      const answer = await call('PATCH', key(apiKey), changes)
      // a revoked or expired key is refused with what it is, as the direct way reports it
      const refused = answer.body as { code?: string; keyStatus?: 'revoked' | 'expired'; key?: OperatorKey } | undefined
      if (answer.status === 409 && refused?.code === 'KEY_NOT_ACTIVE' && refused.keyStatus !== undefined && refused.key !== undefined) {
        return { outcome: refused.keyStatus, key: refused.key }
      }
      const updated = expect<OperatorKey>(answer, 'API_KEY_NOT_FOUND')
      return updated === null ? null : { outcome: 'updated', key: updated }
    }
  }
  return { operations, where, close: async () => {} }
}

function problemCode (body: unknown): string | undefined {
  const code = (body as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : undefined
}
