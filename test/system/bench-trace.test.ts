// `npm run bench -- --trace all|N%`: the gateways the bench starts export OpenTelemetry traces to
// the bench's own OTLP sink, so the bench measures what tracing costs.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parseBenchArgs } from '../../bench/args.js'
import type { BenchReport } from '../../bench/report.js'
import { runBench } from '../helpers/bench.js'

t.test('--trace all: the gateway exports its spans to the sink while it is measured', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'keygate-bench-test-'))
  t.teardown(() => { rmSync(out, { recursive: true, force: true }) })
  const tiny = ['--duration', '1', '--warmup', '0', '--rounds', '1', '--connections', '4']
  // a batch every 100 ms rather than 5 s: a one-second run's spans go out before it reports
  const run = await runBench([...tiny, '--only', 'd', '--trace', 'all', '--json', '--out', out], { OTEL_BSP_SCHEDULE_DELAY: '100' })
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  t.equal(report.options.trace, 'all')
  t.equal(report.configs[0]?.median.non2xx, 0, 'every request answered 2xx')
  const exports = report.options.traceExports as { requests: number; bytes: number }
  t.ok(exports.requests > 0 && exports.bytes > 0, `the sink received ${exports.requests} exports, ${exports.bytes} bytes`)
})

t.test('--trace takes off, all or a share, and not with --url', async (t) => {
  const parse = (args: string[]): unknown => parseBenchArgs(args, '/nonexistent')
  t.match(parse([]), { trace: 'off' })
  t.match(parse(['--trace', '100%']), { trace: 'all' })
  t.match(parse(['--trace', '0.5%']), { trace: 0.005 })
  t.throws(() => parse(['--trace', '150%']), { name: 'UsageError', message: '--trace: "150%" is not off, all or a share such as 1%' })
  t.throws(() => parse(['--url', 'http://127.0.0.1:1', '--user', 'u', '--password', 'p', '--trace', 'all']), { message: /--trace sets the gateways started here/ })
})
