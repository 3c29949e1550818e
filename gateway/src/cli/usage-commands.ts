// `keygate usage top|series`: usage over time (analytics/), through a gateway's admin API
// (KEYGATE_ADMIN_URL and KEYGATE_ADMIN_TOKEN: GET /v1/usage/top and /v1/usage/series) or, as the
// keys and users commands do without it, straight from the gateways' Redis. A table, or --json:
// the admin API's answer as it is.
import { parseArgs } from 'node:util'
import type { TopUsage, UsageDimension, UsageOrder, UsageSeries, UsageTotals } from '../analytics/read.js'
import { formatTable } from '../lib/table.js'
import type { AdminApi } from './admin-client.js'
import type { GatewayConfig } from '../config/env.js'

export class UsageCommandError extends Error {}

export interface TopRequest { by: UsageDimension; order: UsageOrder; since: string; limit: number }
export interface SeriesRequest { by: UsageDimension; name: string; since: string }

/** Where the numbers are read. */
export interface UsageSource {
  top: (request: TopRequest) => Promise<TopUsage>
  series: (request: SeriesRequest) => Promise<UsageSeries>
  close: () => Promise<void>
}

/** Through the admin API: the same answers as a script of its own would get. */
export function adminUsageSource (api: AdminApi): UsageSource {
  const get = async <T>(path: string, query: Record<string, string>): Promise<T> =>
    api.expect<T>(await api.call('GET', `${path}?${new URLSearchParams(query).toString()}`)) as T
  return {
    top: async ({ by, order, since, limit }) => await get<TopUsage>('/v1/usage/top', { by, order, since, limit: String(limit) }),
    series: async ({ by, name, since }) => await get<UsageSeries>('/v1/usage/series', { [by]: name, since }),
    close: async () => {}
  }
}

/** Straight from the gateways' store, as the admin API reads it (an unknown key or user: 404 there, an error here). */
export async function directUsageSource (config: GatewayConfig): Promise<UsageSource> {
  const [{ createStore }, { topUsage, usageSeries, windowOf }, { GatewayError }] =
    await Promise.all([import('../store/index.js'), import('../analytics/read.js'), import('../errors.js')])
  const store = await createStore(config)
  return {
    top: async ({ by, order, since, limit }) => await topUsage(store, { by, order, since, windowMs: windowOf(since), limit }),
    async series ({ by, name, since }) {
      const windowMs = windowOf(since)
      if (by === 'key' && await store.getKey(name) === null) throw new GatewayError('API_KEY_NOT_FOUND', `No API key ${name}`)
      if (by === 'user' && await store.getUser(name) === null) throw new GatewayError('USER_NOT_FOUND', `No user ${name}`)
      return await usageSeries(store, { by, name, since, windowMs })
    },
    close: async () => { await store.close() }
  }
}

const DIMENSIONS = ['key', 'user', 'route', 'agent']
const ORDERS = ['requests', 'refusals']
const CLASSES = ['2xx', '3xx', '4xx', '5xx']

/** the arguments after `usage top` or `usage series`, checked before anything is read */
export function parseUsageArgs (command: string | undefined, args: string[]): { json: boolean } & ({ top: TopRequest } | { series: SeriesRequest }) {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args,
      strict: true,
      options: {
        json: { type: 'boolean' },
        since: { type: 'string' },
        ...(command === 'top'
          ? { by: { type: 'string' as const }, order: { type: 'string' as const }, limit: { type: 'string' as const } }
          : { key: { type: 'string' as const }, user: { type: 'string' as const }, route: { type: 'string' as const }, agent: { type: 'string' as const } })
      }
    }).values as Record<string, string | boolean | undefined>
  } catch (err) {
    throw new UsageCommandError(`usage ${command ?? ''}: ${(err as Error).message}`)
  }
  const json = values.json === true
  const since = values.since as string | undefined
  if (command === 'top') {
    const by = values.by as string | undefined
    const order = (values.order as string | undefined) ?? 'requests'
    const limit = (values.limit as string | undefined) ?? '10'
    if (by === undefined || !DIMENSIONS.includes(by)) throw new UsageCommandError('usage top needs --by key, user, route or agent')
    if (!ORDERS.includes(order)) throw new UsageCommandError('usage top: --order is requests or refusals')
    if (!/^(?:[1-9][0-9]{0,2}|1000)$/.test(limit)) throw new UsageCommandError('usage top: --limit is 1 to 1000')
    return { json, top: { by: by as UsageDimension, order: order as UsageOrder, since: since ?? '1h', limit: Number(limit) } }
  }
  const given = DIMENSIONS.filter((dimension) => values[dimension] !== undefined)
  if (given.length !== 1) throw new UsageCommandError('usage series needs one of --key APIKEY, --user NAME, --route NAME and --agent ORIGIN')
  const by = given[0] as UsageDimension
  return { json, series: { by, name: values[by] as string, since: since ?? '6h' } }
}

const codes = (totals: UsageTotals): string =>
  Object.entries(totals.codes).sort(([, a], [, b]) => b - a).map(([code, n]) => `${code} ${n}`).join(', ') || '-'

const counts = (totals: UsageTotals): string[] =>
  [String(totals.requests), String(totals.refusals), ...CLASSES.map((cls) => String(totals.statuses[cls] ?? 0)), codes(totals)]

const COUNT_HEADER = ['REQUESTS', 'REFUSALS', ...CLASSES.map((cls) => cls.toUpperCase()), 'CODES']

/** `usage top` as a person reads it: one line per key, user, route or agent, most first */
export function formatTop (top: TopUsage): string {
  if (top.items.length === 0) return `no ${top.order} counted in the last ${top.since}\n`
  return formatTable([[top.by.toUpperCase(), ...COUNT_HEADER], ...top.items.map((item) => [item.name ?? '(none)', ...counts(item)])])
}

/** `usage series` as a person reads it: the buckets that had requests, oldest first */
export function formatSeries (series: UsageSeries): string {
  const busy = series.points.filter((point) => point.requests > 0)
  if (busy.length === 0) return `no requests counted for ${series.by} ${series.name} in the last ${series.since}\n`
  const at = (iso: string): string => iso.replace('T', ' ').replace(/:00\.000Z$/, 'Z')
  return formatTable([[series.resolution === 'minute' ? 'MINUTE' : 'HOUR', ...COUNT_HEADER], ...busy.map((point) => [at(point.at), ...counts(point)])]) +
    `${busy.length} of ${series.points.length} ${series.resolution} buckets had requests\n`
}

export async function runUsageCommand (command: string | undefined, args: string[],
  io: { stdout: NodeJS.WritableStream; source: () => Promise<UsageSource> }): Promise<void> {
  if (command !== 'top' && command !== 'series') throw new UsageCommandError('usage top or usage series')
  const parsed = parseUsageArgs(command, args)
  const source = await io.source()
  try {
    if ('top' in parsed) {
      const top = await source.top(parsed.top)
      io.stdout.write(parsed.json ? `${JSON.stringify(top, null, 2)}\n` : formatTop(top))
    } else {
      const series = await source.series(parsed.series)
      io.stdout.write(parsed.json ? `${JSON.stringify(series, null, 2)}\n` : formatSeries(series))
    }
  } finally {
    await source.close()
  }
}
