// A key's own calls over time (GET /v1/api-keys/{apiKey}/usage/series), as tables: its totals over
// the last hour and the last day, then the minutes of the hour and the hours of the day that had
// calls. What keygate counts is flushed to its store every KEYGATE_USAGE_FLUSH_MS (5 s by
// default), so the last few seconds may be missing.
import { h, when } from './dom.js'
import type { UsagePoint, UsageSeries } from './keygate-api.js'

const CLASSES = ['2xx', '3xx', '4xx', '5xx'] as const

type Totals = Omit<UsagePoint, 'at'>

function total (points: UsagePoint[]): Totals {
  const sum: Totals = { requests: 0, refusals: 0, statuses: {}, codes: {} }
  for (const point of points) {
    sum.requests += point.requests
    sum.refusals += point.refusals
    for (const [name, count] of Object.entries(point.statuses)) sum.statuses[name] = (sum.statuses[name] ?? 0) + count
    for (const [code, count] of Object.entries(point.codes)) sum.codes[code] = (sum.codes[code] ?? 0) + count
  }
  return sum
}

/** "INVALID_SIGNATURE 2, RATE_LIMITED 1", most first; "none" */
function codesText (codes: Record<string, number>): string {
  const listed = Object.entries(codes).filter(([, count]) => count > 0).sort(([a, x], [b, y]) => y - x || a.localeCompare(b))
  return listed.length === 0 ? 'none' : listed.map(([code, count]) => `${code} ${count}`).join(', ')
}

const HEADERS = ['Requests', ...CLASSES, 'Refused by keygate', 'Refusals by code']

function cells (totals: Totals): HTMLElement[] {
  return [
    h('td', { class: 'number' }, String(totals.requests)),
    ...CLASSES.map((name) => h('td', { class: 'number' }, String(totals.statuses[name] ?? 0))),
    h('td', { class: 'number' }, String(totals.refusals)),
    h('td', {}, codesText(totals.codes))
  ]
}

function table (caption: string, first: string, rows: Array<[Node | string, Totals]>): HTMLElement {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'calls' },
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, first), HEADERS.map((title) => h('th', { scope: 'col' }, title)))),
    h('tbody', {}, rows.map(([label, totals]) => h('tr', {}, h('th', { scope: 'row' }, label), cells(totals))))))
}

/** the buckets with calls, newest first */
function busy (series: UsageSeries): Array<[Node | string, Totals]> {
  return series.points.filter((point) => point.requests > 0).reverse().map((point) => [when(point.at, point.at), point])
}

/** On MCP routes: the last day's calls by tool (tools/call) and by method otherwise; undefined when the key made none. */
function toolsTable (day: UsageSeries): HTMLElement | undefined {
  if (day.mcpCalls.length === 0) return undefined
  return h('div', { class: 'table-wrap' }, h('table', { class: 'calls tools' },
    h('caption', {}, 'The last day on MCP routes, by tool ("other": a tool the route does not name) and method'),
    h('thead', {}, h('tr', {}, ['Tool', 'Method', 'Route', 'Requests', 'Refused by keygate'].map((title) => h('th', { scope: 'col' }, title)))),
    h('tbody', {}, day.mcpCalls.map((call) => h('tr', {},
      h('th', { scope: 'row' }, call.tool ?? '—'),
      h('td', {}, call.method),
      h('td', {}, call.route),
      h('td', { class: 'number' }, String(call.requests)),
      h('td', { class: 'number' }, String(call.refusals)))))))
}

export function callsTables (name: string, hour: UsageSeries, day: UsageSeries): HTMLElement {
  const lastDay = total(day.points)
  if (lastDay.requests === 0 && total(hour.points).requests === 0) {
    return h('p', {}, `No request signed with "${name}" in the last day.`)
  }
  return h('div', {},
    table(`Requests signed with "${name}"`, 'Over', [['the last hour', total(hour.points)], ['the last day', lastDay]]),
    toolsTable(day),
    table('The last hour, minute by minute (UTC; minutes without a request left out)', 'Minute', busy(hour)),
    table('The last day, hour by hour (UTC; hours without a request left out)', 'Hour', busy(day)))
}
