// keygate's user API as the portal reads it: the shapes of gateway/src/http/schemas/{api-keys,
// routes,usage}.ts, and one function per call.
import type { KeyType } from '@keygate/client'
import { api } from './session.js'

export interface KeyView {
  apiKey: string
  name: string
  createdAt: string
  lastUsedAt: string | null
  status: 'active' | 'revoked' | 'expired'
  keyType?: KeyType
  expiresAt?: string
  revokedAt?: string
  /** null: every scope of its user */
  scopes: string[] | null
}

export interface Page<T> { items: T[]; next_cursor: string | null }

export interface OfferedRoute {
  name: string
  prefix?: string
  path?: string
  methods: string[]
  tier: 'signed' | 'bearer' | 'public'
  scopes: string[]
  signature?: Array<'seed' | 'rfc9421'>
  signatureLabel?: string
  rateLimits: Array<{ by: 'key' | 'user' | 'address'; limit: number; window: string; policy: string }>
}

export interface LimitUsage {
  routes: string[]
  bucket: string | null
  policy: string
  by: 'key' | 'user'
  limit: number
  window: string
  used: number
  remaining: number
  resetSeconds: number
  /** a tool's own limit on an MCP route: the tools (names or globs) it counts */
  tools?: string[]
}

/** One bucket of a key's requests (GET /v1/api-keys/{apiKey}/usage/series): schemas/usage-analytics.ts */
export interface UsagePoint {
  /** the bucket's start */
  at: string
  requests: number
  /** of them, those keygate refused, with one of its error codes */
  refusals: number
  /** by status class: 2xx, 3xx, 4xx, 5xx */
  statuses: Record<string, number>
  /** refusals by error code */
  codes: Record<string, number>
}

export interface UsageSeries {
  since: string
  resolution: 'minute' | 'hour'
  bucketSeconds: number
  from: string
  to: string
  /** every bucket of the window, oldest first, zeros included */
  points: UsagePoint[]
  /** the requests on MCP routes over the window, by route, JSON-RPC method and tool (null: not tools/call), most first */
  mcpCalls: Array<{ route: string, method: string, tool: string | null, requests: number, refusals: number }>
}

export const KEYS_PER_PAGE = 10

export async function listKeys (cursor: string | undefined): Promise<Page<KeyView>> {
  const query = new URLSearchParams({ limit: String(KEYS_PER_PAGE), ...(cursor !== undefined && { cursor }) })
  return await api<Page<KeyView>>('GET', `/v1/api-keys?${query.toString()}`)
}

/** Every one of the user's keys (GET /v1/api-keys page after page): to find one by apiKey. */
export async function allKeys (): Promise<KeyView[]> {
  const keys: KeyView[] = []
  let cursor: string | undefined
  do {
    const query = new URLSearchParams({ limit: '1000', ...(cursor !== undefined && { cursor }) })
    const page = await api<Page<KeyView>>('GET', `/v1/api-keys?${query.toString()}`)
    keys.push(...page.items)
    cursor = page.next_cursor ?? undefined
  } while (cursor !== undefined)
  return keys
}

export async function revokeKey (apiKey: string): Promise<void> {
  await api<undefined>('DELETE', `/v1/api-keys/${encodeURIComponent(apiKey)}`)
}

export async function keyUsage (apiKey: string): Promise<LimitUsage[]> {
  return (await api<{ items: LimitUsage[] }>('GET', `/v1/api-keys/${encodeURIComponent(apiKey)}/usage`)).items
}

/** The key's requests over the window `since` (1h: minute buckets; 1d: hour buckets), as every gateway counted them. */
export async function keySeries (apiKey: string, since: '1h' | '1d'): Promise<UsageSeries> {
  return await api<UsageSeries>('GET', `/v1/api-keys/${encodeURIComponent(apiKey)}/usage/series?since=${since}`)
}

export async function userUsage (): Promise<LimitUsage[]> {
  return (await api<{ items: LimitUsage[] }>('GET', '/v1/usage')).items
}

/** Every route the user may call (GET /v1/routes, page after page). */
export async function allRoutes (): Promise<OfferedRoute[]> {
  const routes: OfferedRoute[] = []
  let cursor: string | undefined
  do {
    const query = new URLSearchParams({ limit: '1000', ...(cursor !== undefined && { cursor }) })
    const page = await api<Page<OfferedRoute>>('GET', `/v1/routes?${query.toString()}`)
    routes.push(...page.items)
    cursor = page.next_cursor ?? undefined
  } while (cursor !== undefined)
  return routes
}

/** "/v1/clients/" for a prefix, "/status" for an exact path */
export function routePath (route: OfferedRoute): string {
  return route.prefix ?? route.path ?? '/'
}
