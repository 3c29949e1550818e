// From the rounds measured to the report: each configuration's rounds and medians (with the ratio
// to the bare proxy), what the run warns about (errors, refusals where none should be, a pool of
// signed requests that ran out, a busy machine, a saturated load generator), and the JSON report.
import { availableParallelism, cpus } from 'node:os'
import type { BenchOptions } from './args.js'
import type { BenchConfig } from './configurations.js'
import { decisionFiguresOf, figuresOf } from './figures.js'
import { FLOOD_ADDRESS } from './flood.js'
import { floodId, median, medianFlood, medianOf, type BenchReport, type ConfigResult, type Machine } from './report.js'
import type { Rounds } from './rounds.js'
import type { OwnSetup } from './stack.js'

/** the machine: what it is, now */
export const MACHINE = {
  cpus: availableParallelism(), cpuModel: cpus()[0]?.model.trim() ?? '', node: process.version, platform: `${process.platform}-${process.arch}`
}

/** Each configuration's rounds and medians; with --scenario flood, two: its good traffic alone, and under the flood. */
export function configResultsOf (configs: BenchConfig[], results: Rounds['results'], flooding: boolean): ConfigResult[] {
  const bare = configs.find((c) => c.id === 'b')
  const bareRps = bare === undefined ? undefined : medianOf(results.get('b') ?? []).rps
  const resultOf = (c: BenchConfig, id: string, label: string): ConfigResult => {
    const rounds = results.get(id) ?? []
    const m = medianOf(rounds)
    const floods = rounds.flatMap((r) => r.flood === undefined ? [] : [r.flood])
    return {
      id,
      label,
      url: c.url,
      cpuOf: c.cpuOf,
      rounds,
      median: { ...m, ratioToBare: bareRps === undefined || bareRps === 0 ? null : Math.round((m.rps / bareRps) * 100) / 100 },
      ...(floods.length > 0 && { flood: medianFlood(floods) })
    }
  }
  return configs.flatMap((c) => flooding
    ? [resultOf(c, c.id, `${c.label}: good traffic alone`), resultOf(c, floodId(c.id), `${c.label}: good traffic, flood from ${FLOOD_ADDRESS}`)]
    : [resultOf(c, c.id, c.label)])
}

export function warningsOf (configResults: ConfigResult[], options: BenchOptions): string[] {
  const warnings: string[] = []
  // reject: refusals are the point; register: every key but the first pass is a duplicate
  const accepted = options.scenario !== 'reject' && options.scenario !== 'register'
  for (const c of configResults) {
    const name = `${c.id} (${c.label})`
    if (c.rounds.some((r) => r.requests === 0)) warnings.push(`${name}: no response completed within a measurement; use a longer --duration`)
    const errors = c.rounds.reduce((sum, r) => sum + r.socketErrors + r.timeouts, 0)
    if (errors > 0) warnings.push(`${name}: ${errors} connection errors or timeouts`)
    if (options.scenario === 'token' && (c.median.statuses['429'] ?? 0) > 0) {
      warnings.push(`${name}: 429 RATE_LIMITED: more logins at once than the gateway lets wait (KEYGATE_LOGIN_CONCURRENCY + KEYGATE_LOGIN_QUEUE), ` +
        'or, with --url, than its per-user limit (KEYGATE_LOGIN_MAX_FAILURES_PER_USER); try fewer --connections')
    }
    if (options.scenario === 'register') {
      const other = Object.entries(c.median.statuses).filter(([status]) => status !== '201' && status !== '409')
      if (other.length > 0) warnings.push(`${name}: registrations answered other than 201 or 409 DUPLICATE_KEY: ${JSON.stringify(Object.fromEntries(other))}`)
    }
    if (accepted && c.median.non2xx > 0) {
      warnings.push(`${name}: ${c.median.non2xx} non-2xx responses (median per round) where all should succeed: ${JSON.stringify(c.median.statuses)}`)
    }
    const inline = c.rounds.reduce((sum, r) => sum + r.inlineSignedPosts, 0)
    if (inline > 0) {
      const pool = c.id === 'j' ? 'agent-signed GETs' : c.id === 'm' || c.id === 'n' ? 'DPoP proofs' : 'signed POSTs'
      warnings.push(`${name}: the pool of ${pool} ran out; ${inline} were ${pool === 'DPoP proofs' ? 'made' : 'signed'} during the measurement, ` +
        'which slows the load generator')
    }
    // (with --url the target's own CPU is in "other")
    if (c.cpuOf !== null && c.median.otherCpuPercent !== null && c.median.otherCpuPercent > 20) {
      warnings.push(`${name}: other work used ${c.median.otherCpuPercent}% of a core during the measurements: the figures are noisy`)
    }
    if (c.median.generatorCpuPercent > 90) {
      warnings.push(`${name}: the load generator used ${c.median.generatorCpuPercent}% of a core: it may be what limits the rate`)
    }
  }
  return warnings
}

/** What the run did, as its JSON file holds it. */
export interface RunRecord {
  options: BenchOptions
  setup: OwnSetup
  configs: BenchConfig[]
  configResults: ConfigResult[]
  rounds: Rounds
  warnings: string[]
  idpVerificationUs: number | undefined
  started: Date
  finished: Date
  loadAverage: Machine['loadAverage']
  files: BenchReport['files']
}

export function reportOf (run: RunRecord): BenchReport {
  const { options, setup, configs, configResults, rounds, started, finished } = run
  const others = configResults.flatMap((c) => c.rounds.flatMap((r) => r.otherCpuPercent === null ? [] : [r.otherCpuPercent]))
  const machine: Machine = {
    ...MACHINE,
    loadAverage: run.loadAverage,
    otherCpuPercent: others.length === 0 ? null : { median: median(others), max: Math.max(...others) }
  }
  return {
    tool: 'keygate-bench',
    version: 1,
    figures: figuresOf(configResults, options, run.idpVerificationUs),
    machine,
    ...(options.scenario === 'decision' && { decision: decisionFiguresOf(configResults, options) }),
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    wallSeconds: Math.round((finished.getTime() - started.getTime()) / 100) / 10,
    options: {
      scenario: options.scenario,
      scheme: options.scheme,
      keyType: options.keyType,
      duration: options.duration,
      warmup: options.warmup,
      connections: options.connections,
      rate: rounds.rate,
      barePeakRps: rounds.barePeakRps,
      rounds: options.rounds,
      rejectShare: options.scenario === 'reject' ? options.rejectShare : undefined,
      rejectKind: options.scenario === 'reject' ? options.rejectKind : undefined,
      floodFrom: options.scenario === 'flood' ? FLOOD_ADDRESS : undefined,
      gatewayEnv: Object.keys(options.gatewayEnv).length > 0 ? options.gatewayEnv : undefined,
      trace: options.trace === 'off' ? undefined : options.trace,
      // the OTLP exports the sink received while measuring (the last batches come as the gateways stop)
      traceExports: setup.traceSink?.exports(),
      configs: configs.map((c) => c.id),
      target: options.target?.url,
      gatewayLogLevel: options.target === undefined ? options.logLevel : undefined,
      redisPrefix: setup.redisPrefix
    },
    services: setup.services,
    configs: configResults,
    warnings: run.warnings,
    files: run.files
  }
}
