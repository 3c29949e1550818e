// The figures the bench answers, from the medians and rounds of the configurations: what the auth
// layer costs and what a core serves (with what an IdP's token and a signed agent cost beyond
// keygate's own), with --scenario decision, keygate deciding behind nginx against inline, and with
// --scenario mcp, what reading and judging an MCP tools/call costs beyond forwarding it, and with
// --scenario dpop, what a DPoP proof costs beyond the same token sent as Bearer.
import type { Measurement } from './measure.js'
import { median, type ConfigResult, type DecisionFigures, type DpopProofFigures, type Figure, type Figures, type NoFigure } from './report.js'

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
  const mcp = configs.find((c) => c.id === 'k')
  if (mcp !== undefined) {
    figures = {
      ...figures,
      mcpCall: {
        extraCpuUs: overC(configs, mcp, 'cpuPerRequestUs', 'CPU', 'the same tools/calls on a public route',
          'keygate\'s CPU for a tools/call on a public MCP route (k: its body read once, strictly, and its tool judged against the policy) ' +
          'beyond forwarding the same call on a public route (e: its proxy hop alone)', 'e')
      }
    }
  }
  const dpop = dpopFiguresOf(configs)
  return dpop === undefined ? figures : { ...figures, dpopProof: dpop }
}

/** (m) ES256 and (n) EdDSA over (l), --scenario dpop: what a proof costs per request, gateway and Redis */
function dpopFiguresOf (configs: ConfigResult[]): DpopProofFigures | undefined {
  const out: DpopProofFigures = {}
  for (const [id, alg] of [['m', 'ES256'], ['n', 'EdDSA']] as const) {
    const x = configs.find((c) => c.id === id)
    if (x === undefined) continue
    const l = 'the same GETs with keygate\'s token as Bearer'
    out[alg] = {
      extraCpuUs: overC(configs, x, 'cpuPerRequestUs', 'CPU', l,
        `keygate's CPU for a GET with a DPoP-bound token and a new ${alg} proof (${id}) beyond the same GET with the token as Bearer (l), ` +
        'on a bearer route: the proof checked and its jti remembered', 'l'),
      extraRedisCpuUs: overC(configs, x, 'redisCpuPerRequestUs', 'Redis', l,
        `Redis's CPU for a GET with an ${alg} proof (${id}: its jti remembered, set-if-absent) beyond a Bearer GET (l)`, 'l')
    }
  }
  return Object.keys(out).length === 0 ? undefined : out
}

/** x's `measure` (us/req) - the base's (c, or e for k), the medians and each round's: what x costs beyond the base on the same load */
function overC (configs: ConfigResult[], x: ConfigResult, measure: 'cpuPerRequestUs' | 'redisCpuPerRequestUs', what: string, cDoes: string,
  meaning: string, base = 'c'): Figure | NoFigure {
  const own = configs.find((c) => c.id === base)
  if (own === undefined) return { value: null, why: `it needs ${base}, ${cDoes}, measured beside ${x.id}: add ${base} to --only` }
  const ownValue = own.median[measure]
  const xValue = x.median[measure]
  if (ownValue === null || xValue === null) return { value: null, why: `${base} or ${x.id} has no ${what} per request: a measurement completed no request` }
  const differences = x.rounds.flatMap((r) => {
    const same = own.rounds.find((o) => o.round === r.round)
    const mine = r[measure]
    const theirs = same?.[measure]
    return theirs == null || mine === null ? [] : [oneDecimal(mine - theirs)]
  })
  if (differences.length === 0) return { value: null, why: `no round measured both ${base} and ${x.id}` }
  const column = measure === 'cpuPerRequestUs' ? 'CPU us/req' : 'Redis us/req'
  return figure(oneDecimal(xValue - ownValue), differences,
    `${x.id}'s ${column} - ${base}'s (the medians; the range: that difference in each round): ${meaning}`)
}

function ownFiguresOf (configs: ConfigResult[], run: { scenario: string; scheme: string; keyType: string }): Figures {
  const { scheme, keyType } = run
  const none = (why: string): Figures => ({ scheme, keyType, authLayerCpuUs: { value: null, why }, signedRequestsPerSecondPerCore: { value: null, why } })
  if (run.scenario === 'decision') {
    return none('--scenario decision gives its own figures instead (decision in the JSON): keygate deciding against keygate inline; ' +
      'these two come from get, post or mix')
  }
  if (run.scenario === 'dpop') {
    return none('--scenario dpop gives its own figures instead (dpopProof in the JSON): a DPoP proof (m: ES256, n: EdDSA) over a Bearer token (l); ' +
      'these two come from get, post or mix')
  }
  if (run.scenario === 'mcp') {
    return none('--scenario mcp gives its own figure instead (mcpCall in the JSON): an MCP route (k) over a public route (e); ' +
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
