// Reloading routes under load: valid files take effect for new requests, invalid ones are refused
// with the old routes kept, and no request fails on the way. Also SIGHUP and the file watch.
import { Agent, request } from 'node:http'
import { spawn } from 'node:child_process'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { loggerOptions } from '../../../../gateway/src/app.js'
import { compiled } from '../../../helpers/build.js'
import { send } from '../../../helpers/http.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { routeFile } from '../../../helpers/routes.js'
import { startTestGateway, testConfig } from '../../../helpers/stack.js'

const routesTo = (upstream: string): string => `routes:\n  - prefix: /svc/\n    upstream: ${upstream}\n    auth: public\n`
const INVALID = 'routes:\n  - prefix: /svc/\n    upstream: ftp://nowhere\n    auth: public\n'

async function get (agent: Agent, url: string, path: string): Promise<number> {
  const { hostname, port } = new URL(url)
  return await new Promise((resolve) => {
    const req = request({ host: hostname, port, path, agent }, (res) => {
      res.resume()
      res.on('end', () => { resolve(res.statusCode ?? 0) })
    })
    req.on('error', () => { resolve(-1) })
    req.end()
  })
}

t.test('reloads under concurrent traffic lose no request', async (t) => {
  const a = await startRecorder(t)
  const b = await startRecorder(t)
  const file = routeFile(t, routesTo(a.url))
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config: testConfig({ routesFile: file.path }) })
  const agent = new Agent({ keepAlive: true, maxSockets: 16 })
  t.teardown(() => { agent.destroy() })

  let running = true
  const statuses = new Map<number, number>()
  const worker = async (): Promise<void> => {
    // eslint-disable-next-line no-unmodified-loop-condition -- the test sets it to false when it is done
    while (running) {
      const status = await get(agent, gw.url, '/svc/x')
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }
  }
  const workers = Array.from({ length: 16 }, worker)

  const results: boolean[] = []
  for (let round = 0; round < 10; round++) {
    file.write(routesTo(round % 2 === 0 ? b.url : a.url))
    results.push((await gw.app.keygate.routes.reload()).ok)
    file.write(INVALID)
    results.push((await gw.app.keygate.routes.reload()).ok)
    await new Promise((resolve) => setTimeout(resolve, 60))
  }
  running = false
  await Promise.all(workers)

  const sent = [...statuses.values()].reduce((x, y) => x + y, 0)
  t.comment(`${sent} requests during 20 reloads: ${JSON.stringify(Object.fromEntries(statuses))}`)
  t.ok(sent > 200, 'there was real traffic')
  t.same([...statuses.keys()], [200], 'every request succeeded')
  t.equal(a.requests.length + b.requests.length, sent, 'and each reached exactly one upstream')
  t.ok(a.requests.length > 0 && b.requests.length > 0, 'both upstreams served while the routes changed')
  t.same(results, Array.from({ length: 20 }, (_, i) => i % 2 === 0), 'valid files were taken, invalid ones refused')

  // The last valid file routed to a (round 9); the invalid one after it changed nothing.
  const before = a.requests.length
  t.equal(await get(agent, gw.url, '/svc/after'), 200)
  t.equal(a.requests.length, before + 1)
})

t.test('a watched file reloads on change', async (t) => {
  const a = await startRecorder(t)
  const b = await startRecorder(t)
  const file = routeFile(t, routesTo(a.url))
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: 'http://unused.invalid',
    config: testConfig({ routesFile: file.path, watchRoutes: true })
  })
  await send(gw.url, '/svc/1')
  t.equal(a.requests.length, 1)
  file.write(routesTo(b.url))
  // Wait for the watcher (an event, then a 100 ms debounce), polling with a bound.
  for (let i = 0; i < 100 && new URL(gw.app.keygate.routes.current.routes[0]!.upstream).origin !== b.url; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  await send(gw.url, '/svc/2')
  t.equal(b.requests.length, 1, 'the changed file is in force')
})

