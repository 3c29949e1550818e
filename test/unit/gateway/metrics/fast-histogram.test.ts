// FastHistogram must expose exactly what prom-client's own Histogram exposes for the same
// observations: same buckets (a value equal to a bound counts in it), sums, counts and labels.
import { Histogram, Registry } from 'prom-client'
import t from 'tap'
import { FastHistogram } from '../../../../gateway/src/metrics/fast-histogram.js'

const BUCKETS = [0.001, 0.01, 0.1, 1]
const VALUES = [0, 0.0005, 0.001, 0.0010001, 0.01, 0.05, 0.1, 0.99, 1, 1.5, 30, 0.001, 0.2]

async function exposition (fill: (observe: (route: string | undefined, value: number) => void) => void, fast: boolean): Promise<string> {
  const registry = new Registry()
  const config = { name: 'x_seconds', help: 'x', buckets: BUCKETS, registers: [registry] }
  if (fast) {
    const unlabelled = new FastHistogram({ ...config, name: 'y_seconds' })
    const labelled = new FastHistogram({ ...config, labelNames: ['route'] })
    const plain = unlabelled.series()
    fill((route, value) => {
      if (route === undefined) unlabelled.record(plain, value)
      else labelled.record(labelled.series({ route }), value)
    })
  } else {
    const unlabelled = new Histogram({ ...config, name: 'y_seconds' })
    const labelled = new Histogram({ ...config, labelNames: ['route'] })
    fill((route, value) => {
      if (route === undefined) unlabelled.observe(value)
      else labelled.observe({ route }, value)
    })
  }
  return await registry.metrics()
}

t.test('the same exposition as prom-client\'s Histogram', async (t) => {
  const fill = (observe: (route: string | undefined, value: number) => void): void => {
    VALUES.forEach((value, i) => {
      observe(undefined, value)
      observe(i % 2 === 0 ? '/v1/clients/' : 'orders', value)
    })
  }
  const expected = await exposition(fill, false)
  t.match(expected, /x_seconds_bucket\{le="0.001",route="orders"\}|x_seconds_bucket\{route="orders",le="0.001"\}/)
  const normalise = (text: string): string[] =>
    text.split('\n').map((line) => line.replace(/\{(.*)\}/, (_, labels: string) => `{${labels.split(',').sort().join(',')}}`)).sort()
  t.same(normalise(await exposition(fill, true)), normalise(expected))
})

t.test('reset empties every series, and a series held across it keeps counting', async (t) => {
  const registry = new Registry()
  const histogram = new FastHistogram({ name: 'z_seconds', help: 'z', buckets: BUCKETS, labelNames: ['route'], registers: [registry] })
  const series = histogram.series({ route: 'a' })
  t.equal(histogram.series({ route: 'a' }), series, 'one series per label set')
  histogram.record(series, 0.5)
  registry.resetMetrics()
  histogram.record(series, 2)
  const text = await registry.metrics()
  t.match(text, 'z_seconds_count{route="a"} 1')
  t.match(text, 'z_seconds_sum{route="a"} 2')
  t.match(text, 'z_seconds_bucket{route="a",le="1"} 0')
  t.match(text, 'z_seconds_bucket{route="a",le="+Inf"} 1')
})
