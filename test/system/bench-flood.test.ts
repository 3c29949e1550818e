// `npm run bench -- --scenario flood` end to end with tiny settings: good traffic alone and under a
// flood of bad signatures from another loopback address (127.0.0.2), the flood's answers counted
// by code, and --env, which sets the gateways the bench starts. Its own file: bench.test.ts is
// near tap's timeout on a loaded machine.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { BenchReport } from '../../bench/report.js'
import { runBench } from '../helpers/bench.js'

const TINY = ['--duration', '1', '--warmup', '0', '--rounds', '1', '--connections', '4']
const bench = runBench

function outDir (t: { teardown: (fn: () => unknown) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-test-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  return dir
}

t.test('--scenario flood: good traffic alone and under a flood of bad signatures from 127.0.0.2; --env sets the gateways', async (t) => {
  // a small budget, refusals not held: 429s within the one measured second
  const small = ['--env', 'KEYGATE_SIGNATURE_FAILURE_LIMIT=20', '--env', 'KEYGATE_SIGNATURE_FAILURE_DELAY_MS=0']
  const run = await bench([...TINY, '--scenario', 'flood', '--only', 'd', '--json', '--out', outDir(t), ...small])
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  t.same(report.configs.map((c) => c.id), ['d', 'd flood'], 'each configuration alone and under the flood')
  t.match(report.options, { scenario: 'flood', floodFrom: '127.0.0.2', gatewayEnv: { KEYGATE_SIGNATURE_FAILURE_LIMIT: '20' } })
  const [alone, flooded] = report.configs
  t.equal(alone?.median.non2xx, 0, 'the good traffic alone: all 2xx')
  t.equal(flooded?.median.non2xx, 0, 'under the flood too: the flood comes from another address')
  t.ok((flooded?.median.rps ?? 0) > 0)
  t.equal(alone?.flood, undefined)
  const flood = flooded?.flood
  t.ok(flood !== undefined && flood.requests > 0, 'the flood was answered')
  t.same(Object.keys(flood?.codes ?? {}).filter((code) => !['401 INVALID_SIGNATURE', '429 RATE_LIMITED'].includes(code)), [],
    'the flood gets bad-signature refusals, then 429 once its budget is spent')
  t.ok((flood?.codes['429 RATE_LIMITED'] ?? 0) > 0, `past the budget, 429 (${JSON.stringify(flood?.codes)})`)

  const noBudget = ['--env', 'KEYGATE_SIGNATURE_FAILURE_LIMIT=1000000000']
  const lifted = await bench([...TINY, '--scenario', 'flood', '--only', 'd', '--json', '--out', outDir(t), ...noBudget])
  t.equal(lifted.code, 0, `exit 0\n${lifted.stderr}`)
  const liftedReport = JSON.parse(lifted.stdout) as BenchReport
  t.same(liftedReport.options.gatewayEnv, { KEYGATE_SIGNATURE_FAILURE_LIMIT: '1000000000' })
  t.same(Object.keys(liftedReport.configs[1]?.flood?.codes ?? {}), ['401 INVALID_SIGNATURE'], 'no budget: every flood request is checked')

  for (const [args, message] of [
    [['--scenario', 'flood', '--only', 'a'], /--scenario flood: only keygate answers it/],
    [['--env', 'NOPE=1'], /--env: "NOPE=1" is not NAME=VALUE with a keygate variable/],
    [['--env', 'PORT=1'], /--env: PORT is set by the bench itself/]
  ] as const) {
    const bad = await bench([...args])
    t.equal(bad.code, 2, args.join(' '))
    t.match(bad.stderr, message)
  }
})
