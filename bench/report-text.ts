// The report as the terminal shows it: the run in one line, the first lines (the figures, the
// machine, how each figure is computed), the table of the configurations' medians, then the
// refusals by code, good traffic under a flood, latency over (b) at a fixed rate, and warnings.
import type { BenchOptions } from './args.js'
import { FLOOD_ADDRESS } from './flood.js'
import { floodId, type BenchReport, type ConfigResult, type DecisionFigures, type Figure, type Machine, type MedianResult, type NoFigure } from './report.js'

/** a number as the report prints it: grouped thousands, `digits` decimals; '-' for none */
export const fmt = (value: number | null, digits = 0): string =>
  value === null ? '-' : value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })

// ---- the first lines: the two figures, the machine, how the figures are computed ----

function figureLine (name: string, f: Figure | NoFigure, unit: string, digits = 0): string {
  if (f.value === null) return `${name}: not measured: ${f.why}`
  const rounds = f.perRound.length === 1 ? '1 round' : `${f.perRound.length} rounds: ${fmt(f.min, digits)} to ${fmt(f.max, digits)}`
  return `${name}: ${fmt(f.value, digits)}${unit === 'x' ? '' : ' '}${unit} (${rounds})`
}

function decisionLines (f: DecisionFigures): { figures: string[]; how: string[] } {
  const run = `${f.scheme} scheme, ${f.keyType} key`
  const rate = (value: number | null): string => value === null ? 'not run' : `${fmt(value)} req/s`
  const us = (value: number | null): string => value === null ? '-' : `${fmt(value)} us`
  const figures = [f.decisionToNginx, f.inlineToNginx, f.keygateCpuUs.decision, f.keygateCpuUs.inline, f.decisionToInlineCpu]
  return {
    figures: [
      `decision mode behind nginx, ${run}: g nginx alone ${rate(f.rps.nginx)}, h nginx asking keygate ${rate(f.rps.decision)}, ` +
        `d keygate inline ${rate(f.rps.inline)} (medians)`,
      figureLine('throughput h / g, nginx asking keygate over nginx alone', f.decisionToNginx, 'x', 2),
      figureLine('throughput d / g, keygate inline over nginx alone', f.inlineToNginx, 'x', 2),
      figureLine(`keygate deciding (h), ${run}`, f.keygateCpuUs.decision, 'us of keygate CPU per signed GET'),
      figureLine(`keygate inline (d), ${run}`, f.keygateCpuUs.inline, 'us of keygate CPU per signed GET'),
      figureLine('keygate CPU h / d, deciding over inline', f.decisionToInlineCpu, 'x', 2),
      `nginx CPU per request: ${us(f.nginxCpuUs.alone)} alone (g), ${us(f.nginxCpuUs.decision)} asking keygate (h)`,
      f.decisions === null
        ? 'decisions: h did not run'
        : `decisions: ${fmt(f.decisions.allowed)} allowed (2xx), ${fmt(f.decisions.notAllowed)} not (medians per round)`
    ],
    how: figures.flatMap((figure) => figure.value === null ? [] : [`how: ${figure.how}`])
  }
}

/** the machine, without how busy it was */
export function machineName (m: Pick<Machine, 'cpus' | 'cpuModel' | 'node' | 'platform'>): string {
  return `${m.cpus} cores (${m.cpuModel === '' ? 'unknown CPU' : m.cpuModel}), Node ${m.node}, ${m.platform}`
}

/**
 * The first lines of each report: the two figures (--scenario decision: its own instead) and the
 * machine they were measured on, then how each is computed.
 */
