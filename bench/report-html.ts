// The report as an HTML page: the figures, the table, and inline SVG charts (the latency
// distribution, requests per second over time), with the raw JSON under them.
import { PERCENTILES } from './measure.js'
import type { BenchReport, ConfigResult } from './report.js'
import { fmt, headlineLines, TABLE_COLUMNS, tableRows } from './report-text.js'

// ---- HTML with inline SVG ----

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd']

const escapeHtml = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

interface Series { name: string; color: string; points: Array<[number, number]> }

/** A line chart: x is an index (labelled by xLabels), y linear from 0. */
function lineChart (title: string, yLabel: string, xLabels: string[], series: Series[], { width = 900, height = 340 } = {}): string {
  const m = { left: 64, right: 250, top: 30, bottom: 44 }
  const w = width - m.left - m.right
  const h = height - m.top - m.bottom
  const xMax = Math.max(1, xLabels.length - 1)
  const yMaxRaw = Math.max(1e-9, ...series.flatMap((s) => s.points.map(([, y]) => y)))
  const step = niceStep(yMaxRaw / 5)
  const yMax = Math.ceil(yMaxRaw / step) * step
  const x = (i: number): number => m.left + (i / xMax) * w
  const y = (v: number): number => m.top + h - (v / yMax) * h
  const out: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`]
  out.push(`<text x="${m.left}" y="18" font-size="13" font-weight="bold">${escapeHtml(title)}</text>`)
  for (let v = 0; v <= yMax + step / 2; v += step) {
    out.push(`<line x1="${m.left}" x2="${m.left + w}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#ddd"/>`)
    out.push(`<text x="${m.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${escapeHtml(fmt(v, step < 1 ? 2 : 0))}</text>`)
  }
  const every = Math.max(1, Math.ceil(xLabels.length / 16))
  xLabels.forEach((label, i) => {
    if (i % every !== 0 && i !== xLabels.length - 1) return
    out.push(`<text x="${x(i).toFixed(1)}" y="${m.top + h + 16}" text-anchor="middle">${escapeHtml(label)}</text>`)
  })
  out.push(`<text x="14" y="${m.top + h / 2}" transform="rotate(-90 14 ${m.top + h / 2})" text-anchor="middle">${escapeHtml(yLabel)}</text>`)
  out.push(`<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${m.top + h}" stroke="#333"/>` +
    `<line x1="${m.left}" x2="${m.left + w}" y1="${m.top + h}" y2="${m.top + h}" stroke="#333"/>`)
  series.forEach((s, n) => {
    const path = s.points.map(([px, py], i) => `${i === 0 ? 'M' : 'L'}${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(' ')
    out.push(`<path d="${path}" fill="none" stroke="${s.color}" stroke-width="2"/>`)
    for (const [px, py] of s.points) out.push(`<circle cx="${x(px).toFixed(1)}" cy="${y(py).toFixed(1)}" r="2.5" fill="${s.color}"/>`)
    out.push(`<rect x="${m.left + w + 14}" y="${m.top + n * 18}" width="12" height="3" fill="${s.color}"/>` +
      `<text x="${m.left + w + 32}" y="${m.top + n * 18 + 5}">${escapeHtml(s.name)}</text>`)
  })
  out.push('</svg>')
  return out.join('\n')
}

function niceStep (raw: number): number {
  const power = 10 ** Math.floor(Math.log10(raw))
  const unit = raw / power
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10) * power
}

export function latencyChart (configs: ConfigResult[]): string {
  const labels = PERCENTILES.map((p) => p === 0 ? 'min' : p === 100 ? 'max' : `p${p}`)
  // the max can dwarf the rest: chart up to p99.9 and list the max in the table
  const shown = labels.length - 1
  return lineChart('Latency distribution (median over rounds)', 'ms', labels.slice(0, shown), configs.map((c, n) => ({
    name: `${c.id} ${c.label}`,
    color: COLORS[n % COLORS.length] as string,
    points: PERCENTILES.slice(0, shown).map((p, i) => [i, c.median.latency[`p${p}`] ?? 0])
  })))
}

export function throughputChart (configs: ConfigResult[]): string {
  const length = Math.max(0, ...configs.map((c) => c.rounds.reduce((sum, r) => sum + r.perSecond.length, 0)))
  const labels = Array.from({ length }, (_, i) => String(i + 1))
  return lineChart('Requests per second, each measured second (rounds one after another)', 'req/s', labels, configs.map((c, n) => ({
    name: `${c.id} ${c.label}`,
    color: COLORS[n % COLORS.length] as string,
    points: c.rounds.flatMap((r) => r.perSecond).map((v, i) => [i, v])
  })))
}

/** The paragraph under the HTML table: what its columns measure. */
const TABLE_NOTE = 'req/s, latency, non-2xx and CPU are medians over rounds. ' +
  '"CPU us/req" is the CPU time (user + system, all threads) of the process the load goes to, per completed request: ' +
  'the proxy for b, c, d; the service itself for a; nginx for g; keygate, whose decision listener nginx asks, for h. ' +
  '"upstream us/req" is the example service\'s, "Redis us/req" the Redis server\'s (INFO cpu). ' +
  '"loadgen CPU" is the load generator\'s own CPU, in % of one core; ' +
  '"other CPU" what the rest of the machine used meanwhile (other programs; with --url, the target itself; ' +
  'not the flooding process of --scenario flood), in % of one core: when it is high, the figures are noisy.'

export function renderHtml (report: BenchReport, header: string): string {
  const rows = tableRows(report.configs)
  const headline = headlineLines(report)
  const table = `<table><thead><tr>${TABLE_COLUMNS.map((c) => `<th>${escapeHtml(c)}</th>`).join('')}</tr></thead><tbody>${
    rows.map((r) => `<tr>${r.map((cell, i) => `<td${i === 0 ? ' class="name"' : ''}>${escapeHtml(cell)}</td>`).join('')}</tr>`).join('')}</tbody></table>`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>keygate bench ${escapeHtml(report.startedAt)}</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222 }
table { border-collapse: collapse; margin: 1em 0 }
th, td { padding: 4px 10px; text-align: right; border-bottom: 1px solid #ddd; font-variant-numeric: tabular-nums }
td.name, th:first-child { text-align: left }
pre { background: #f6f6f6; padding: 8px }
ul.figures { font-size: 1.1em }
</style></head><body>
<h1>keygate bench</h1>
<p>${escapeHtml(header)}</p>
<ul class="figures">${headline.figures.map((line) => `<li>${escapeHtml(line)}</li>`).join('')}</ul>
${headline.how.map((line) => `<p>${escapeHtml(line)}</p>`).join('\n')}
${table}
<p>${TABLE_NOTE}</p>
${report.warnings.length === 0 ? '' : `<h2>Warnings</h2><ul>${report.warnings.map((w) => `<li>${escapeHtml(w)}</li>`).join('')}</ul>`}
${latencyChart(report.configs)}
${throughputChart(report.configs)}
<h2>Raw results</h2>
<pre>${escapeHtml(JSON.stringify(report, null, 2))}</pre>
</body></html>
`
}
