// The process around the gateway: slowloris is cut off, and SIGTERM lets every request in flight
// finish, refuses new ones with 503, and exits within the grace period.
import { spawn } from 'node:child_process'
import { Agent, request } from 'node:http'
import { connect } from 'node:net'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { compiled } from '../helpers/build.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { startTestGateway, testConfig } from '../helpers/stack.js'

const root = fileURLToPath(new URL('../..', import.meta.url))

t.test('slowloris: a client that drips its headers is cut off at the headers timeout', async (t) => {
  const config = testConfig({ server: { ...testConfig().server, headersTimeoutMs: 500, requestTimeoutMs: 1000 } })
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config })
  const { port } = new URL(gw.url)
  const started = performance.now()
  const answer = await new Promise<string>((resolve) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    socket.on('data', (chunk) => { text += chunk.toString() })
    socket.on('close', () => { clearInterval(drip); resolve(text) })
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n')
    // One header byte every 100 ms: never done, always "active".
    const drip = setInterval(() => { if (!socket.destroyed) socket.write('X') }, 100)
    setTimeout(() => { socket.destroy() }, 10_000).unref()
  })
  const ms = performance.now() - started
  t.comment(`cut off after ${ms.toFixed(0)} ms`)
  t.match(answer, /^HTTP\/1\.1 408/, 'answered 408 Request Timeout')
  t.match(answer, /"code":"REQUEST_TIMEOUT"/)
  t.ok(ms < 3000, `within the 500 ms headers timeout plus the 1 s check interval (${ms.toFixed(0)} ms)`)
})

t.test('SIGTERM with 500 requests in flight: all 500 complete, new requests are refused, exit within the grace period', async (t) => {
  const slow = await startRecorder(t, { delayMs: 700 })
  const file = routeFile(t, `routes:\n  - prefix: /slow/\n    upstream: ${slow.url}\n    auth: public\n`)
  const child = spawn(process.execPath, [await compiled('gateway/src/main.ts')], {
    cwd: root,
    // 500 connections to the upstream: all 500 requests are at the upstream at once (with the
    // default 128 connections and 128 waiting, the rest would be refused 503 UPSTREAM_BUSY)
    env: { PATH: process.env.PATH ?? '', PORT: '0', KEYGATE_ROUTES: file.path, KEYGATE_SHUTDOWN_GRACE_MS: '8000', KEYGATE_UPSTREAM_CONNECTIONS: '500' }
  })
  t.teardown(() => { child.kill('SIGKILL') })
  let stdout = ''
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)
      if (match !== null) resolve(match[1] as string)
    })
    child.once('exit', (code) => { reject(new Error(`exited early: ${code}`)) })
  })
  const { port } = new URL(url)
  const agent = new Agent({ keepAlive: true, maxSockets: 600 })
  t.teardown(() => { agent.destroy() })
  const get = async (path: string): Promise<{ status: number; body: string }> => await new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = ''
      res.on('data', (c: Buffer) => { body += c.toString() })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }) })
    })
    req.on('error', (err: NodeJS.ErrnoException) => { resolve({ status: -1, body: err.code ?? err.message }) })
    req.end()
  })

  // A kept-alive connection that will ask again after the signal.
  t.equal((await get('/healthz')).status, 200)
  const inFlight = Array.from({ length: 500 }, async (_, i) => await get(`/slow/${i}`))
  for (let i = 0; i < 200 && slow.requests.length < 500; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(slow.requests.length, 500, 'all 500 reached the upstream and are waiting on it')

  const exited = new Promise<{ code: number | null; ms: number }>((resolve) => {
    const started = performance.now()
    child.once('exit', (code) => { resolve({ code, ms: performance.now() - started }) })
  })
  child.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 100))
  const late = await get('/healthz')
  t.ok(late.status === 503 || late.status === -1, `a new request after SIGTERM: ${late.status === 503 ? '503' : 'refused connection'}`)
  if (late.status === 503) t.match(late.body, /"code":"SHUTTING_DOWN"/)

  const results = await Promise.all(inFlight)
  t.same([...new Set(results.map((r) => r.status))], [200], `all 500 in-flight requests completed with 200 (${results.filter((r) => r.status === 200).length})`)
  const { code, ms } = await exited
  t.equal(code, 0, 'exit code 0')
  t.ok(ms < 8000, `exited ${ms.toFixed(0)} ms after SIGTERM, within the 8 s grace period`)
})

t.test('an idle keep-alive connection is closed after the keep-alive timeout', async (t) => {
  const config = testConfig({ server: { ...testConfig().server, keepAliveTimeoutMs: 300 } })
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config })
  const { port } = new URL(gw.url)
  const socket = connect(Number(port), '127.0.0.1')
  let answered = 0
  let answeredAt = 0
  socket.on('data', () => { answered++; answeredAt = performance.now() })
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  await new Promise<void>((resolve) => {
    socket.on('close', () => { resolve() })
    setTimeout(() => { socket.destroy() }, 5000).unref()
  })
  const idleMs = performance.now() - answeredAt
  t.ok(answered > 0, 'the request was answered on the kept-alive connection')
  t.ok(idleMs >= 250 && idleMs < 3000, `then the idle connection was closed after ${idleMs.toFixed(0)} ms (timeout 300 ms)`)
})
