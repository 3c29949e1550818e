// Medians over rounds, the two figures the bench answers (what the auth layer costs, what a core
// serves), and the three ways they are shown: a terminal table, JSON, and an HTML page with
// inline SVG charts (latency distribution, requests per second over time).
import type { FloodResult } from './flood.js'
import { PERCENTILES, type LatencyPercentiles, type Measurement } from './measure.js'

export interface ConfigResult {
  id: string
  label: string
  /** what the load went to */
  url: string
  /** the process whose CPU "cpuPerRequestUs" counts */
  cpuOf: string | null
  rounds: Array<Measurement & { round: number; position: number; inlineSignedPosts: number; flood?: FloodResult }>
  median: MedianResult
  /** --scenario flood: what the flood saw meanwhile, medians over the rounds */
  flood?: FloodResult
}

export interface MedianResult {
  rps: number
  /** rps over (b)'s rps, when (b) ran */
  ratioToBare: number | null
  latency: LatencyPercentiles
  /** the median count per status over the rounds */
  statuses: Record<string, number>
  /** the median count per refusal ("401 INVALID_SIGNATURE") over the rounds */
  codes: Record<string, number>
  /** median count of non-2xx responses */
  non2xx: number
  socketErrors: number
  timeouts: number
  cpuPerRequestUs: number | null
  upstreamCpuPerRequestUs: number | null
  redisCpuPerRequestUs: number | null
  nginxCpuPerRequestUs: number | null
  generatorCpuPercent: number
  otherCpuPercent: number | null
}

/** The machine the run was on, and how busy it was meanwhile. */
export interface Machine {
  cpus: number
  cpuModel: string
  node: string
  platform: string
  /** os.loadavg() (1, 5 and 15 minutes) when the run started and when its measurements ended */
  loadAverage: { start: number[]; end: number[] }
  /** what the rest of the machine used during the measurements, % of one core: their median and highest; null where unknown */
  otherCpuPercent: { median: number; max: number } | null
}

/** One of the two figures, from the medians in the table; its range is the same figure of each round. */
export interface Figure {
  value: number
  min: number
  max: number
  perRound: number[]
  /** how it is computed, from which configurations */
  how: string
}

/** A figure this run could not give, and why. */
export interface NoFigure { value: null; why: string }

/** What the bench answers, for the scheme and key type of the run. */
export interface Figures {
  scheme: string
  keyType: string
  /** µs of gateway CPU the auth layer adds to a signed request */
  authLayerCpuUs: Figure | NoFigure
  /** signed requests one gateway core serves per second */
  signedRequestsPerSecondPerCore: Figure | NoFigure
  /** only when (i) ran: what an identity provider's token costs against keygate's own */
  idpToken?: IdpTokenFigures
  /** only when (j) ran: what a signed agent's GET costs against the same GET signed by a registered key */
  agentSignature?: AgentSignatureFigures
}

/**
 * (j) against (c): GETs signed RFC 9421 with an Ed25519 key, by a Web Bot Auth agent whose directory
 * is pinned (j: no bearer token; its nonce remembered in Redis, one request per signature) or by a
 * key registered to a user (c: with the user's bearer token; a GET's signature may be sent again).
 */
export interface AgentSignatureFigures {
  /** µs of gateway CPU per signed GET: j's CPU us/req - c's (each round's difference for the range) */
  extraCpuUs: Figure | NoFigure
  /** µs of Redis CPU per signed GET: j's Redis us/req - c's (remembering each agent signature's nonce) */
  extraRedisCpuUs: Figure | NoFigure
}

/** (i) against (c): the same signed GETs, the bearer token an IdP's (RS256 JWT, its JWKS cached) or keygate's own. */
export interface IdpTokenFigures {
  /** µs of gateway CPU per signed request: i's CPU us/req - c's (each round's difference for the range) */
  extraCpuUs: Figure | NoFigure
  /** µs of CPU for verifying an IdP token keygate has not seen yet (keygate's verifier, measured in the bench's process): paid once per token */
  uncachedVerificationUs: number
}

