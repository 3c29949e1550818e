// What a run of the bench reports, as its JSON file holds it (the configurations' rounds and
// medians, the figures, the machine), and the medians over rounds. The figures are computed in
// figures.ts; the report is shown as terminal text (report-text.ts) and as an HTML page with
// charts (report-html.ts).
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
  /** only when (k) ran (--scenario mcp): what reading and judging a tools/call costs */
  mcpCall?: McpCallFigures
  /** only when (m) or (n) ran (--scenario dpop): what a DPoP proof costs per request, by its algorithm */
  dpopProof?: DpopProofFigures
}

/**
 * (m) and (n) against (l), --scenario dpop: the same GETs on a bearer route with keygate's own
 * token, bound to a key and sent with a new proof each (m: ES256, n: EdDSA) or as Bearer (l).
 */
export interface DpopProofFigures {
  ES256?: DpopProofFigure
  EdDSA?: DpopProofFigure
}

export interface DpopProofFigure {
  /** µs of gateway CPU per request: m's (or n's) CPU us/req - l's (each round's difference for the range) */
  extraCpuUs: Figure | NoFigure
  /** µs of Redis CPU per request: the same in Redis's (each proof's jti remembered) */
  extraRedisCpuUs: Figure | NoFigure
}

/** (k) against (e), --scenario mcp: the same tools/calls on a public MCP route (read once, judged by tool) and on a public route. */
export interface McpCallFigures {
  /** µs of gateway CPU per tools/call: k's CPU us/req - e's (each round's difference for the range) */
  extraCpuUs: Figure | NoFigure
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

/** the results key of a configuration's measurements under the flood (--scenario flood) */
export function floodId (id: string): string {
  return `${id} flood`
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