export function headlineLines (report: Pick<BenchReport, 'figures' | 'machine' | 'decision'>): { figures: string[]; how: string[] } {
  const { figures: f, machine: m } = report
  const run = `${f.scheme} scheme, ${f.keyType} key`
  const load = (at: number[]): string => (at[0] ?? 0).toFixed(2)
  const other = m.otherCpuPercent === null
    ? 'what other work used is unknown here (no /proc/stat)'
    : `other work used ${fmt(m.otherCpuPercent.median)}% of a core during the measurements (median; at most ${fmt(m.otherCpuPercent.max)}%)`
  const machine = `machine: ${machineName(m)}; load average ${load(m.loadAverage.start)} at the start, ` +
    `${load(m.loadAverage.end)} at the end (1 minute); ${other}`
  if (report.decision !== undefined) {
    const decision = decisionLines(report.decision)
    return { figures: [...decision.figures, machine], how: decision.how }
  }
  const idp = f.idpToken
  const agent = f.agentSignature
  const mcp = f.mcpCall
  const dpop = Object.entries(f.dpopProof ?? {})
  return {
    figures: [
      figureLine(`auth layer, ${run}`, f.authLayerCpuUs, 'us of gateway CPU per signed request'),
      figureLine(`per gateway core, ${run}`, f.signedRequestsPerSecondPerCore, 'signed requests/s'),
      ...(idp === undefined
        ? []
        : [
            figureLine('an IdP\'s token (i) over keygate\'s own (c)', idp.extraCpuUs, 'us of gateway CPU per signed request', 1),
            `verifying an IdP token not seen before (RS256): ${fmt(idp.uncachedVerificationUs, 1)} us of CPU, once per token: ` +
              'keygate then holds it verified until it expires, while its key is still published'
          ]),
      ...(agent === undefined
        ? []
        : [
            figureLine('a signed agent (j) over a registered key (c), RFC 9421 Ed25519 GETs', agent.extraCpuUs, 'us of gateway CPU per signed GET', 1),
            figureLine('a signed agent (j) over a registered key (c), Redis', agent.extraRedisCpuUs, 'us of Redis CPU per signed GET (its nonce remembered)', 1)
          ]),
      ...(mcp === undefined ? [] : [figureLine('an MCP route (k) over a public route (e), tools/call', mcp.extraCpuUs, 'us of gateway CPU per call', 1)]),
      ...dpop.flatMap(([alg, figure]) => [
        figureLine(`a DPoP proof costs, ${alg} (${alg === 'ES256' ? 'm' : 'n'} over l)`, figure.extraCpuUs, 'us of gateway CPU per request', 1),
        figureLine(`a DPoP proof costs, ${alg}, Redis`, figure.extraRedisCpuUs, 'us of Redis CPU per request (its jti remembered)', 1)
      ]),
      machine
    ],
    how: [
      ...(f.authLayerCpuUs.value === null ? [] : [`how: auth layer = ${f.authLayerCpuUs.how}`]),
      ...(f.signedRequestsPerSecondPerCore.value === null ? [] : [`how: per gateway core = ${f.signedRequestsPerSecondPerCore.how}`]),
      ...(idp === undefined || idp.extraCpuUs.value === null ? [] : [`how: IdP token = ${idp.extraCpuUs.how}`]),
      ...(agent === undefined || agent.extraCpuUs.value === null ? [] : [`how: signed agent = ${agent.extraCpuUs.how}`]),
      ...(mcp === undefined || mcp.extraCpuUs.value === null ? [] : [`how: MCP route = ${mcp.extraCpuUs.how}`]),
      ...dpop.flatMap(([alg, figure]) => figure.extraCpuUs.value === null ? [] : [`how: DPoP proof, ${alg} = ${figure.extraCpuUs.how}`])
    ]
  }
}

// ---- terminal table ----

function statusSummary (m: MedianResult): string {
  const parts = Object.entries(m.statuses).filter(([status]) => !status.startsWith('2')).map(([status, n]) => `${status}:${fmt(n)}`)
  if (m.socketErrors > 0) parts.push(`socket:${fmt(m.socketErrors)}`)
  if (m.timeouts > 0) parts.push(`timeout:${fmt(m.timeouts)}`)
  return parts.length === 0 ? '0' : parts.join(' ')
}

export const TABLE_COLUMNS = [
  'config', 'req/s', 'x (b)', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'non-2xx', 'CPU us/req', 'upstream us/req', 'Redis us/req', 'loadgen CPU', 'other CPU'
] as const

export function tableRows (configs: ConfigResult[]): string[][] {
  return configs.map(({ id, label, median: m }) => [
    `${id}  ${label}`,
    fmt(m.rps),
    m.ratioToBare === null ? '-' : m.ratioToBare.toFixed(2),
    fmt(m.latency.p50 ?? 0, 2),
    fmt(m.latency.p90 ?? 0, 2),
    fmt(m.latency.p99 ?? 0, 2),
    fmt(m.latency.p100 ?? 0, 2),
    statusSummary(m),
    fmt(m.cpuPerRequestUs),
    fmt(m.upstreamCpuPerRequestUs),
    fmt(m.redisCpuPerRequestUs),
    `${fmt(m.generatorCpuPercent)}%`,
    m.otherCpuPercent === null ? '-' : `${fmt(m.otherCpuPercent)}%`
  ])
}

export function renderTable (header: readonly string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: readonly string[]): string =>
    cells.map((cell, i) => i === 0 ? cell.padEnd(widths[i] as number) : cell.padStart(widths[i] as number)).join('  ').trimEnd()
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

// ---- below the table ----

