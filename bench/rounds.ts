// The measurements of a run: the configurations in alternating rounds under the same load (a
// different one first each round), each measurement with its pool of one-use requests signed
// ahead; with --rate half, (b)'s peak first; with --scenario flood, each configuration alone and
// under the flood, in turn first.
import type { BenchOptions } from './args.js'
import type { BenchConfig } from './configurations.js'
import { makeDpopProofs } from './dpop.js'
import { startFlood, type Flood, type FloodResult } from './flood.js'
import { measure } from './measure.js'
import type { Progress } from './progress.js'
import { floodId, type ConfigResult } from './report.js'
import { buildRequests, CLIENTS_PATH, ensureAgentGets, ensurePosts, floodHeaders, postShare, refreshGets, type SignedMaterial } from './scenarios.js'
import type { SigningPool } from './signing.js'

/** log in again before a measurement once the token is this old (tokens last 15 minutes by default) */
const TOKEN_REFRESH_MS = 5 * 60 * 1000
/**
 * First guess of a configuration's rate, to size the pool of signed POSTs before its first round
 * (later rounds use the rate measured): at most this, and at most this per connection. A guess
 * too low only means POSTs signed during the measurement, which the report warns about.
 */
const FIRST_RATE_GUESS = 3000
const FIRST_RATE_GUESS_PER_CONNECTION = 250

export interface Rounds {
  /** each configuration's measurements, by its id (under the flood: floodId) */
  results: Map<string, ConfigResult['rounds']>
  /** the fixed rate every configuration ran at, if any */
  rate: number | undefined
  /** --rate half: (b)'s peak, measured first */
  barePeakRps: number | undefined
}

/** What one measurement needs besides its configuration. */
interface Run {
  options: BenchOptions
  material: SignedMaterial
  signer: SigningPool
  say: Progress
  rate: number | undefined
  results: Rounds['results']
}

/** --rate half: (b) as fast as it goes first, then everyone at half of that */
async function halfOfBarePeak (configs: BenchConfig[], options: BenchOptions, material: SignedMaterial, signer: SigningPool,
  say: Progress): Promise<{ rate: number; barePeakRps: number }> {
  const bare = configs.find((c) => c.id === 'b') as BenchConfig
  say.line(`b ${bare.label}: measuring its peak for --rate half`)
  await refreshGets(material, signer)
  const peak = await measure({
    url: bare.url,
    connections: options.connections,
    duration: options.duration,
    warmup: options.warmup,
    requests: () => buildRequests(options.scenario, bare.destination, material, options.rejectShare, options.rejectKind),
    cpu: {}
  })
  const rate = Math.max(1, Math.round(peak.rps / 2))
  say.done(`b ${bare.label}: peak ${Math.round(peak.rps).toLocaleString('en-US')} req/s; ` +
    `every configuration now runs at ${rate.toLocaleString('en-US')} req/s`)
  return { rate, barePeakRps: peak.rps }
}

/** Before a measurement: a fresh token when it ages, and as many one-use requests as it may send, with a margin. */
async function prepare (run: Run, config: BenchConfig, round: number): Promise<void> {
  const { options, material, signer, say } = run
  if (config.login !== undefined && Date.now() - config.tokenAt > TOKEN_REFRESH_MS) await config.login()
  await refreshGets(material, signer)
  // requests each good for one: as many as the measurement may send, with a margin
  const { dpop } = config.destination
  const oneUse = config.destination.kind === 'agent' || dpop !== undefined ? 1 : config.destination.kind === 'keygate' ? postShare(options.scenario) : 0
  const expected = (run.rate ?? config.lastRps ?? Math.min(FIRST_RATE_GUESS, FIRST_RATE_GUESS_PER_CONNECTION * options.connections)) * oneUse
  const needed = Math.ceil(expected * (options.warmup + options.duration) * 1.3) + 2 * options.connections
  if (dpop !== undefined) {
    say.line(`round ${round}/${options.rounds}  ${config.id} ${config.label}: making ${needed} ${dpop.alg} DPoP proofs ...`)
    makeDpopProofs(dpop, needed)
  } else if (config.destination.kind === 'agent') {
    say.line(`round ${round}/${options.rounds}  ${config.id} ${config.label}: signing ${needed} agent GETs ...`)
    await ensureAgentGets(material, signer, config.destination, needed)
  } else if (oneUse > 0) {
    say.line(`round ${round}/${options.rounds}  ${config.id} ${config.label}: signing ${needed} POSTs ...`)
    await ensurePosts(material, signer, config.destination, needed)
  }
}