/**
 * --scenario decision: the same signed GETs through nginx alone (g), through nginx asking keygate's
 * decision listener (h), and to keygate inline (d), all on one example service.
 */
export interface DecisionFigures {
  scheme: string
  keyType: string
  /** requests/s, the medians */
  rps: { nginx: number | null; decision: number | null; inline: number | null }
  /** h's requests/s over g's; d's over g's */
  decisionToNginx: Figure | NoFigure
  inlineToNginx: Figure | NoFigure
  /** keygate's CPU µs per signed GET: deciding (h's decision listener), inline (d: checking and proxying) */
  keygateCpuUs: { decision: Figure | NoFigure; inline: Figure | NoFigure }
  /** h's keygate CPU per request over d's: below 1, a decision costs keygate less than an inline request */
  decisionToInlineCpu: Figure | NoFigure
  /** nginx's CPU µs per request, the medians: alone (g), asking keygate (h) */
  nginxCpuUs: { alone: number | null; decision: number | null }
  /** h's answers, medians per round: allowed (2xx) and not (every one should be allowed) */
  decisions: { allowed: number; notAllowed: number } | null
}

export interface BenchReport {
  tool: 'keygate-bench'
  version: 1
  figures: Figures
  machine: Machine
  /** --scenario decision only */
  decision?: DecisionFigures
  startedAt: string
  finishedAt: string
  wallSeconds: number
  options: Record<string, unknown>
  /** the processes the run started (all stopped when it ends) */
  services: Array<{ name: string; pid: number; url: string }>
  configs: ConfigResult[]
  warnings: string[]
  files: { json: string; html: string }
}

