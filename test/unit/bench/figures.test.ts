// The two figures a bench report opens with, from configurations' rounds as the bench records
// them: the auth layer's CPU per signed request (c - e, else d - e) and signed requests per second
// per gateway core (1,000,000 / c's CPU us/req), each with its range over the rounds; and when a
// run cannot give them, why. The end-to-end runs (test/system/bench*.test.ts) have one round each.
import t from 'tap'
import type { Measurement } from '../../../bench/measure.js'
import { figuresOf } from '../../../bench/figures.js'
import { medianOf, type ConfigResult, type Figure, type Machine } from '../../../bench/report.js'
import { headlineLines } from '../../../bench/report-text.js'

const SEED_RSA = { scenario: 'get', scheme: 'seed', keyType: 'rsa' }

/** a configuration measured in rounds 1, 2, 3 ... with these CPU us per request */
function config (id: string, label: string, cpu: Array<number | null>, cpuOf: string | null = 'keygate'): ConfigResult {
  const rounds = cpu.map((us, i) => ({
    requests: 1000,
    seconds: 1,
    rps: 1000,
    latency: { p50: 1 },
    statuses: { 200: 1000 },
    codes: {},
    socketErrors: 0,
    timeouts: 0,
    perSecond: [1000],
    cpuPerRequestUs: us,
    upstreamCpuPerRequestUs: 20,
    redisCpuPerRequestUs: null,
    nginxCpuPerRequestUs: null,
    generatorCpuPercent: 20,
    otherCpuPercent: 5,
    round: i + 1,
    position: 0,
    inlineSignedPosts: 0
  } satisfies Measurement & { round: number; position: number; inlineSignedPosts: number }))
  return { id, label, url: 'http://127.0.0.1:1', cpuOf, rounds, median: { ...medianOf(rounds), ratioToBare: null } }
}

const measured = (figure: Figure | { value: null; why: string }): Figure => {
  if (figure.value === null) throw new Error(`not measured: ${figure.why}`)
  return figure
}