t.test('SIGHUP reloads a running gateway; a bad file keeps the old routes', async (t) => {
  const a = await startRecorder(t)
  const b = await startRecorder(t)
  const file = routeFile(t, routesTo(a.url))
  const root = fileURLToPath(new URL('../../../..', import.meta.url))
  const child = spawn(process.execPath, [await compiled('gateway/src/main.ts')], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', PORT: '0', KEYGATE_ROUTES: file.path, LOG_LEVEL: 'info' }
  })
  t.teardown(() => { child.kill('SIGKILL') })
  let output = ''
  const waitFor = async (pattern: RegExp): Promise<RegExpExecArray> => await new Promise((resolve, reject) => {
    const check = (): void => {
      const match = pattern.exec(output)
      if (match !== null) { child.stdout.off('data', onData); resolve(match) }
    }
    const onData = (chunk: Buffer): void => { output += chunk.toString(); check() }
    child.stdout.on('data', onData)
    child.once('exit', (code) => { reject(new Error(`gateway exited with ${code}`)) })
    check()
  })
  const url = (await waitFor(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/))[1]!
  await send(url, '/svc/1')
  t.equal(a.requests.length, 1)

  file.write(INVALID)
  child.kill('SIGHUP')
  await waitFor(/configuration reload refused/)
  await send(url, '/svc/2')
  t.equal(a.requests.length, 2, 'the bad file was refused; the old route serves')

  file.write(routesTo(b.url))
  child.kill('SIGHUP')
  await waitFor(/routes reloaded/)
  await send(url, '/svc/3')
  t.equal(b.requests.length, 1, 'the new route serves')
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  t.equal(await exited, 0)
})

t.test('a gateway does not start on a bad route file, and says why', async (t) => {
  const file = routeFile(t, INVALID)
  const root = fileURLToPath(new URL('../../../..', import.meta.url))
  const child = spawn(process.execPath, [await compiled('gateway/src/main.ts')], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', PORT: '0', KEYGATE_ROUTES: file.path }
  })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const code = await new Promise((resolve) => child.on('exit', resolve))
  t.equal(code, 1)
  t.equal(stderr, 'configuration error: routes.yaml: routes[0].upstream: "ftp://nowhere" is not an http(s) URL\n')
})

t.test('tier warnings are logged (warn) at start and on reload, and stop neither; a rewrite that glues segments is refused', async (t) => {
  const upstream = await startRecorder(t)
  const aliasing = `routes:
  - { name: clients, prefix: /v1/clients/, upstream: ${upstream.url}, auth: signed }
  - { name: reports, prefix: /reports/, upstream: ${upstream.url}, auth: bearer, rewrite: /v1/clients/ }
`
  const file = routeFile(t, aliasing)
  const lines: Array<{ level: number; msg: string; route?: string; stronger?: string }> = []
  const stream = new Writable({
    write (chunk: Buffer, _enc, done) { lines.push(...chunk.toString().split('\n').filter(Boolean).map((l) => JSON.parse(l))); done() }
  })
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: 'http://unused.invalid',
    config: testConfig({ routesFile: file.path }),
    logger: { ...loggerOptions('warn') as object, stream }
  })
  const warnings = (): typeof lines => lines.filter((l) => l.msg.startsWith('route warning: '))
  t.match(warnings(), [{ level: 40, route: 'reports', stronger: 'clients', msg: /^route warning: reports \(bearer\) forwards into the path space of clients \(signed\)/ }],
    'at start: one warning, naming both routes')
  t.equal(gw.app.keygate.routes.current.routes.length, 2, 'the routes are in force all the same')

  file.write(aliasing.replace('auth: bearer', 'auth: signed'))
  t.equal((await gw.app.keygate.routes.reload()).ok, true)
  t.equal(warnings().length, 1, 'a reload without the alias: nothing more')
  file.write(aliasing)
  t.equal((await gw.app.keygate.routes.reload()).ok, true, 'a reload with it is taken')
  t.equal(warnings().length, 2, 'and warned of again')

  file.write(aliasing.replace('rewrite: /v1/clients/', 'rewrite: /v1/clients'))
  const glued = await gw.app.keygate.routes.reload()
  t.equal(glued.ok, false)
  t.match(!glued.ok && glued.error.message, /routes\[1\]\.rewrite: "\/v1\/clients" glues segments/)

  // a route opting out of the seed body rule: logged at reload too, naming the route
  file.write(aliasing.replace('auth: signed }', 'auth: signed, seedBodyBoundary: unchecked }'))
  t.equal((await gw.app.keygate.routes.reload()).ok, true)
  t.match(warnings().at(-1), { level: 40, route: 'clients', msg: /^route warning: clients \(signed\) has seedBodyBoundary: unchecked/ })
})
