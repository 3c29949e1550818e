// KEYGATE_WORKERS: the gateway as a node:cluster of worker processes on one port, started as a
// real process tree (main.ts) on the real Redis. Which worker answered a request is read from
// its access-log line: pino writes every line with the pid of the process that wrote it.
import { Agent, request } from 'node:http'
import { availableParallelism } from 'node:os'
import t from 'tap'
import { restartDelayMs, RESTART_MAX_DELAY_MS } from '../../gateway/src/process/cluster.js'
import { loadConfig } from '../../gateway/src/config/env.js'
import { MAX_WORKERS, resolveWorkers } from '../../gateway/src/config/workers.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { answeredBy, gone, isRunning, redisEnv, spawnGateway, startCluster } from '../helpers/process-tree.js'
import { startRecorder } from '../helpers/recorder.js'
import { freePort } from '../helpers/redis.js'
import { routeFile } from '../helpers/routes.js'
import { login, registerKey, sendSigned, startUpstreamStub } from '../helpers/stack.js'

t.test('KEYGATE_WORKERS=2 on Redis: two workers serve, reload, are replaced, and stop cleanly', async (t) => {
  const upstream = await startUpstreamStub(t)
  const slow = await startRecorder(t, { delayMs: 700 })
  const routes = (extra: string): string => [
    'routes:',
    '  - prefix: /v1/clients/',
    `    upstream: ${upstream}`,
    '    auth: signed',
    '  - prefix: /slow/',
    `    upstream: ${slow.url}`,
    '    auth: public',
    extra
  ].join('\n')
  const file = routeFile(t, routes(''))
  const decisionPort = await freePort()
  const gw = await startCluster(t, {
    ...await redisEnv(t, 'workers'),
    KEYGATE_ROUTES: file.path,
    KEYGATE_SHUTDOWN_GRACE_MS: '8000',
    KEYGATE_DECISION_PORT: String(decisionPort),
    KEYGATE_DECISION_TRUSTED_PROXIES: '127.0.0.1'
  })
  t.equal(gw.workers.length, 2, 'the primary names two workers')
  t.equal(new Set([...gw.workers, gw.child.pid]).size, 3, 'each its own process, apart from the primary')

  // Every worker bootstrapped the same user and adopted the one signing key in Redis: a token
  // from one worker and a key registered at one are good at the other.
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201, 'a key is registered')
  // each request on a new connection: round-robin hands connections to the workers in turn
  const signedAnswers = async (): Promise<{ statuses: number[]; pids: Set<number> }> => {
    const statuses: number[] = []
    const pids = new Set<number>()
    for (let i = 0; i < 8; i++) {
      const res = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
      statuses.push(res.status)
      pids.add(await answeredBy(gw, res))
    }
    return { statuses, pids }
  }
  const first = await signedAnswers()
  t.same([...new Set(first.statuses)], [200], 'eight signed GETs: all 200')
  t.same([...first.pids].sort(), [...gw.workers].sort(), 'answered by both workers')

  // decision mode: every worker serves the decision port too (docs/decision-mode.md)
  const decisionPids = new Set<number>()
  for (let i = 0; i < 8; i++) {
    const target = `/v1/clients/?decision=${i}`
    const res = await send(`http://127.0.0.1:${decisionPort}`, '/decide/nginx', {
      headers: {
        ...signedHeaders({ keys, token, method: 'GET', target }),
        'x-original-method': 'GET',
        'x-original-uri': target,
        'x-forwarded-host': 'api.test',
        'x-original-content-length': '0'
      }
    })
    t.equal(res.status, 200, `decision ${i}: allowed`)
    t.equal(res.headers['x-gateway-user'], 'alice')
    decisionPids.add(await answeredBy(gw, res))
  }
  t.same([...decisionPids].sort(), [...gw.workers].sort(), 'decisions answered by both workers')

  await t.test('SIGHUP on the primary reloads the routes in every worker', async (t) => {
    file.write(routes(['  - prefix: /extra/', `    upstream: ${slow.url}`, '    auth: public', ''].join('\n')))
    t.equal((await send(gw.url, '/extra/x')).status, 404, 'before the reload: no such route')
    gw.child.kill('SIGHUP')
    const reloaded = await Promise.all(gw.workers.map(async (pid) =>
      await gw.waitForLine((l) => l.pid === pid && l.msg === 'routes reloaded', `of worker ${pid} reloading`)))
    t.equal(reloaded.length, 2, 'both workers logged "routes reloaded"')
    const pids = new Set<number>()
    for (let i = 0; i < 6; i++) {
      const res = await send(gw.url, '/extra/x')
      t.equal(res.status, 200, `the new route answers (request ${i + 1})`)
      pids.add(await answeredBy(gw, res))
    }
    t.equal(pids.size, 2, 'at both workers')
  })

  await t.test('a worker that dies is replaced, and service continues', async (t) => {
    const [victim, survivor] = gw.workers as [number, number]
    process.kill(victim, 'SIGKILL')
    const died = await gw.waitForLine((l) => l.msg === 'worker exited unexpectedly; starting a replacement' && l.worker === victim, 'about the dead worker')
    t.equal(died.signal, 'SIGKILL', 'the primary logs the worker and how it died')
    // at once when it had run 10 s, else after 250 ms (the test may get here sooner)
    t.ok(died.restartInMs === 0 || died.restartInMs === 250, `the primary says when it replaces it (${String(died.restartInMs)} ms)`)
    const replaced = await gw.waitForLine((l) => l.msg === 'replacement worker listening', 'about the replacement')
    t.not(replaced.worker, victim)

    // the replacement dies too, within 10 s of its start: a crash loop, so its own replacement waits
    process.kill(replaced.worker as number, 'SIGKILL')
    const again = await gw.waitForLine(
      (l) => l.msg === 'worker exited unexpectedly; starting a replacement' && l.worker === replaced.worker,
      'about the second death'
    )
    t.equal(
      again.restartInMs,
      Math.max(250, 2 * (died.restartInMs as number)),
      `a worker that dies soon after its start is replaced after a longer delay (${String(again.restartInMs)} ms)`
    )
    const second = await gw.waitForLine((l) => l.msg === 'replacement worker listening' && l.worker !== replaced.worker, 'about the second replacement')
    const replacement = second.worker as number
    t.ok(isRunning(replacement), 'the replacement runs')
    const after = await signedAnswers()
    t.same([...new Set(after.statuses)], [200], 'signed GETs: all 200')
    t.same([...after.pids].sort(), [survivor, replacement].sort(), 'answered by the survivor and the replacement')
    gw.workers = [survivor, replacement]
  })

  await t.test('SIGTERM: in-flight requests at every worker finish, then all exit 0', async (t) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 100 })
    t.teardown(() => { agent.destroy() })
    const { port } = new URL(gw.url)
    const get = async (path: string): Promise<{ status: number; pid: string | undefined }> => await new Promise((resolve) => {
      const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
        res.resume()
        res.on('end', () => { resolve({ status: res.statusCode ?? 0, pid: res.headers['x-request-id'] as string | undefined }) })
      })
      req.on('error', (err: NodeJS.ErrnoException) => { resolve({ status: -1, pid: err.code }) })
      req.end()
    })
    const before = slow.requests.length
    const inFlight = Array.from({ length: 40 }, async (_, i) => await get(`/slow/${i}`))
    for (let i = 0; i < 200 && slow.requests.length < before + 40; i++) await new Promise((resolve) => setTimeout(resolve, 20))
    t.equal(slow.requests.length - before, 40, 'all 40 reached the upstream and wait on it')

    gw.child.kill('SIGTERM')
    const results = await Promise.all(inFlight)
    t.same([...new Set(results.map((r) => r.status))], [200], 'all 40 in-flight requests completed with 200')
    const ids = new Set(results.map((r) => r.pid))
    const servedBy = new Set(gw.lines.filter((l) => l.msg === 'request' && ids.has(l.reqId as string)).map((l) => l.pid))
    t.equal(servedBy.size, 2, 'they were in flight at both workers')
    const { code } = await gw.exited
    t.equal(code, 0, 'the primary exits 0')
    t.ok(await gone(gw.workers), 'no worker outlives it')
    for (const pid of gw.workers) {
      t.ok(gw.lines.some((l) => l.pid === pid && /^SIGTERM: shutting down/.test(l.msg)), `worker ${pid} shut down gracefully`)
    }
  })
})

