// Where a key or the user stands against rate limits and quotas (GET /v1/api-keys/{apiKey}/usage,
// GET /v1/usage), as a table.
import { h } from './dom.js'
import type { LimitUsage } from './keygate-api.js'

function duration (seconds: number): string {
  if (seconds <= 0) return 'now'
  if (seconds < 120) return `in ${seconds} s`
  if (seconds < 7200) return `in ${Math.round(seconds / 60)} min`
  if (seconds < 172_800) return `in ${Math.round(seconds / 3600)} h`
  return `in ${Math.round(seconds / 86_400)} days`
}

export function usageTable (caption: string, items: LimitUsage[], none: string): HTMLElement {
  if (items.length === 0) return h('p', {}, none)
  return h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Limit'),
      h('th', { scope: 'col' }, 'Routes'),
      h('th', { scope: 'col' }, 'Allowed'),
      h('th', { scope: 'col' }, 'Used'),
      h('th', { scope: 'col' }, 'Remaining'),
      h('th', { scope: 'col' }, 'Full again'))),
    h('tbody', {}, items.map((item) => h('tr', {},
      h('th', { scope: 'row' }, item.bucket === null ? item.policy : `${item.policy} (shared: ${item.bucket})`),
      h('td', {}, item.tools === undefined ? item.routes.join(', ') : `${item.routes.join(', ')} (tools ${item.tools.join(', ')})`),
      h('td', {}, `${item.limit} per ${item.window} per ${item.by}`),
      h('td', { class: 'number' }, String(item.used)),
      h('td', { class: 'number' }, String(item.remaining)),
      h('td', {}, duration(item.resetSeconds)))))))
}
