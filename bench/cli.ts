// `npm run bench`: keygate's load tool for signed APIs. With no --url it starts, each in its own
// process on a free loopback port, the example service (a), a bare fastify + @fastify/http-proxy
// in front of it (b), and keygate in front of it on Redis (c) and on the embedded store (d); logs
// in, registers a fresh RSA key, signs requests ahead, and measures the configurations in
// alternating rounds under the same load; with --scenario decision, nginx alone (g), nginx asking
// keygate's decision listener (h) and keygate inline (d) instead; asked for by name, keygate with a
// rate limit (f), with an IdP's token (i), or taking a signed agent's GETs (j). Everything it starts, and every
// Redis key it writes, is removed when it ends, also on Ctrl-C. `npm run bench -- --help` lists
// the options.
//
// This file is the run from start to end; its parts: args.ts (the command line), stack.ts (what
// it starts), configurations.ts (what the load goes to), scenarios.ts and signing.ts (the
// requests), rounds.ts (the measurements), results.ts, figures.ts and report*.ts (the report),
// cleanup.ts (undoing everything started).
import { mkdirSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseBenchArgs, USAGE, UsageError, type BenchOptions } from './args.js'
import { cleanup, cleanUpOnSignals, onCleanup, wasInterrupted } from './cleanup.js'
import { keygateConfig } from './configurations.js'
import { killAllFloods } from './flood.js'
import { verificationCost } from './idp.js'
import { progress } from './progress.js'
import { describe, machineName, renderText } from './report-text.js'
import { renderHtml } from './report-html.js'
import { configResultsOf, MACHINE, reportOf, warningsOf } from './results.js'
import { measureRounds } from './rounds.js'
import { createSignedMaterial, ensureRegistrations, REGISTRATION_POOL_SIZE, type SignedMaterial } from './scenarios.js'
import { encodingOf, generateBenchKey, SigningPool } from './signing.js'
import { startOwnConfigs, type OwnSetup } from './stack.js'

const DEFAULT_OUT = join(tmpdir(), 'keygate-bench')

cleanUpOnSignals()

async function run (options: BenchOptions): Promise<void> {
  const started = new Date()
  const loadAtStart = loadavg()
  const say = progress(options)
  say.log(`keygate bench: ${describe(options)}`)
  say.log(`machine: ${machineName(MACHINE)}`)
  const keyReady = generateBenchKey(options.keyType)
  keyReady.catch(() => {})
  const setup: OwnSetup = options.target === undefined
    ? await startOwnConfigs(options, keyReady, say.log)
    : {
        configs: [await keygateConfig(
          't', `keygate at ${options.target.url}`, options.target.url, { username: options.target.user, password: options.target.password },
          await keyReady, {}, null
        )],
        services: [],
        redisPrefix: undefined
      }
  const { configs } = setup
  const key = await keyReady
  const signer = new SigningPool(key, encodingOf(options.scheme))
  onCleanup(async () => { await signer.close() })
  onCleanup(async () => { killAllFloods() })
  if (configs.length === 0) throw new UsageError('nothing to run')

  say.log('signing requests ...')
  const material: SignedMaterial = await createSignedMaterial(key, options.scheme, signer)
  if (options.scenario === 'register') {
    say.log(`making ${REGISTRATION_POOL_SIZE} RSA keys to register ...`)
    await ensureRegistrations(material, REGISTRATION_POOL_SIZE)
  }
  // (i): what verifying an IdP token costs the first time, keygate's verifier in this process, before the load starts
  let idpVerificationUs: number | undefined
  if (configs.some((c) => c.id === 'i')) {
    say.log('measuring what verifying an IdP token costs, uncached ...')
    idpVerificationUs = await verificationCost()
  }
  const rounds = await measureRounds(configs, options, material, signer, say)

  const loadAtEnd = loadavg()
  const configResults = configResultsOf(configs, rounds.results, options.scenario === 'flood')
  const warnings = warningsOf(configResults, options)
  mkdirSync(options.out, { recursive: true })
  const stamp = started.toISOString().replace(/[:.]/g, '-')
  const files = { json: resolve(options.out, `${stamp}.json`), html: resolve(options.out, `${stamp}.html`) }
  const loadAverage = { start: loadAtStart, end: loadAtEnd }
  const report = reportOf({ options, setup, configs, configResults, rounds, warnings, idpVerificationUs, started, finished: new Date(), loadAverage, files })
  const title = `keygate bench: ${describe(options, rounds.rate)}`
  writeFileSync(files.json, `${JSON.stringify(report, null, 2)}\n`)
  writeFileSync(files.html, renderHtml(report, title))
  process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : renderText(report, title, rounds.rate))
}

async function main (): Promise<void> {
  let options: BenchOptions | null
  try {
    options = parseBenchArgs(process.argv.slice(2), DEFAULT_OUT)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`${err.message}\n\n${USAGE}`)
    process.exit(2)
  }
  if (options === null) {
    process.stdout.write(USAGE)
    return
  }
  try {
    await run(options)
  } finally {
    await cleanup()
  }
}

main().then(() => { if (!wasInterrupted()) process.exit(0) }, (err: unknown) => {
  // Ctrl-C: what failed once its processes went away is no error of the run; the signal's handler
  // exits (130) once everything is cleaned up
  if (wasInterrupted()) return
  process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