export function median (values: number[]): number {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

const medianOrNull = (values: Array<number | null>): number | null =>
  values.some((v) => v === null) ? null : median(values as number[])

const non2xxOf = (statuses: Record<string, number>): number =>
  Object.entries(statuses).filter(([status]) => !status.startsWith('2')).reduce((sum, [, n]) => sum + n, 0)

export function medianOf (rounds: Measurement[]): Omit<MedianResult, 'ratioToBare'> {
  const latency: LatencyPercentiles = {}
  for (const p of PERCENTILES) latency[`p${p}`] = median(rounds.map((r) => r.latency[`p${p}`] ?? 0))
  const codes = new Set(rounds.flatMap((r) => Object.keys(r.statuses)))
  const statuses: Record<string, number> = {}
  for (const code of [...codes].sort()) statuses[code] = median(rounds.map((r) => r.statuses[code] ?? 0))
  const refusals: Record<string, number> = {}
  for (const key of [...new Set(rounds.flatMap((r) => Object.keys(r.codes)))].sort()) refusals[key] = median(rounds.map((r) => r.codes[key] ?? 0))
  return {
    rps: median(rounds.map((r) => r.rps)),
    latency,
    statuses,
    codes: refusals,
    non2xx: median(rounds.map((r) => non2xxOf(r.statuses))),
    socketErrors: median(rounds.map((r) => r.socketErrors)),
    timeouts: median(rounds.map((r) => r.timeouts)),
    cpuPerRequestUs: medianOrNull(rounds.map((r) => r.cpuPerRequestUs)),
    upstreamCpuPerRequestUs: medianOrNull(rounds.map((r) => r.upstreamCpuPerRequestUs)),
    redisCpuPerRequestUs: medianOrNull(rounds.map((r) => r.redisCpuPerRequestUs)),
    nginxCpuPerRequestUs: medianOrNull(rounds.map((r) => r.nginxCpuPerRequestUs)),
    generatorCpuPercent: median(rounds.map((r) => r.generatorCpuPercent)),
    otherCpuPercent: medianOrNull(rounds.map((r) => r.otherCpuPercent))
  }
}

/** Medians of the flood's figures over rounds. */
export function medianFlood (floods: FloodResult[]): FloodResult {
  const byKey = (pick: (f: FloodResult) => Record<string, number>): Record<string, number> => {
    const out: Record<string, number> = {}
    for (const key of [...new Set(floods.flatMap((f) => Object.keys(pick(f))))].sort()) out[key] = median(floods.map((f) => pick(f)[key] ?? 0))
    return out
  }
  return {
    requests: median(floods.map((f) => f.requests)),
    seconds: median(floods.map((f) => f.seconds)),
    rps: median(floods.map((f) => f.rps)),
    statuses: byKey((f) => f.statuses),
    codes: byKey((f) => f.codes),
    errors: median(floods.map((f) => f.errors)),
    cpuPercent: median(floods.map((f) => f.cpuPercent))
  }
}

// ---- the two figures: what the auth layer costs, what a core serves ----

/**
 * The scenarios in which the keygate configurations get signed requests that they accept, and (e)
 * the same requests on a public route (flood: its measurements without the flood).
 */
const SIGNED_SCENARIOS: readonly string[] = ['get', 'post', 'mix', 'flood']
/** the configurations that check signatures, in the order the figures take one (f also counts a rate limit) */
const SIGNED_CONFIGS: readonly string[] = ['c', 'd']

const oneDecimal = (value: number): number => Math.round(value * 10) / 10

function figure (value: number, perRound: number[], how: string): Figure {
  return { value, min: Math.min(...perRound), max: Math.max(...perRound), perRound, how }
}

/** The two figures, from the medians and rounds of the signed configuration (c, else d) and of (e). */
export function figuresOf (configs: ConfigResult[], run: { scenario: string; scheme: string; keyType: string }, idpVerificationUs?: number): Figures {
  let figures = ownFiguresOf(configs, run)
  const idp = configs.find((c) => c.id === 'i')
  if (idp !== undefined && idpVerificationUs !== undefined) {
    figures = {
      ...figures,
      idpToken: {
        extraCpuUs: overC(configs, idp, 'cpuPerRequestUs', 'CPU', 'keygate\'s own token on the same requests',
          'keygate\'s CPU for a signed request whose bearer token is an IdP\'s (i) beyond the same request with keygate\'s own token (c)'),
        uncachedVerificationUs: idpVerificationUs
      }
    }
  }
  const agent = configs.find((c) => c.id === 'j')
  if (agent !== undefined) {
    const c = 'the same GETs signed by a registered key (RFC 9421, Ed25519)'
    figures = {
      ...figures,
      agentSignature: {
        extraCpuUs: overC(configs, agent, 'cpuPerRequestUs', 'CPU', c,
          'keygate\'s CPU for a GET signed by a Web Bot Auth agent whose directory is pinned (j) beyond the same GET signed by a key registered ' +
          'to a user, with the user\'s token (c): both RFC 9421, both Ed25519'),
        extraRedisCpuUs: overC(configs, agent, 'redisCpuPerRequestUs', 'Redis', c,
          'Redis\'s CPU for an agent\'s GET (j: its nonce remembered, one request per signature) beyond a registered key\'s GET (c)')
      }
    }
  }
  return figures
}

/** x's `measure` (us/req) - c's, the medians and each round's: what x costs beyond (c) on the same load */
function overC (configs: ConfigResult[], x: ConfigResult, measure: 'cpuPerRequestUs' | 'redisCpuPerRequestUs', what: string, cDoes: string,
  meaning: string): Figure | NoFigure {
  const own = configs.find((c) => c.id === 'c')
  if (own === undefined) return { value: null, why: `it needs c, ${cDoes}, measured beside ${x.id}: add c to --only` }
  const ownValue = own.median[measure]
  const xValue = x.median[measure]
  if (ownValue === null || xValue === null) return { value: null, why: `c or ${x.id} has no ${what} per request: a measurement completed no request` }
  const differences = x.rounds.flatMap((r) => {
    const same = own.rounds.find((o) => o.round === r.round)
    const mine = r[measure]
    const theirs = same?.[measure]
    return theirs == null || mine === null ? [] : [oneDecimal(mine - theirs)]
  })
  if (differences.length === 0) return { value: null, why: `no round measured both c and ${x.id}` }
  const column = measure === 'cpuPerRequestUs' ? 'CPU us/req' : 'Redis us/req'
  return figure(oneDecimal(xValue - ownValue), differences, `${x.id}'s ${column} - c's (the medians; the range: that difference in each round): ${meaning}`)
}

function ownFiguresOf (configs: ConfigResult[], run: { scenario: string; scheme: string; keyType: string }): Figures {
  const { scheme, keyType } = run
  const none = (why: string): Figures => ({ scheme, keyType, authLayerCpuUs: { value: null, why }, signedRequestsPerSecondPerCore: { value: null, why } })
  if (run.scenario === 'decision') {
    return none('--scenario decision gives its own figures instead (decision in the JSON): keygate deciding against keygate inline; ' +
      'these two come from get, post or mix')
  }
  if (!SIGNED_SCENARIOS.includes(run.scenario)) {
    return none(`--scenario ${run.scenario} sends other than signed requests that keygate accepts; the figures come from get, post or mix`)
  }
  if (configs.some((c) => c.cpuOf === null)) return none('with --url the target\'s CPU is not measured here; run without --url')
  const signed = SIGNED_CONFIGS.map((id) => configs.find((c) => c.id === id)).find((c) => c !== undefined)
  if (signed === undefined) return none('they need c or d, keygate checking the signatures: add one to --only')
  const cpu = signed.median.cpuPerRequestUs
  if (cpu === null || cpu <= 0) return none(`${signed.id} has no CPU per request: a measurement completed no request`)
  const cpuOfRound = new Map(signed.rounds.flatMap((r) => r.cpuPerRequestUs === null || r.cpuPerRequestUs <= 0 ? [] : [[r.round, r.cpuPerRequestUs]]))

  const perCore = figure(Math.round(1e6 / cpu), [...cpuOfRound.values()].map((us) => Math.round(1e6 / us)),
    `1,000,000 / ${signed.id}'s CPU us/req (the median; the range: the same in each round): ` +
    `the signed requests one core serves when ${signed.id}'s gateway (${signed.label}) has it to itself`)

  const publicRoute = configs.find((c) => c.id === 'e')
  const publicCpu = publicRoute?.median.cpuPerRequestUs ?? null
  const differences = (publicRoute?.rounds ?? []).flatMap((r) => {
    const own = cpuOfRound.get(r.round)
    return own === undefined || r.cpuPerRequestUs === null ? [] : [oneDecimal(own - r.cpuPerRequestUs)]
  })
  const authLayer: Figure | NoFigure = publicCpu === null || differences.length === 0
    ? { value: null, why: `it needs e, the same requests on a public route, measured beside ${signed.id}: add e to --only` }
    : figure(oneDecimal(cpu - publicCpu), differences, `${signed.id}'s CPU us/req - e's (the medians; the range: that difference in each round): ` +
      `keygate's CPU for a signed request (${signed.id}: ${signed.label}) beyond forwarding the same request on a public route (e: its proxy hop alone)`)
  return { scheme, keyType, authLayerCpuUs: authLayer, signedRequestsPerSecondPerCore: perCore }
}

// ---- --scenario decision: keygate deciding behind nginx against keygate inline ----

const twoDecimals = (value: number): number => Math.round(value * 100) / 100

/** x over y, the medians and each round's: null where either is missing or y is 0 */
type Measured = Pick<Measurement, 'rps' | 'cpuPerRequestUs'>

function ratioFigure (x: ConfigResult | undefined, y: ConfigResult | undefined, pick: (m: Measured) => number | null, how: string): Figure | NoFigure {
  const of = (c: ConfigResult | undefined): string => c === undefined ? 'a configuration that did not run' : c.id
  if (x === undefined || y === undefined) return { value: null, why: `it needs ${of(x)} and ${of(y)}: run both` }
  const [top, bottom] = [pick(x.median), pick(y.median)]
  if (top === null || bottom === null || bottom <= 0) return { value: null, why: `${y.id} or ${x.id} has no figure: a measurement completed no request` }
  const perRound = x.rounds.flatMap((r) => {
    const other = y.rounds.find((o) => o.round === r.round)
    const [a, b] = [pick(r), other === undefined ? null : pick(other)]
    return a === null || b === null || b <= 0 ? [] : [twoDecimals(a / b)]
  })
  return figure(twoDecimals(top / bottom), perRound, how)
}

function cpuFigure (c: ConfigResult | undefined, id: string, how: string): Figure | NoFigure {
  if (c === undefined) return { value: null, why: `it needs ${id}: run it` }
  const cpu = c.median.cpuPerRequestUs
  if (cpu === null || cpu <= 0) return { value: null, why: `${id} has no CPU per request: a measurement completed no request` }
  return figure(cpu, c.rounds.flatMap((r) => r.cpuPerRequestUs === null ? [] : [r.cpuPerRequestUs]), how)
}

/** --scenario decision's figures, from g (nginx alone), h (nginx asking keygate) and d (keygate inline). */
export function decisionFiguresOf (configs: ConfigResult[], run: { scheme: string; keyType: string }): DecisionFigures {
  const [g, h, d] = ['g', 'h', 'd'].map((id) => configs.find((c) => c.id === id))
  const rps = (m: Measured): number => m.rps
  return {
    scheme: run.scheme,
    keyType: run.keyType,
    rps: { nginx: g?.median.rps ?? null, decision: h?.median.rps ?? null, inline: d?.median.rps ?? null },
    decisionToNginx: ratioFigure(h, g, rps, 'h\'s req/s / g\'s (the medians; the range: the same in each round): ' +
      'what asking keygate before each request leaves of what nginx alone serves on this machine'),
    inlineToNginx: ratioFigure(d, g, rps, 'd\'s req/s / g\'s (the medians; the range: the same in each round): ' +
      'what keygate inline serves against nginx alone on this machine'),
    keygateCpuUs: {
      decision: cpuFigure(h, 'h', 'h\'s keygate CPU us/req: its decision listener judging nginx\'s auth_request for each signed GET (no body, no proxy hop)'),
      inline: cpuFigure(d, 'd', 'd\'s keygate CPU us/req: checking each signed GET and proxying it to the service')
    },
    decisionToInlineCpu: ratioFigure(h, d, (m) => m.cpuPerRequestUs, 'h\'s keygate CPU us/req / d\'s (the medians; the range: the same in each round): ' +
      'below 1, a decision costs keygate less CPU than an inline request'),
    nginxCpuUs: { alone: g?.median.cpuPerRequestUs ?? null, decision: h?.median.nginxCpuPerRequestUs ?? null },
    decisions: h === undefined ? null : { allowed: allowedOf(h), notAllowed: h.median.non2xx }
  }
}

const allowedOf = (c: ConfigResult): number => median(c.rounds.map((r) =>
  Object.entries(r.statuses).filter(([status]) => status.startsWith('2')).reduce((sum, [, n]) => sum + n, 0)))

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

// ---- the first lines: the two figures, the machine, how the figures are computed ----

function figureLine (name: string, f: Figure | NoFigure, unit: string, digits = 0): string {
  if (f.value === null) return `${name}: not measured: ${f.why}`
  const rounds = f.perRound.length === 1 ? '1 round' : `${f.perRound.length} rounds: ${fmt(f.min, digits)} to ${fmt(f.max, digits)}`
  return `${name}: ${fmt(f.value, digits)}${unit === 'x' ? '' : ' '}${unit} (${rounds})`
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
      machine
    ],
    how: [
      ...(f.authLayerCpuUs.value === null ? [] : [`how: auth layer = ${f.authLayerCpuUs.how}`]),
      ...(f.signedRequestsPerSecondPerCore.value === null ? [] : [`how: per gateway core = ${f.signedRequestsPerSecondPerCore.how}`]),
      ...(idp === undefined || idp.extraCpuUs.value === null ? [] : [`how: IdP token = ${idp.extraCpuUs.how}`]),
      ...(agent === undefined || agent.extraCpuUs.value === null ? [] : [`how: signed agent = ${agent.extraCpuUs.how}`])
    ]
  }
}

// ---- terminal table ----

const fmt = (value: number | null, digits = 0): string =>
  value === null ? '-' : value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })

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
