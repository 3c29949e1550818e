// KEYGATE_WORKERS=2 with KEYGATE_ADMIN_PORT: the primary serves the admin API for the whole
// process tree, on a store connection of its own. A reload through it reaches every worker; a bad
// file leaves every worker's routes in force; a revocation through it is refused by every worker;
// the usage it reports is what every worker counted.
// Real processes (main.ts), the real Redis, real sockets; which worker answered each request is
// read from its access-log line.
import { createServer, type AddressInfo } from 'node:net'
import t from 'tap'
import { admin, newAdminToken } from '../helpers/admin.js'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { answeredBy, gone, redisEnv, spawnGateway, startCluster } from '../helpers/process-tree.js'
import { freePort } from '../helpers/redis.js'
import { routeFile } from '../helpers/routes.js'
import { login, registerKey, sendSigned, startUpstreamStub } from '../helpers/stack.js'

const routesYaml = (upstream: string, extra = ''): string =>
  `routes:\n  - { prefix: /v1/clients/, upstream: "${upstream}", auth: signed, methods: [GET, POST],\n` +
  `      rateLimits: [{ by: key, limit: 1000, window: 1h }] }\n${extra}`

t.test('the primary serves the admin API; reloads and revocations reach every worker', async (t) => {
  const upstream = await startUpstreamStub(t)
  const file = routeFile(t, routesYaml(upstream))
  const adminPort = await freePort()
  const token = newAdminToken()
  const gw = await startCluster(t, {
    ...await redisEnv(t, 'admin-workers'),
    UPSTREAM_URL: upstream,
    KEYGATE_ROUTES: file.path,
    KEYGATE_ADMIN_PORT: String(adminPort),
    KEYGATE_ADMIN_TOKEN: token
  })
  const adminUrl = `http://127.0.0.1:${adminPort}`
  const api = { adminUrl, token }
  const announced = await gw.waitForLine((l) => /^admin API at /.test(l.msg), 'naming the admin API')
  t.equal(announced.pid, gw.child.pid, 'the primary holds the admin API')
  const startup = await gw.waitForLine((l) => l.startup !== undefined, 'the startup line')
  t.match(startup, { pid: gw.child.pid, startup: { adminPort, workers: 2 } })
  t.match(startup.msg, new RegExp(`admin on port ${adminPort}\\)$`))
  t.equal((await send(adminUrl, '/v1/users')).status, 401, 'the token is required here too')

  /** `n` requests on new connections (node:cluster hands them out in turn): every status, per worker */
  const spread = async (n: number, request: () => Promise<RawResponse>): Promise<Map<number, number[]>> => {
    const byWorker = new Map<number, number[]>()
    for (let i = 0; i < n; i++) {
      const res = await request()
      const pid = await answeredBy(gw, res)
      byWorker.set(pid, [...byWorker.get(pid) ?? [], res.status])
    }
    return byWorker
  }
  /** the statuses every worker gave, once each; and whether both workers answered */
  const statuses = (byWorker: Map<number, number[]>): number[] => [...new Set([...byWorker.values()].flat())]
  const both = (byWorker: Map<number, number[]>): boolean => byWorker.size === 2

  await t.test('routes: the table in force, a reload by every worker, a bad file refused by all', async (t) => {
    t.match((await admin(api, 'GET', '/v1/routes')).json(), { file: file.path, items: [{ prefix: '/v1/clients/' }] })
    const before = await spread(10, async () => await send(gw.url, '/fresh'))
    t.same(statuses(before), [404], '/fresh is no route yet')

    file.write(routesYaml(upstream, `  - { name: fresh, path: /fresh, upstream: "${upstream}", auth: public, rewrite: /healthz }\n`))
    const reloaded = await admin(api, 'POST', '/v1/routes/reload')
    t.equal(reloaded.status, 200, reloaded.text)
    t.match(reloaded.json(), { file: file.path, workers: 2, items: [{ prefix: '/v1/clients/' }, { name: 'fresh', prefix: '/fresh' }] })
    // the answer came once both workers had reloaded: no waiting here
    const after = await spread(12, async () => await send(gw.url, '/fresh'))
    t.ok(both(after), 'both workers answered')
    t.same(statuses(after), [200], 'every worker serves the new route at once')
    t.equal(gw.lines.filter((l) => l.msg === 'routes reloaded' && gw.workers.includes(l.pid)).length, 2, 'each worker logged its reload')

    file.write('routes:\n  - { prefix: /broken/, upstream: "ftp://x", auth: public }\n')
    const refused = await admin(api, 'POST', '/v1/routes/reload')
    t.equal(refused.status, 422)
    t.match(refused.json(), { code: 'ROUTE_FILE_INVALID', file: file.path, problems: [/routes\[0\]\.upstream/] })
    const still = await spread(12, async () => await send(gw.url, '/fresh'))
    t.ok(both(still))
    t.same(statuses(still), [200], 'every worker keeps the routes in force')
    t.match((await admin(api, 'GET', '/v1/routes')).json(), { items: [{ prefix: '/v1/clients/' }, { name: 'fresh' }] })
    const audit = gw.lines.filter((l) => l.audit !== undefined)
    t.match(audit.map((l) => [l.pid, (l.audit as { outcome: string }).outcome]), [[gw.child.pid, 'reloaded'], [gw.child.pid, 'invalid']],
      'the primary writes the audit lines')
  })

  await t.test('users and keys on the primary\'s own store connection; a revocation reaches both workers', async (t) => {
    t.match((await admin(api, 'GET', '/v1/users')).json(), { items: [{ username: 'alice', activeKeys: 0 }] }, 'the bootstrapped user')
    t.equal((await admin(api, 'PUT', '/v1/users/erin', { body: { password: 'a password of erin' } })).status, 201)
    const erin = await login(gw.url, 'erin', 'a password of erin')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, erin, keys)).status, 201)
    const signedGet = async (): Promise<RawResponse> => await sendSigned(gw.url, { keys, token: erin, method: 'GET', target: '/v1/clients/' })
    const served = await spread(8, signedGet)
    t.ok(both(served))
    t.same(statuses(served), [200], 'both workers serve the key (and have it cached)')
    t.match((await admin(api, 'GET', '/v1/keys?user=erin')).json(), { items: [{ apiKey: keys.apiKey, status: 'active' }] })
    // the primary loads no routes: it reads the workers' limits, and the counts in the shared store
    t.match((await admin(api, 'GET', `/v1/usage?key=${keys.apiKey}`)).json(),
      { key: keys.apiKey, items: [{ by: 'key', limit: 1000, window: '1h', used: 8, remaining: 992 }] },
      'the usage of the key: the 8 requests both workers counted')

    t.equal((await admin(api, 'DELETE', `/v1/keys/${keys.apiKey}`)).status, 200)
    const since = Date.now()
    let status = 200
    while (status === 200 && Date.now() - since < 1000) status = (await signedGet()).status
    t.equal(status, 401, `refused ${Date.now() - since} ms after the admin API answered`)
    const refused = await spread(8, signedGet)
    t.ok(both(refused))
    t.same(statuses(refused), [401], 'by both workers')
  })

  await t.test('SIGTERM: the primary closes the admin API and exits 0 with its workers', async (t) => {
    gw.child.kill('SIGTERM')
    t.equal((await gw.exited).code, 0)
    t.ok(await gone(gw.workers), 'no worker outlives it')
    await t.rejects(send(adminUrl, '/v1/users'), { code: 'ECONNREFUSED' }, 'the admin port is closed')
    t.notOk(JSON.stringify(gw.lines).includes(token), 'the admin token is in no log line')
  })
})

t.test('an admin port that cannot be had stops the start, workers and all', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { blocker.close() })
  const taken = (blocker.address() as AddressInfo).port
  const token = newAdminToken()
  const gw = spawnGateway(t, { ...await redisEnv(t, 'admin-workers'), KEYGATE_WORKERS: '2', KEYGATE_ADMIN_PORT: String(taken), KEYGATE_ADMIN_TOKEN: token })
  const { code } = await gw.exited
  t.equal(code, 1, 'exit code 1')
  t.match(gw.stderr(), /^keygate could not start: .*EADDRINUSE/m)
  const workers = [...new Set(gw.lines.map((l) => l.pid))].filter((pid) => pid !== gw.child.pid)
  t.equal(workers.length, 2, 'both workers had started')
  t.ok(await gone(workers), 'no worker is left behind')
  t.notOk(gw.stderr().includes(token) || JSON.stringify(gw.lines).includes(token), 'the token is not printed')
})
