// `npm run bench -- --only f`: keygate on Redis with one per-key rate limit too high ever to
// refuse, the configuration that measures what counting costs (docs/scaling.md#rate-limits). It
// runs, refuses nothing, reports its CPU per request, and leaves no process or Redis key behind.
// A file of its own: with the others, bench.test.ts would outlast tap's per-file timeout.
import t from 'tap'
import type { BenchReport } from '../../bench/report.js'
import { TINY, alive, keysUnder, outDir, runBench as bench } from '../helpers/bench.js'
import { testRedisUrl } from '../helpers/redis.js'

t.test('--only f: keygate on Redis with one per-key rate limit that never refuses; nothing left behind', async (t) => {
  const redisUrl = await testRedisUrl()
  const run = await bench([...TINY, '--only', 'f', '--json', '--out', outDir(t)], { REDIS_URL: redisUrl })
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  t.same(report.configs.map((c) => [c.id, c.label]), [['f', 'keygate, Redis, one per-key limit']])
  const f = report.configs[0]
  t.ok((f?.median.statuses['200'] ?? 0) > 0, 'signed GETs answered 200')
  t.equal(f?.median.non2xx, 0, `none refused: ${JSON.stringify(f?.median.statuses)}`)
  t.ok((f?.median.cpuPerRequestUs ?? 0) > 0, 'CPU per request')
  for (const service of report.services) t.notOk(alive(service.pid), `${service.name} (pid ${service.pid}) is gone`)
  t.type(report.options.redisPrefix, 'string')
  t.same(await keysUnder(redisUrl, report.options.redisPrefix as string), [], 'no Redis key left under its prefix, rate counters included')
})