/** One measurement of one configuration, alone or under the flood, added to its results. */
async function measureOnce (run: Run, config: BenchConfig, round: number, position: number, underFlood: boolean): Promise<void> {
  const { options, material, say, rate } = run
  const flooding = options.scenario === 'flood'
  await prepare(run, config, round)
  // requests signed, or DPoP proofs made, during the measurement because the pool ran out
  const inlineMade = (): number => material.inlineSigned + (config.destination.dpop?.inlineMade ?? 0)
  const inlineBefore = inlineMade()
  const title = `round ${round}/${options.rounds}  ${config.id} ${config.label}${!flooding ? '' : underFlood ? ', under the flood' : ', alone'}`
  say.line(`${title}: warming up`)
  const flood: Flood | undefined = underFlood
    ? await startFlood({ url: config.url, connections: options.connections, path: CLIENTS_PATH, headers: floodHeaders(config.destination, material) })
    : undefined
  let seen: FloodResult | undefined
  let m
  try {
    m = await measure({
      url: config.url,
      connections: options.connections,
      rate,
      duration: options.duration,
      warmup: options.warmup,
      requests: () => buildRequests(options.scenario, config.destination, material, options.rejectShare, options.rejectKind),
      cpu: config.cpu,
      onSecond: (second, count) => { say.line(`${title}: ${second + 1}/${options.duration} s  ${count.toLocaleString('en-US')} req/s`) },
      ...(flood !== undefined && { onMeasuring: flood.mark })
    })
  } finally {
    seen = await flood?.stop()
  }
  // the flooding process is part of the run, not other work on the machine
  if (seen !== undefined && m.otherCpuPercent !== null) {
    m = { ...m, otherCpuPercent: Math.max(0, Math.round((m.otherCpuPercent - seen.cpuPercent) * 10) / 10) }
  }
  if (!underFlood) config.lastRps = m.rps
  run.results.get(underFlood ? floodId(config.id) : config.id)?.push({
    ...m, round, position, inlineSignedPosts: inlineMade() - inlineBefore, ...(seen !== undefined && { flood: seen })
  })
  say.done(`${title}: ${Math.round(m.rps).toLocaleString('en-US')} req/s, p99 ${m.latency.p99} ms` +
    `${m.cpuPerRequestUs === null ? '' : `, ${m.cpuPerRequestUs} us CPU/req`}` +
    `${seen === undefined ? '' : `; the flood: ${Math.round(seen.rps).toLocaleString('en-US')} answers/s`}`)
}

export async function measureRounds (configs: BenchConfig[], options: BenchOptions, material: SignedMaterial, signer: SigningPool,
  say: Progress): Promise<Rounds> {
  const results = new Map<string, ConfigResult['rounds']>(configs.map((c) => [c.id, []]))
  let rate = options.rate === 'half' ? undefined : options.rate
  let barePeakRps: number | undefined
  if (options.rate === 'half') ({ rate, barePeakRps } = await halfOfBarePeak(configs, options, material, signer, say))

  const flooding = options.scenario === 'flood'
  if (flooding) for (const c of configs) results.set(floodId(c.id), [])
  const run: Run = { options, material, signer, say, rate, results }
  for (let round = 1; round <= options.rounds; round++) {
    // a different configuration goes first each round, so none always follows the same one
    const order = configs.map((_, i) => configs[(i + round - 1) % configs.length] as BenchConfig)
    for (const [position, config] of order.entries()) {
      // flood: each configuration alone and under the flood, in turn first
      const variants = !flooding ? [false] : round % 2 === 1 ? [false, true] : [true, false]
      for (const underFlood of variants) await measureOnce(run, config, round, position, underFlood)
    }
  }
  return { results, rate, barePeakRps }
}