t.test('the auth layer is c - e from the medians; its range, c - e in each round', async (t) => {
  // c's median 100, e's 52: 48; per round 110 - 50, 100 - 60, 90 - 52
  const figures = figuresOf([config('c', 'keygate, Redis store', [110, 100, 90]), config('e', 'keygate, public route (no auth)', [50, 60, 52])], SEED_RSA)
  const auth = measured(figures.authLayerCpuUs)
  t.match(auth, { value: 48, perRound: [60, 40, 38], min: 38, max: 60 })
  t.match(auth.how, /^c's CPU us\/req - e's/)
  const perCore = measured(figures.signedRequestsPerSecondPerCore)
  t.match(perCore, { value: 10_000, perRound: [9091, 10_000, 11_111], min: 9091, max: 11_111 })
  t.match(perCore.how, /^1,000,000 \/ c's CPU us\/req/)
  t.match(figures, { scheme: 'seed', keyType: 'rsa' })
})

t.test('without c, from d (the embedded store); f, which also counts a rate limit, is never taken', async (t) => {
  const e = config('e', 'keygate, public route (no auth)', [50])
  const fromD = figuresOf([config('d', 'keygate, embedded store', [80]), e, config('f', 'keygate, Redis, one per-key limit', [300])], SEED_RSA)
  t.equal(measured(fromD.authLayerCpuUs).value, 30)
  t.match(measured(fromD.authLayerCpuUs).how, /^d's CPU us\/req - e's/)
  t.equal(measured(fromD.signedRequestsPerSecondPerCore).value, 12_500)
  const onlyF = figuresOf([e, config('f', 'keygate, Redis, one per-key limit', [300])], SEED_RSA)
  t.match(onlyF.authLayerCpuUs, { value: null, why: /need c or d/ })
})

t.test('a run that cannot give a figure says why', async (t) => {
  const c = config('c', 'keygate, Redis store', [100])
  const e = config('e', 'keygate, public route (no auth)', [50])
  const noE = figuresOf([c], SEED_RSA)
  t.equal(measured(noE.signedRequestsPerSecondPerCore).value, 10_000, 'per core needs c alone')
  t.match(noE.authLayerCpuUs, { value: null, why: /needs e, the same requests on a public route, measured beside c/ })
  for (const scenario of ['token', 'register', 'reject']) {
    const figures = figuresOf([c, e], { ...SEED_RSA, scenario })
    t.match(figures.authLayerCpuUs, { value: null, why: new RegExp(`^--scenario ${scenario} sends other than signed requests`) }, scenario)
    t.match(figures.signedRequestsPerSecondPerCore, { value: null }, scenario)
  }
  const target = figuresOf([config('t', 'keygate at http://gw:8080', [null], null)], SEED_RSA)
  t.match(target.signedRequestsPerSecondPerCore, { value: null, why: /with --url the target's CPU is not measured here/ })
  const empty = figuresOf([config('c', 'keygate, Redis store', [null]), e], SEED_RSA)
  t.match(empty.signedRequestsPerSecondPerCore, { value: null, why: /c has no CPU per request/ })
})

t.test('the first lines: each figure with its range, the machine and how busy it was, how each is computed', async (t) => {
  const machine: Machine = {
    cpus: 2,
    cpuModel: 'AMD EPYC',
    node: 'v24.0.0',
    platform: 'linux-x64',
    loadAverage: { start: [0.5, 1, 1], end: [1.25, 1, 1] },
    otherCpuPercent: { median: 3, max: 12.5 }
  }
  const figures = figuresOf([config('c', 'keygate, Redis store', [110, 100, 90]), config('e', 'keygate, public route (no auth)', [50, 60, 52])],
    { scenario: 'get', scheme: 'rfc9421', keyType: 'ed25519' })
  const lines = headlineLines({ figures, machine })
  t.same(lines.figures, [
    'auth layer, rfc9421 scheme, ed25519 key: 48 us of gateway CPU per signed request (3 rounds: 38 to 60)',
    'per gateway core, rfc9421 scheme, ed25519 key: 10,000 signed requests/s (3 rounds: 9,091 to 11,111)',
    'machine: 2 cores (AMD EPYC), Node v24.0.0, linux-x64; load average 0.50 at the start, 1.25 at the end (1 minute); ' +
      'other work used 3% of a core during the measurements (median; at most 13%)'
  ])
  t.same(lines.how, [
    `how: auth layer = ${measured(figures.authLayerCpuUs).how}`,
    `how: per gateway core = ${measured(figures.signedRequestsPerSecondPerCore).how}`
  ])

  const cAlone = figuresOf([config('c', 'keygate, Redis store', [100])], SEED_RSA)
  const without = headlineLines({ figures: cAlone, machine: { ...machine, otherCpuPercent: null } })
  t.match(without.figures[0], /^auth layer, seed scheme, rsa key: not measured: it needs e/)
  t.equal(without.figures[1], 'per gateway core, seed scheme, rsa key: 10,000 signed requests/s (1 round)')
  t.match(without.figures[2], /; what other work used is unknown here \(no \/proc\/stat\)$/)
  t.equal(without.how.length, 1, 'how, for the figure given only')
})

t.test('a signed agent (j): j - c from the medians, in gateway CPU and in Redis\'s; its range, j - c in each round; without c, why', async (t) => {
  const withRedis = (c: ConfigResult, redis: number[]): ConfigResult => {
    const rounds = c.rounds.map((r, i) => ({ ...r, redisCpuPerRequestUs: redis[i] ?? null }))
    return { ...c, rounds, median: { ...medianOf(rounds), ratioToBare: null } }
  }
  const c = withRedis(config('c', 'keygate, Redis store', [100, 110, 90]), [2, 3, 1])
  const j = withRedis(config('j', 'keygate, Redis store, a signed agent', [130, 125, 150]), [20, 25, 21])
  const run = { scenario: 'get', scheme: 'rfc9421', keyType: 'ed25519' }
  const agent = figuresOf([c, j], run).agentSignature
  // medians: j 130 - c 100; per round 130 - 100, 125 - 110, 150 - 90
  t.match(agent?.extraCpuUs, { value: 30, perRound: [30, 15, 60], min: 15, max: 60 })
  t.match(measured(agent?.extraCpuUs ?? { value: null, why: 'absent' }).how, /^j's CPU us\/req - c's .*Web Bot Auth agent/)
  t.match(agent?.extraRedisCpuUs, { value: 19, perRound: [18, 22, 20] })
  t.match(measured(agent?.extraRedisCpuUs ?? { value: null, why: 'absent' }).how, /^j's Redis us\/req - c's/)
  t.equal(figuresOf([c], run).agentSignature, undefined, 'no j: no such figure')
  t.match(figuresOf([j], run).agentSignature?.extraCpuUs, { value: null, why: /needs c, .* add c to --only/ })
})

t.test('an MCP route (k, --scenario mcp): k - e from the medians, its range per round; without e, why; its headline line', async (t) => {
  const e = config('e', 'keygate, public route (no auth)', [200, 210, 190])
  const k = config('k', 'keygate, public MCP route (each tools/call read and judged)', [212, 215, 230])
  const run = { scenario: 'mcp', scheme: 'seed', keyType: 'rsa' }
  const figures = figuresOf([e, k], run)
  // medians: k 215 - e 200; per round 212 - 200, 215 - 210, 230 - 190
  t.match(figures.mcpCall?.extraCpuUs, { value: 15, perRound: [12, 5, 40], min: 5, max: 40 })
  t.match(measured(figures.mcpCall?.extraCpuUs ?? { value: null, why: 'absent' }).how, /^k's CPU us\/req - e's .*tools\/call/)
  t.match(figures.authLayerCpuUs, { value: null, why: /^--scenario mcp gives its own figure/ })
  t.match(figuresOf([k], run).mcpCall?.extraCpuUs, { value: null, why: /needs e, .* add e to --only/ })
  t.equal(figuresOf([e], run).mcpCall, undefined, 'no k: no such figure')
  const machine: Machine = {
    cpus: 2, cpuModel: 'AMD EPYC', node: 'v24.0.0', platform: 'linux-x64', loadAverage: { start: [1, 1, 1], end: [1, 1, 1] }, otherCpuPercent: null
  }
  const lines = headlineLines({ figures, machine })
  t.ok(lines.figures.includes('an MCP route (k) over a public route (e), tools/call: 15.0 us of gateway CPU per call (3 rounds: 5.0 to 40.0)'))
  t.ok(lines.how.some((line) => line.startsWith('how: MCP route = k\'s CPU us/req - e\'s')))
})

t.test('a DPoP proof (m ES256, n EdDSA, --scenario dpop): m - l and n - l from the medians, gateway and Redis; without l, why; the headline', async (t) => {
  const withRedis = (c: ConfigResult, redis: number[]): ConfigResult => {
    const rounds = c.rounds.map((r, i) => ({ ...r, redisCpuPerRequestUs: redis[i] ?? null }))
    return { ...c, rounds, median: { ...medianOf(rounds), ratioToBare: null } }
  }
  const l = withRedis(config('l', 'keygate, Redis, bearer route, keygate\'s token as Bearer', [100, 110, 90]), [1, 2, 1])
  const m = withRedis(config('m', 'keygate, Redis, bearer route, DPoP-bound token, ES256 proofs', [250, 240, 280]), [30, 31, 29])
  const n = withRedis(config('n', 'keygate, Redis, bearer route, DPoP-bound token, EdDSA proofs', [200, 220, 190]), [30, 30, 30])
  const run = { scenario: 'dpop', scheme: 'seed', keyType: 'rsa' }
  const figures = figuresOf([l, m, n], run)
  // medians: m 250 - l 100; per round 250 - 100, 240 - 110, 280 - 90. n 200 - 100; 200 - 100, 220 - 110, 190 - 90
  t.match(figures.dpopProof?.ES256?.extraCpuUs, { value: 150, perRound: [150, 130, 190], min: 130, max: 190 })
  t.match(figures.dpopProof?.EdDSA?.extraCpuUs, { value: 100, perRound: [100, 110, 100] })
  t.match(figures.dpopProof?.ES256?.extraRedisCpuUs, { value: 29, perRound: [29, 29, 28] })
  t.match(measured(figures.dpopProof?.EdDSA?.extraCpuUs ?? { value: null, why: 'absent' }).how, /^n's CPU us\/req - l's .*EdDSA proof/)
  t.match(figures.authLayerCpuUs, { value: null, why: /^--scenario dpop gives its own figures/ })
  t.match(figuresOf([m], run).dpopProof?.ES256?.extraCpuUs, { value: null, why: /needs l, .* add l to --only/ })
  t.equal(figuresOf([l, m], run).dpopProof?.EdDSA, undefined, 'no n: no EdDSA figure')
  t.equal(figuresOf([l], run).dpopProof, undefined, 'no m nor n: no such figure')
  const machine: Machine = {
    cpus: 2, cpuModel: 'AMD EPYC', node: 'v24.0.0', platform: 'linux-x64', loadAverage: { start: [1, 1, 1], end: [1, 1, 1] }, otherCpuPercent: null
  }
  const lines = headlineLines({ figures, machine })
  t.ok(lines.figures.includes('a DPoP proof costs, ES256 (m over l): 150.0 us of gateway CPU per request (3 rounds: 130.0 to 190.0)'))
  t.ok(lines.figures.includes('a DPoP proof costs, EdDSA (n over l): 100.0 us of gateway CPU per request (3 rounds: 100.0 to 110.0)'))
  t.ok(lines.figures.includes('a DPoP proof costs, EdDSA, Redis: 29.0 us of Redis CPU per request (its jti remembered) (3 rounds: 28.0 to 29.0)'))
  t.ok(lines.how.some((line) => line.startsWith('how: DPoP proof, ES256 = m\'s CPU us/req - l\'s')))
})
