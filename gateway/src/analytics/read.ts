// Usage analytics, the reading side: the buckets that cover a window (minutes while they are
// kept, hours beyond: buckets.ts), added up into the top keys, users, routes or signed agents, or
// into one key's, user's, route's or agent's series. Read by the admin API and by a user for their own keys.
import { GatewayError } from '../errors.js'
import type { Store } from '../store/index.js'
import { bucketStarts, decodeField, MAX_WINDOW_MS, NONE, RESOLUTIONS, resolutionFor, type Resolution, type UsageDimensions } from './buckets.js'

export type UsageDimension = 'key' | 'user' | 'route' | 'agent'
export type UsageOrder = 'requests' | 'refusals'

/** what a set of requests came to */
export interface UsageTotals {
  requests: number
  /** requests keygate refused (it answered with one of its error codes) */
  refusals: number
  /** by status class: 2xx, 3xx, 4xx, 5xx */
  statuses: Record<string, number>
  /** refusals by error code */
  codes: Record<string, number>
}

export interface UsageWindow {
  /** the window as asked, e.g. 1h */
  since: string
  resolution: Resolution
  bucketSeconds: number
  /** the start of the first bucket read and the end of the last (ISO 8601) */
  from: string
  to: string
}

export interface TopUsage extends UsageWindow {
  by: UsageDimension
  order: UsageOrder
  items: Array<{ name: string | null } & UsageTotals>
}

/** requests on an MCP route over a window, by its JSON-RPC method and tool (bounded labels: mcp-calls/labels.ts) */
export interface McpCalls { route: string; method: string; tool: string | null; requests: number; refusals: number }

export interface UsageSeries extends UsageWindow {
  by: UsageDimension
  name: string
  points: Array<{ at: string } & UsageTotals>
  /** over the whole window, most first */
  mcpCalls: McpCalls[]
}

const WINDOW = /^([1-9][0-9]{0,4})([mhd])$/
const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 }

/** '15m', '6h', '7d' in ms; undefined when it is not one, or longer than the data kept */
export function parseWindow (text: string): number | undefined {
  const match = WINDOW.exec(text)
  if (match === null) return undefined
  const ms = Number(match[1]) * (UNIT_MS[match[2] as string] as number)
  return ms <= MAX_WINDOW_MS ? ms : undefined
}

/** what parseWindow takes, for error messages and the schemas */
export const WINDOW_PATTERN = '^[1-9][0-9]{0,4}[mhd]$'
export const WINDOW_HELP = `a number and m, h or d (15m, 6h, 7d), at most ${MAX_WINDOW_MS / 86_400_000}d`

/** `since` as milliseconds, or 400 VALIDATION_FAILED naming the field (the schemas check the form, this the length) */
export function windowOf (since: string): number {
  const ms = parseWindow(since)
  if (ms === undefined) {
    throw new GatewayError('VALIDATION_FAILED', `since=${since} is longer than the usage kept: ${WINDOW_HELP}`, {
      extra: { errors: [{ field: 'since', message: WINDOW_HELP }] }
    })
  }
  return ms
}

const emptyTotals = (): UsageTotals => ({ requests: 0, refusals: 0, statuses: {}, codes: {} })

function add (totals: UsageTotals, { status, code }: UsageDimensions, n: number): void {
  totals.requests += n
  totals.statuses[status] = (totals.statuses[status] ?? 0) + n
  if (code !== NONE) {
    totals.refusals += n
    totals.codes[code] = (totals.codes[code] ?? 0) + n
  }
}

async function readWindow (store: Pick<Store, 'readUsageCounts'>, since: string, windowMs: number, nowMs: number):
Promise<{ window: UsageWindow; starts: number[]; buckets: Array<Map<string, number>> }> {
  const resolution = resolutionFor(windowMs)
  const { ms, tag } = RESOLUTIONS[resolution]
  const starts = bucketStarts(resolution, windowMs, nowMs)
  const buckets = await store.readUsageCounts(starts.map((start) => `${tag}:${Math.floor(start / ms)}`))
  const window = {
    since,
    resolution,
    bucketSeconds: ms / 1000,
    from: new Date(starts[0] as number).toISOString(),
    to: new Date((starts.at(-1) as number) + ms).toISOString()
  }
  return { window, starts, buckets }
}

/** The `limit` keys, users or routes with the most requests (or refusals) in the window; ties by name. */
export async function topUsage (store: Pick<Store, 'readUsageCounts'>,
  query: { by: UsageDimension; order: UsageOrder; since: string; windowMs: number; limit: number }, nowMs: number = Date.now()): Promise<TopUsage> {
  const { window, buckets } = await readWindow(store, query.since, query.windowMs, nowMs)
  const totals = new Map<string, UsageTotals>()
  for (const bucket of buckets) {
    for (const [field, n] of bucket) {
      const dims = decodeField(field)
      if (dims === undefined) continue
      const name = dims[query.by]
      let entry = totals.get(name)
      if (entry === undefined) totals.set(name, entry = emptyTotals())
      add(entry, dims, n)
    }
  }
  const items = [...totals].map(([name, t]) => ({ name: name === NONE ? null : name, ...t }))
    .filter((item) => item[query.order] > 0)
    .sort((a, b) => b[query.order] - a[query.order] || b.requests - a.requests || String(a.name).localeCompare(String(b.name)))
    .slice(0, query.limit)
  return { by: query.by, order: query.order, ...window, items }
}

function countCall (calls: Map<string, McpCalls>, { route, method, tool, code }: UsageDimensions, n: number): void {
  const id = JSON.stringify([route, method, tool])
  let entry = calls.get(id)
  if (entry === undefined) calls.set(id, entry = { route, method, tool: tool === NONE ? null : tool, requests: 0, refusals: 0 })
  entry.requests += n
  if (code !== NONE) entry.refusals += n
}

/** One key's, user's or route's counts, bucket by bucket over the window (every bucket, zeros included). */
export async function usageSeries (store: Pick<Store, 'readUsageCounts'>, query: { by: UsageDimension; name: string; since: string; windowMs: number },
  nowMs: number = Date.now()): Promise<UsageSeries> {
  const { window, starts, buckets } = await readWindow(store, query.since, query.windowMs, nowMs)
  const calls = new Map<string, McpCalls>()
  const points = starts.map((start, i) => {
    const totals = emptyTotals()
    for (const [field, n] of buckets[i] ?? []) {
      const dims = decodeField(field)
      if (dims === undefined || dims[query.by] !== query.name) continue
      add(totals, dims, n)
      if (dims.method !== NONE) countCall(calls, dims, n)
    }
    return { at: new Date(start).toISOString(), ...totals }
  })
  const mcpCalls = [...calls.values()].sort((a, b) => b.requests - a.requests || a.route.localeCompare(b.route) ||
    a.method.localeCompare(b.method) || String(a.tool).localeCompare(String(b.tool)))
  return { by: query.by, name: query.name, ...window, points, mcpCalls }
}
