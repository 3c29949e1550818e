// `npm run bench -- --scenario register|reject|mcp|dpop`: the scenarios that measure registrations,
// refusals, MCP tools/calls and DPoP proofs, with tiny settings. A file of its own: with the others, bench.test.ts came within
// seconds of tap's per-file timeout on a busy machine (72 s alone of 120).
import t from 'tap'
import type { BenchReport } from '../../bench/report.js'
import { TINY, outDir, runBench as bench } from '../helpers/bench.js'

t.test('--scenario register: 64 fresh keys, each registered once (201), then refused as duplicates (409)', async (t) => {
  // autocannon walks the request list per connection: one connection, and 2 s, so that one
  // connection reaches all 64 keys even at a few dozen requests a second on a busy machine
  const run = await bench([...TINY, '--connections', '1', '--duration', '2', '--scenario', 'register', '--only', 'd', '--json', '--out', outDir(t)])
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  const statuses = report.configs[0]?.median.statuses ?? {}
  t.equal(statuses['201'], 64, 'each key registered exactly once')
  t.ok((statuses['409'] ?? 0) > 0, 'and every later registration of it refused as a duplicate')
  t.same(Object.keys(statuses).sort(), ['201', '409'], 'nothing else')
  // (a noise warning may appear on a busy machine; no warning about the answers may)
  t.same(report.warnings.filter((w) => /non-2xx|registrations answered/.test(w)), [], 'no warning about the answers: 409s are what this scenario expects')
  const bad = await bench(['--scenario', 'register', '--only', 'b'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--scenario register: only keygate answers it/)
})

t.test('--scenario reject: refusals are counted by their problem+json code; --reject-kind picks one kind', async (t) => {
  const all = await bench([...TINY, '--scenario', 'reject', '--reject-share', '1', '--only', 'd', '--json', '--out', outDir(t)])
  t.equal(all.code, 0, `exit 0\n${all.stderr}`)
  const mixed = (JSON.parse(all.stdout) as BenchReport).configs[0]?.median
  t.same(Object.keys(mixed?.codes ?? {}).sort(), ['401 INVALID_SIGNATURE', '401 TIMESTAMP_OUT_OF_RANGE', '401 UNKNOWN_API_KEY'], 'the three kinds, in turn')
  t.equal(Object.values(mixed?.codes ?? {}).reduce((a, b) => a + b, 0), mixed?.statuses['401'], 'every 401 named by its code')
  const figures = (JSON.parse(all.stdout) as BenchReport).figures
  for (const figure of [figures.authLayerCpuUs, figures.signedRequestsPerSecondPerCore]) {
    t.match(figure, { value: null, why: /^--scenario reject sends other than signed requests that keygate accepts/ }, 'refusals give neither figure, and say why')
  }

  const stale = await bench([...TINY, '--scenario', 'reject', '--reject-share', '1', '--reject-kind', 'stale', '--only', 'd', '--json', '--out', outDir(t)])
  t.equal(stale.code, 0, `exit 0\n${stale.stderr}`)
  const only = (JSON.parse(stale.stdout) as BenchReport).configs[0]?.median
  t.same(Object.keys(only?.codes ?? {}), ['401 TIMESTAMP_OUT_OF_RANGE'])
  t.equal(only?.codes['401 TIMESTAMP_OUT_OF_RANGE'], only?.statuses['401'])

  const bad = await bench(['--reject-kind', 'nope'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--reject-kind: "nope" is not one of all, bad-signature, stale, unknown-key/)
})

t.test('--scenario mcp: tools/calls through a public route (e) and a public MCP route (k) to the bench\'s MCP server; k - e reported', async (t) => {
  const run = await bench([...TINY, '--scenario', 'mcp', '--json', '--out', outDir(t)])
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  t.same(report.configs.map((c) => c.id), ['e', 'k'], 'e and k, without being told')
  for (const c of report.configs) {
    t.ok((c.median.statuses['200'] ?? 0) > 0, `${c.id}: the MCP server answered`)
    t.same(Object.keys(c.median.statuses), ['200'], `${c.id}: every call allowed and answered (k's policy lets each tool the scenario calls)`)
  }
  t.type(report.figures.mcpCall?.extraCpuUs.value, 'number', 'k\'s CPU per call beyond e\'s')
  t.match(report.figures.authLayerCpuUs, { value: null, why: /--scenario mcp gives its own figure/ })
  t.same(report.services.map((s) => s.name).sort(), ['MCP server', 'example service', 'keygate (e)', 'keygate (k)'])

  const bad = await bench(['--scenario', 'mcp', '--only', 'c,k'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--scenario mcp: runs e, k only; leave out c/)
  const stray = await bench(['--only', 'k'])
  t.equal(stray.code, 2)
  t.match(stray.stderr, /k \(an MCP route\) is --scenario mcp's/)
})

t.test('--scenario dpop: a token as Bearer (l), bound to an ES256 (m) and an EdDSA (n) key with a new proof each; m - l and n - l reported', async (t) => {
  const run = await bench([...TINY, '--scenario', 'dpop', '--json', '--out', outDir(t)])
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  t.same(report.configs.map((c) => c.id), ['l', 'm', 'n'], 'l, m and n, without being told')
  for (const c of report.configs) {
    t.ok((c.median.statuses['200'] ?? 0) > 0, `${c.id}: answered`)
    // each proof sent once (a replayed jti would be 401 INVALID_DPOP_PROOF), the bound token only as DPoP (as Bearer: 401 DPOP_REQUIRED)
    t.same(Object.keys(c.median.statuses), ['200'], `${c.id}: every request accepted`)
  }
  for (const alg of ['ES256', 'EdDSA'] as const) {
    t.type(report.figures.dpopProof?.[alg]?.extraCpuUs.value, 'number', `${alg}: the proof's CPU per request beyond l's`)
    t.type(report.figures.dpopProof?.[alg]?.extraRedisCpuUs.value, 'number', `${alg}: and Redis's`)
  }
  t.match(report.figures.authLayerCpuUs, { value: null, why: /--scenario dpop gives its own figures/ })
  t.same(report.services.map((s) => s.name).sort(), ['example service', 'keygate (l)', 'keygate (m)', 'keygate (n)'])

  const bad = await bench(['--scenario', 'dpop', '--only', 'c,m'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--scenario dpop: runs l, m, n only; leave out c/)
  const stray = await bench(['--only', 'c,n'])
  t.equal(stray.code, 2)
  t.match(stray.stderr, /l, m and n \(a bearer route, DPoP\) are --scenario dpop's/)
})