t.test('workers do not outlive a primary that is killed outright', async (t) => {
  const gw = await startCluster(t, await redisEnv(t, 'workers'))
  gw.child.kill('SIGKILL')
  await gw.exited
  t.ok(await gone(gw.workers), 'both workers exit when their primary is gone')
})

t.test('a worker that cannot start stops the whole gateway at start, as a single process would', async (t) => {
  const file = routeFile(t, 'routes:\n  - prefix: /x/\n    upstream: ftp://nope\n    auth: public\n')
  const gw = spawnGateway(t, { ...await redisEnv(t, 'workers'), KEYGATE_WORKERS: '2', KEYGATE_ROUTES: file.path })
  const { code } = await gw.exited
  t.equal(code, 1, 'exit code 1')
  t.match(gw.stderr(), /upstream/, "the worker's reason is printed")
  t.match(gw.stderr(), /keygate could not start: worker \d+ exited before it listened/)
  const workers = [...new Set(gw.lines.map((l) => l.pid))].filter((pid) => pid !== gw.child.pid)
  t.ok(await gone(workers), 'no worker is left behind')
})

t.test('the embedded store cannot be shared between processes', async (t) => {
  await t.test('an explicit KEYGATE_WORKERS above 1 without REDIS_URL is refused', async (t) => {
    const gw = spawnGateway(t, { KEYGATE_WORKERS: '2' })
    const { code } = await gw.exited
    t.equal(code, 1, 'exit code 1')
    t.match(gw.stderr(), /^configuration error: KEYGATE_WORKERS: 2 workers need Redis \(REDIS_URL/)
  })

  const single: Array<Record<string, string>> = [{ KEYGATE_WORKERS: 'auto' }, { NODE_ENV: 'production' }]
  for (const env of single) {
    await t.test(`${JSON.stringify(env)} without REDIS_URL: one process, with a warning`, async (t) => {
      const gw = spawnGateway(t, env)
      const listening = await gw.waitForLine((l) => /^Server listening at /.test(l.msg), 'saying it listens')
      t.equal(listening.pid, gw.child.pid, 'the process started serves itself: no cluster')
      const warning = await gw.waitForLine((l) => /^KEYGATE_WORKERS=auto: one process only/.test(l.msg), 'saying why it runs one process')
      t.equal(warning.level, 40, 'and warns why it runs one process')
      const url = /(http:\/\/\S+)/.exec(listening.msg)?.[1] ?? ''
      t.equal((await send(url, '/healthz')).status, 200)
      gw.child.kill('SIGTERM')
      t.equal((await gw.exited).code, 0)
    })
  }
})

t.test('KEYGATE_WORKERS values', async (t) => {
  const redisUrl = 'redis://r:6379'
  t.same(resolveWorkers(undefined, undefined, true, 8), { count: 1, requested: 1 }, 'unset: one process')
  t.same(resolveWorkers(undefined, 'production', true, 8), { count: 8, requested: 'auto' }, 'unset with NODE_ENV=production: one per core')
  t.same(resolveWorkers('auto', undefined, true, 8), { count: 8, requested: 'auto' })
  t.same(resolveWorkers('auto', undefined, false, 8), { count: 1, requested: 'auto' }, 'auto on the embedded store: one')
  t.same(resolveWorkers('3', 'production', true, 8), { count: 3, requested: 3 }, 'a number wins over NODE_ENV')
  t.same(resolveWorkers('1', undefined, false, 8), { count: 1, requested: 1 })
  t.equal(loadConfig({ KEYGATE_WORKERS: '4', REDIS_URL: redisUrl }).workers.count, 4)
  t.equal(loadConfig({}).workers.count, 1, 'the default outside production')
  t.equal(
    loadConfig({ KEYGATE_WORKERS: '3', KEYGATE_REDIS_SENTINELS: 's1:26379', KEYGATE_REDIS_SENTINEL_MASTER: 'm' }).workers.count,
    3,
    'Sentinel is Redis too'
  )
  t.equal(loadConfig({ KEYGATE_WORKERS: '3', KEYGATE_REDIS_CLUSTER_NODES: 'n1:6379' }).workers.count, 3, 'and a Cluster')
  t.equal(
    loadConfig({ KEYGATE_WORKERS: 'auto', KEYGATE_REDIS_CLUSTER_NODES: 'n1:6379' }).workers.count,
    Math.min(availableParallelism(), MAX_WORKERS),
    'auto on a Cluster: one per core'
  )
  // the primary serves the one metrics port (test/system/metrics-workers.test.ts)
  const withMetrics = loadConfig({ KEYGATE_WORKERS: '2', REDIS_URL: redisUrl, KEYGATE_METRICS_PORT: '9464' })
  t.same([withMetrics.workers.count, withMetrics.metrics.port], [2, 9464], 'workers and a metrics port go together')
  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ KEYGATE_WORKERS: '0' }, /^KEYGATE_WORKERS: "0" is not allowed/],
    [{ KEYGATE_WORKERS: '1.5', REDIS_URL: redisUrl }, /^KEYGATE_WORKERS: "1.5" is not allowed/],
    [{ KEYGATE_WORKERS: 'all', REDIS_URL: redisUrl }, /^KEYGATE_WORKERS: "all" is not allowed/],
    [{ KEYGATE_WORKERS: '1000', REDIS_URL: redisUrl }, /^KEYGATE_WORKERS: "1000" is not allowed: at most 256/],
    [{ KEYGATE_WORKERS: '2' }, /^KEYGATE_WORKERS: 2 workers need Redis \(REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES\)/]
  ]
  for (const [env, message] of refused) t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
})

t.test('a crash loop backs off: at once, then 250 ms doubling to 30 s', async (t) => {
  t.same([0, 1, 2, 3, 4, 8, 20].map(restartDelayMs), [0, 250, 500, 1000, 2000, RESTART_MAX_DELAY_MS, RESTART_MAX_DELAY_MS])
  t.equal(RESTART_MAX_DELAY_MS, 30_000)
})
