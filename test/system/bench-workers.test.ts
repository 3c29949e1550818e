// `npm run bench -- --workers N`: keygate on Redis (c) runs as N worker processes, and its CPU per
// request counts the workers, where the work is done, not only the primary that forks them.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { BenchReport } from '../../bench/report.js'
import { runBench } from '../helpers/bench.js'
import { testRedisUrl } from '../helpers/redis.js'

const bench = runBench

/** pids of this user's processes whose environment holds `entry` (a worker's own KEYGATE_REDIS_PREFIX) */
function processesWithEnv (entry: string): number[] {
  const found: number[] = []
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(entry)) found.push(Number(pid))
    } catch { /* another user's, or gone */ }
  }
  return found
}

t.test('--workers 2: keygate on Redis as two workers, CPU per request of all of them, nothing left behind', async (t) => {
  const redisUrl = await testRedisUrl()
  const out = mkdtempSync(join(tmpdir(), 'keygate-bench-test-'))
  t.teardown(() => { rmSync(out, { recursive: true, force: true }) })
  const run = await bench(
    ['--duration', '1', '--warmup', '0', '--rounds', '1', '--connections', '4', '--only', 'c', '--workers', '2', '--json', '--out', out],
    { REDIS_URL: redisUrl }
  )
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  const c = report.configs[0]
  t.equal(c?.label, 'keygate, Redis store, 2 workers')
  t.equal(c?.cpuOf, 'keygate (primary and 2 workers)')
  t.ok((c?.median.rps ?? 0) > 0, 'requests were served')
  t.equal(c?.median.non2xx, 0, 'all of them 2xx')
  // the primary alone only hands out connections: a few us per request. keygate verifies and
  // forwards every request the example service merely answers, so with its workers counted its
  // figure is the larger.
  const gateway = c?.median.cpuPerRequestUs ?? 0
  const upstream = c?.median.upstreamCpuPerRequestUs ?? Infinity
  t.ok(gateway > upstream, `keygate's CPU per request (${gateway} us) counts its workers: above the example service's (${upstream} us)`)
  // the figures: per gateway core from c, its workers counted; the auth layer's cost needs e, left out here
  t.equal(report.figures.signedRequestsPerSecondPerCore.value, Math.round(1e6 / gateway), `signed requests per second per core: 1,000,000 / ${gateway} us`)
  t.match(report.figures.authLayerCpuUs, { value: null, why: /needs e, the same requests on a public route/ }, 'no auth layer\'s cost without e, and why')
  const prefix = report.options.redisPrefix
  t.type(prefix, 'string', 'the run names its Redis prefix')
  t.same(processesWithEnv(`KEYGATE_REDIS_PREFIX=${String(prefix)}`), [], 'no worker is left running')
})

t.test('--workers takes a whole number from 1, and not with --url', async (t) => {
  const zero = await bench(['--workers', '0'])
  t.equal(zero.code, 2)
  t.match(zero.stderr, /--workers: "0" is not an integer >= 1/)
  const url = await bench(['--url', 'http://127.0.0.1:1', '--user', 'u', '--password', 'p', '--workers', '2'])
  t.equal(url.code, 2)
  t.match(url.stderr, /--workers sets the keygate started here/)
  const help = await bench(['--help'])
  t.match(help.stdout, /--workers N/)
})
