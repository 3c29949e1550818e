// KEYGATE_WORKERS=2 with KEYGATE_METRICS_PORT: the primary serves /metrics for the whole process
// tree, every worker's registry added up. Real processes (main.ts), the real Redis, real sockets;
// which worker answered each request is read from its access-log line.
import { createServer, type AddressInfo } from 'node:net'
import t from 'tap'
import { send } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { answeredBy, gone, redisEnv, spawnGateway, startCluster, type Cluster } from '../helpers/process-tree.js'
import { parse, value, type Sample } from '../helpers/prometheus.js'
import { freePort } from '../helpers/redis.js'
import { login, registerKey, sendSigned, startUpstreamStub } from '../helpers/stack.js'

const CLIENTS = { route: '/v1/clients/', method: 'GET', status: '200' }

async function scrape (metricsUrl: string): Promise<Sample[]> {
  const res = await send(metricsUrl, '/metrics')
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${res.text}`)
  return parse(res.text)
}

t.test('one /metrics for two workers: counts and histograms add up exactly', async (t) => {
  const upstream = await startUpstreamStub(t)
  const metricsPort = await freePort()
  const metricsUrl = `http://127.0.0.1:${metricsPort}`
  const gw: Cluster = await startCluster(t, { ...await redisEnv(t, 'metrics-workers'), UPSTREAM_URL: upstream, KEYGATE_METRICS_PORT: String(metricsPort) })
  const announced = await gw.waitForLine((l) => /^metrics for Prometheus at /.test(l.msg), 'naming the metrics listener')
  t.equal(announced.pid, gw.child.pid, 'the primary holds the metrics listener')
  t.match(announced.msg, `${metricsUrl}/metrics`)

  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)

  /** n signed GETs, each on a new connection (node:cluster hands connections out in turn); the requests each worker answered */
  const signedGets = async (n: number): Promise<Map<number, number>> => {
    const byWorker = new Map<number, number>()
    for (let i = 0; i < n; i++) {
      const res = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
      if (res.status !== 200) throw new Error(`a signed GET answered ${res.status}: ${res.text}`)
      const pid = await answeredBy(gw, res)
      byWorker.set(pid, (byWorker.get(pid) ?? 0) + 1)
    }
    return byWorker
  }

  const first = await signedGets(60)
  t.same([...first.keys()].sort(), [...gw.workers].sort(), `both workers served some of the 60 (${JSON.stringify([...first.values()])})`)
  let samples = await scrape(metricsUrl)
  t.equal(value(samples, 'keygate_http_requests_total', CLIENTS), 60, '60 requests over two workers count 60, in one series')
  t.equal(value(samples, 'keygate_auth_outcomes_total', { route: '/v1/clients/', reason: 'ok' }), 60)
  t.equal(value(samples, 'keygate_http_requests_total', { route: '/v1/auth/token', method: 'POST', status: '200' }), 1, 'the one login')
  t.equal(value(samples, 'keygate_http_requests_total', { route: '/v1/api-keys', method: 'POST', status: '201' }), 1, 'the one registration')
  // the parser has checked every histogram's buckets: cumulative, +Inf equal to _count
  t.equal(value(samples, 'keygate_upstream_latency_seconds_bucket', { route: '/v1/clients/', le: '+Inf' }), 60, 'upstream latency buckets add up')
  t.equal(value(samples, 'keygate_upstream_latency_seconds_count', { route: '/v1/clients/' }), 60)
  t.equal(value(samples, 'keygate_signature_verification_seconds_count'), 60, 'one signature verification per request')
  t.same(samples.filter((s) => s.name === 'keygate_worker_restarts_total'), [{ name: 'keygate_worker_restarts_total', labels: {}, value: 0 }],
    'the primary\'s count of worker restarts: one series, 0')

  // process metrics, as prom-client aggregates them across workers
  t.ok(value(samples, 'process_cpu_seconds_total') > 0, 'CPU time: the workers\' summed')
  t.equal(samples.filter((s) => s.name === 'nodejs_version_info').length, 1, 'the Node version: one sample')
  t.equal(samples.filter((s) => s.name === 'process_start_time_seconds').length, 0, 'no start time: the workers\' cannot be added up')

  const second = await signedGets(40)
  t.equal(second.size, 2, `both workers served some of 40 more (${JSON.stringify([...second.values()])})`)
  samples = await scrape(metricsUrl)
  t.equal(value(samples, 'keygate_http_requests_total', CLIENTS), 100, '40 more: 100')
  t.equal(value(samples, 'keygate_upstream_latency_seconds_bucket', { route: '/v1/clients/', le: '+Inf' }), 100)

  await t.test('a worker killed outright: scrapes go on answering, without its counts', async (t) => {
    const [victim, survivor] = gw.workers as [number, number]
    process.kill(victim, 'SIGKILL')
    // scrape throughout the replacement's start: a worker still starting must not hold a scrape up
    const replaced = { yet: false }
    const replacement = gw.waitForLine((l) => l.msg === 'replacement worker listening', 'about the replacement').then((line) => {
      replaced.yet = true
      return line.worker as number
    })
    const statuses = new Set<number>()
    let scrapes = 0
    while (!replaced.yet) {
      const res = await send(metricsUrl, '/metrics')
      statuses.add(res.status)
      if (res.status === 200) parse(res.text)
      scrapes++
      // a pause, so the scrapes do not starve the starting worker of the machine's cores
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    t.same([...statuses], [200], `${scrapes} scrapes while the worker was replaced: all 200 and parseable`)
    const newWorker = await replacement
    t.not(newWorker, victim)

    samples = await scrape(metricsUrl)
    const survivorServed = (first.get(survivor) ?? 0) + (second.get(survivor) ?? 0)
    t.equal(value(samples, 'keygate_http_requests_total', CLIENTS), survivorServed,
      `the dead worker's counts went with it: the survivor's ${survivorServed} remain`)
    t.equal(value(samples, 'keygate_worker_restarts_total'), 1, 'the primary counted the restart')

    const third = await signedGets(20)
    t.same([...third.keys()].sort(), [survivor, newWorker].sort(), 'the survivor and the replacement serve')
    samples = await scrape(metricsUrl)
    t.equal(value(samples, 'keygate_http_requests_total', CLIENTS), survivorServed + 20, 'and their counts add up again')
    gw.workers = [survivor, newWorker]
  })

  await t.test('SIGTERM: the primary closes the metrics listener and exits 0 with its workers', async (t) => {
    gw.child.kill('SIGTERM')
    t.equal((await gw.exited).code, 0)
    t.ok(await gone(gw.workers), 'no worker outlives it')
    await t.rejects(send(metricsUrl, '/metrics'), { code: 'ECONNREFUSED' }, 'the metrics port is closed')
  })
})

t.test('a metrics port that cannot be had stops the start, workers and all', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { blocker.close() })
  const taken = (blocker.address() as AddressInfo).port
  const gw = spawnGateway(t, { ...await redisEnv(t, 'metrics-workers'), KEYGATE_WORKERS: '2', KEYGATE_METRICS_PORT: String(taken) })
  const { code } = await gw.exited
  t.equal(code, 1, 'exit code 1')
  t.match(gw.stderr(), /^keygate could not start: .*EADDRINUSE/m)
  const workers = [...new Set(gw.lines.map((l) => l.pid))].filter((pid) => pid !== gw.child.pid)
  t.equal(workers.length, 2, 'both workers had started')
  t.ok(await gone(workers), 'no worker is left behind')
})