/** --scenario flood: good traffic under the flood against alone, and what the flood got. */
function goodUnderFlood (results: ConfigResult[]): string[] {
  const lines = results.flatMap((under) => {
    if (under.flood === undefined) return []
    const alone = results.find((c) => floodId(c.id) === under.id)
    if (alone === undefined) return []
    const ratio = alone.median.rps === 0 ? 0 : under.median.rps / alone.median.rps
    const perRound = under.rounds.map((r) => {
      const same = alone.rounds.find((a) => a.round === r.round)
      return same === undefined || same.rps === 0 ? '-' : `${Math.round((r.rps / same.rps) * 100)}%`
    })
    const f = under.flood
    const answers = Object.entries(f.codes).map(([code, n]) => `${code} ${Math.round(n).toLocaleString('en-US')}`).join(', ')
    return [
      `${alone.id}: good traffic under the flood: ${Math.round(under.median.rps).toLocaleString('en-US')} req/s against ` +
        `${Math.round(alone.median.rps).toLocaleString('en-US')} alone: ${Math.round(ratio * 100)}% (per round: ${perRound.join(', ')})`,
      `${alone.id}: the flood from ${FLOOD_ADDRESS}: ${Math.round(f.rps).toLocaleString('en-US')} answers/s; in ${Math.round(f.seconds)} s: ` +
        `${answers === '' ? 'none refused' : answers}${f.errors > 0 ? `, ${f.errors} connection errors` : ''}; flooding process CPU ${f.cpuPercent}%`
    ]
  })
  return lines.length === 0
    ? []
    : ['good traffic under a flood of bad signatures (medians; under the flood, CPU us/req is the gateway\'s CPU per good request, the flood\'s included):',
        ...lines, '']
}

/** The non-2xx answers of each configuration by status and problem+json code (medians per round). */
function refusalsByCode (results: ConfigResult[]): string[] {
  const lines = results.filter((c) => Object.keys(c.median.codes).length > 0).map((c) =>
    `${c.id}: ${Object.entries(c.median.codes).map(([key, n]) => `${key} ${Math.round(n).toLocaleString('en-US')}`).join(', ')}`)
  return lines.length === 0 ? [] : ['refusals by code (median per round):', ...lines, '']
}

/** At a fixed rate every configuration serves the same load: what matters is how much later each answers than (b). */
function latencyAgainstBare (results: ConfigResult[], rate: number | undefined): string[] {
  const bare = results.find((c) => c.id === 'b')
  if (rate === undefined || bare === undefined) return []
  const others = results.filter((c) => c.id !== 'b')
  if (others.length === 0) return []
  const diff = (ms: number): string => `${ms >= 0 ? '+' : ''}${ms.toFixed(2)} ms`
  return [
    `at ${rate.toLocaleString('en-US')} req/s, latency over (b): ` +
      others.map((c) => `${c.id} p50 ${diff((c.median.latency.p50 ?? 0) - (bare.median.latency.p50 ?? 0))}, ` +
        `p99 ${diff((c.median.latency.p99 ?? 0) - (bare.median.latency.p99 ?? 0))}`).join('; '),
    ''
  ]
}

// ---- the whole ----

/** The run in one line: its scenario, scheme, key, load, measurement and rounds. */
export function describe (options: BenchOptions, rate: number | undefined = typeof options.rate === 'number' ? options.rate : undefined): string {
  const load = rate !== undefined
    ? `${rate.toLocaleString('en-US')} req/s fixed${options.rate === 'half' ? ' (half of b\'s peak)' : ''} on ${options.connections} connections`
    : options.rate === 'half' ? `half of b's peak on ${options.connections} connections` : `${options.connections} connections`
  const refused = options.scenario === 'reject'
    ? ` (${Math.round(options.rejectShare * 100)}% refused${options.rejectKind === 'all' ? '' : `: ${options.rejectKind}`})`
    : ''
  return `scenario ${options.scenario}${refused}, ${options.scheme} scheme, ${options.keyType} key, ` +
    `${load}, ${options.duration} s measured after ${options.warmup} s warm-up, ` +
    `${options.rounds} alternating round${options.rounds === 1 ? '' : 's'} (medians)` +
    `${options.workers > 1 && options.target === undefined ? `; keygate on Redis with ${options.workers} worker processes` : ''}` +
    `${options.trace === 'off' ? '' : `; traces of ${options.trace === 'all' ? 'every request' : `${options.trace * 100}% of requests`} exported over OTLP`}`
}

/** The report as `npm run bench` prints it without --json; `title`: "keygate bench: " and the run in one line. */
export function renderText (report: BenchReport, title: string, rate: number | undefined): string {
  const headline = headlineLines(report)
  const configResults = report.configs
  return [
    '',
    title,
    ...headline.figures,
    ...headline.how,
    '',
    renderTable(TABLE_COLUMNS, tableRows(configResults)),
    '',
    ...refusalsByCode(configResults),
    ...goodUnderFlood(configResults),
    ...latencyAgainstBare(configResults, rate),
    'CPU us/req: CPU time (user + system) of the process the load goes to (the proxy; for a, the service itself; for g, nginx;',
    'for h, keygate, which nginx asks: nginx\'s own is in the lines on top) per request;',
    'upstream us/req: the example service\'s; Redis us/req: the Redis server\'s (INFO cpu). x (b): req/s over the bare proxy\'s.',
    'loadgen CPU: this process, % of one core. other CPU: the rest of the machine meanwhile, % of one core: when high, the figures are noisy.',
    ...report.warnings.map((w) => `warning: ${w}`),
    '',
    `JSON: ${report.files.json}`,
    `HTML: ${report.files.html}`,
    `took ${report.wallSeconds} s`,
    ''
  ].join('\n')
}
