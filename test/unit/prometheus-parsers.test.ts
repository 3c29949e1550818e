// The strict exposition parsers the metrics tests read keygate's /metrics with
// (test/helpers/prometheus.ts): what they accept, and that each rule they check refuses what
// breaks it, so a test that passes through them could fail.
import t from 'tap'
import { parse, parseOpenMetrics } from '../helpers/prometheus.js'

const CLASSIC = `# HELP x_total requests
# TYPE x_total counter
x_total{route="a"} 3
# TYPE h histogram
h_bucket{le="0.1"} 1
h_bucket{le="+Inf"} 2
h_sum 0.3
h_count 2
`

const OPEN = `# TYPE x counter
x_total{route="a"} 3
# TYPE h histogram
h_bucket{le="0.1"} 1 # {trace_id="abc"} 0.05 1795000000.000
h_bucket{le="+Inf"} 2
h_sum 0.3
h_count 2
# EOF
`

t.test('the classic text format', async (t) => {
  t.same(parse(CLASSIC).map((s) => [s.name, s.value]), [['x_total', 3], ['h_bucket', 1], ['h_bucket', 2], ['h_sum', 0.3], ['h_count', 2]])
  t.throws(() => parse('y 1\n'), /sample outside the block of its family \(none\)/)
  t.throws(() => parse(`${CLASSIC}x_total{route="a"} 4\n`), /sample outside the block of its family \(h\)/)
  t.throws(() => parse('# TYPE y gauge\ny 1\ny 2\n'), /the same series twice/)
  t.throws(() => parse('# TYPE y gauge\ny one\n'), /not a number/)
  t.throws(() => parse('# TYPE y gauge\n# TYPE z gauge\n# TYPE y gauge\n'), /family y declared twice/)
  t.throws(() => parse(CLASSIC.replace('h_count 2', 'h_count 3')), Error, 'a histogram whose +Inf is not its count')
})

t.test('OpenMetrics, with exemplars', async (t) => {
  const samples = parseOpenMetrics(OPEN)
  t.same(samples.find((s) => s.exemplar !== undefined)?.exemplar, { labels: { trace_id: 'abc' }, value: 0.05, timestamp: 1795000000 })
  t.throws(() => parseOpenMetrics(OPEN.replace('# EOF\n', '')), /no # EOF at the end/)
  t.throws(() => parseOpenMetrics(OPEN.replace('h_sum 0.3', 'h_sum 0.3 # {trace_id="abc"} 1')), /an exemplar on neither a bucket nor a total/)
  t.throws(() => parseOpenMetrics(OPEN.replace('"abc"', `"${'a'.repeat(130)}"`)), /over 128 characters/)
  t.throws(() => parseOpenMetrics(OPEN.replace('x_total{route="a"} 3', 'x_total{route="a"} 3\nx_total{route="a"} 3')), /the same series twice/)
})
