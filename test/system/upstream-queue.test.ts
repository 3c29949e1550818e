// The upstream queue (proxy/forwarder.ts), against a running gateway on real sockets: at most
// KEYGATE_UPSTREAM_CONNECTIONS requests are sent to an upstream at once, at most
// KEYGATE_UPSTREAM_MAX_PENDING wait, and any more get 503 UPSTREAM_BUSY at once; a waiting request
// whose client goes away is never sent; an upstream that accepts no connection fails within
// KEYGATE_UPSTREAM_CONNECT_TIMEOUT_MS; and memory stays bounded under 10,000 requests.
import { spawn, type ChildProcess } from 'node:child_process'
import { Agent, request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { route, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { rawRequest, send, sendHalfClosed } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { parse } from '../helpers/prometheus.js'
import { rssOf, startMeasuredGateway } from '../helpers/process-tree.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway, type GatewayHandle } from '../helpers/stack.js'

const DEFAULTS = { bodyLimit: 1024 * 1024, timeoutMs: 30_000 }
const publicRoute = (upstream: string): RouteConfig[] => [route({ prefix: '/slow/', upstream, auth: 'public' }, DEFAULTS)]
const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

/** The upstream queue's two series for one upstream, from the gateway's own scrape. */
async function queueMetrics (gw: GatewayHandle, upstream: string): Promise<{ pending: number; busy: number }> {
  const samples = parse((await gw.app.keygate.metrics.scrape()).body)
  const value = (name: string): number => samples.find((s) => s.name === name && s.labels.upstream === upstream)?.value ?? 0
  return { pending: value('keygate_upstream_pending_requests'), busy: value('keygate_upstream_busy_total') }
}

async function until (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await sleep(10)
  }
}

t.test('the figure: 40 at once to an upstream that takes 2 s, 4 connections and 8 waiting: 12 served, 28 refused at once', async (t) => {
  const upstream = await startRecorder(t, { delayMs: 2000 })
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: upstream.url,
    routes: publicRoute,
    config: { upstreams: { connections: 4, maxPending: 8, connectTimeoutMs: 5000 } }
  })
  const started = performance.now()
  let answered = 0
  const results = Array.from({ length: 40 }, async (_, i) => {
    const res = await send(gw.url, `/slow/${i}`)
    answered++
    return { res, ms: performance.now() - started }
  })
  // the refusals come at once; the served ones only after the upstream's 2 s
  await until('28 requests are answered', () => answered >= 28, 1900)
  t.same(await queueMetrics(gw, upstream.url), { pending: 8, busy: 28 }, 'meanwhile: 8 waiting, 28 refused (metrics)')

  const all = await Promise.all(results)
  const ok = all.filter(({ res }) => res.status === 200)
  const busy = all.filter(({ res }) => res.status === 503)
  t.equal(ok.length, 12, '12 served: 4 at once and the 8 that waited')
  t.equal(busy.length, 28, 'the other 28 refused')
  for (const { res } of busy) {
    t.match(res.headers['content-type'], /^application\/problem\+json/)
    t.equal(res.json().code, 'UPSTREAM_BUSY')
    t.equal(res.headers['retry-after'], '1')
  }
  const slowestRefusal = Math.max(...busy.map(({ ms }) => ms))
  const served = ok.map(({ ms }) => ms).sort((a, b) => a - b)
  const round = (from: number): string => served.slice(from, from + 4).map((ms) => ms.toFixed(0)).join(', ')
  t.comment(`refusals: all within ${slowestRefusal.toFixed(0)} ms; served: ${round(0)} ms (sent at once), ` +
    `${round(4)} ms (waited one round), ${round(8)} ms (waited two)`)
  t.ok(slowestRefusal < 1000, `every refusal came well before the upstream's 2 s (slowest: ${slowestRefusal.toFixed(0)} ms)`)
  t.ok((served[4] ?? 0) > 3000, 'the 8 that waited were sent as connections freed, 4 a round later and 4 two rounds later')
  t.equal(upstream.requests.length, 12, 'the upstream received the 12 served, and nothing of the refused')
  t.same(await queueMetrics(gw, upstream.url), { pending: 0, busy: 28 }, 'afterwards: nothing waiting')
})

/** A request on a connection of its own, written and left open: the caller closes it as it likes. */
function openRequest (url: string, bytes: string): { socket: Socket; answer: Promise<string> } {
  const socket = connect(Number(new URL(url).port), '127.0.0.1')
  let text = ''
  socket.on('data', (chunk: Buffer) => { text += chunk.toString('latin1') })
  const answer = new Promise<string>((resolve) => {
    socket.on('error', () => {})
    socket.on('close', () => { resolve(text) })
  })
  socket.write(bytes)
  return { socket, answer }
}

t.test('a request whose client goes away while it waits for a connection is never sent', async (t) => {
  const upstream = await startRecorder(t, { hold: true })
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: upstream.url,
    config: { upstreams: { connections: 1, maxPending: 4, connectTimeoutMs: 5000 } }
  })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)
  const signed = (method: string, body?: string): string => rawRequest(method, '/v1/clients/', {
    ...signedHeaders({ keys, token, method, target: '/v1/clients/', body }),
    ...(body !== undefined && { 'content-type': 'application/json' })
  }, body)
  const pending = async (): Promise<number> => (await queueMetrics(gw, upstream.url)).pending

  // A takes the one connection and holds it.
  const a = openRequest(gw.url, signed('GET'))
  await until('A reaches the upstream', () => upstream.requests.length === 1)

  // B's POSTs wait for it, and their clients leave in three ways.
  const closes: Array<[string, (socket: Socket) => void]> = [
    ['closes its connection', (socket) => { socket.destroy() }],
    ['resets its connection', (socket) => { socket.resetAndDestroy() }]
  ]
  for (const [how, close] of closes) {
    const b = openRequest(gw.url, signed('POST', JSON.stringify({ b: how })))
    await until('B waits', async () => await pending() === 1)
    close(b.socket)
    await until('B has left the queue', async () => await pending() === 0)
    t.pass(`a waiting client that ${how}: its request leaves the queue`)
  }
  // One that only half-closes (FIN) may be gone too: its request leaves the queue unsent, and it
  // reads why.
  const waiting = openRequest(gw.url, signed('POST', JSON.stringify({ b: 'half-closes while waiting' })))
  await until('B waits', async () => await pending() === 1)
  waiting.socket.end()
  const whileWaiting = await waiting.answer
  t.match(whileWaiting, /^HTTP\/1\.1 503 /, 'a waiting client that half-closes: 503')
  t.match(whileWaiting, /"code":"UPSTREAM_BUSY"/)
  t.match(whileWaiting, /closed its side of the connection while the request waited; the request was not sent/)
  t.equal(await pending(), 0)
  // and one that had half-closed before its turn to wait came is never queued
  const answer = await sendHalfClosed(gw.url, signed('POST', JSON.stringify({ b: 'had half-closed' })))
  t.equal(answer.status, 503, 'a client that had half-closed: 503 rather than a place in the queue')
  t.match(answer.text, /"code":"UPSTREAM_BUSY"/)
  t.match(answer.text, /the request was not sent/)
  t.ok(answer.closedByServer, 'and then the gateway closes the connection')

  // C waits and stays: it is sent once A's connection frees.
  const c = openRequest(gw.url, signed('POST', JSON.stringify({ c: 'stays' })))
  await until('C waits', async () => await pending() === 1)
  upstream.release()
  await until('C reaches the upstream', () => upstream.requests.length === 2)
  await sleep(200)
  c.socket.end()
  a.socket.end()
  t.match(await a.answer, /^HTTP\/1\.1 200/, 'A is answered')
  t.match(await c.answer, /^HTTP\/1\.1 200/, 'C is answered')
  t.same(upstream.requests.map((r) => `${r.method} ${r.body.toString()}`), ['GET ', 'POST {"c":"stays"}'],
    'the upstream received A and C, and none of the POSTs whose clients left')
  // A closed connection shows a FIN first, like a half-closed one: all three were answered 503
  // (one into the void); the reset one left without an answer.
  t.same(await queueMetrics(gw, upstream.url), { pending: 0, busy: 3 }, 'the closed and the two half-closed ones count as refused busy')
})

/**
 * A listening port that accepts no connection: a child process listens with a backlog of 1 and is
 * stopped (SIGSTOP), and the accept queue is filled, so the kernel drops every further SYN.
 */
async function unansweringPort (t: { teardown: (fn: () => unknown) => void }): Promise<number> {
  const child: ChildProcess = spawn(process.execPath, ['-e',
    "require('net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 1 }, function () { console.log(this.address().port) })"])
  const fillers: Socket[] = []
  t.teardown(() => {
    child.kill('SIGKILL')
    for (const socket of fillers) socket.destroy()
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.once('data', (chunk: Buffer) => { resolve(Number(chunk.toString().trim())) })
    child.once('exit', (code) => { reject(new Error(`the listener exited: ${code}`)) })
  })
  child.kill('SIGSTOP')
  // Connect until a connection no longer completes: the accept queue is full.
  for (let i = 0; i < 64; i++) {
    const socket = connect(port, '127.0.0.1')
    socket.on('error', () => {})
    fillers.push(socket)
    const connected = await new Promise<boolean>((resolve) => {
      socket.once('connect', () => { resolve(true) })
      setTimeout(() => { resolve(false) }, 300)
    })
    if (!connected) return port
  }
  throw new Error('the accept queue never filled')
}

t.test('an upstream that accepts no connection: 502 UPSTREAM_UNAVAILABLE within the connect timeout', async (t) => {
  const port = await unansweringPort(t)
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: `http://127.0.0.1:${port}`,
    routes: publicRoute,
    config: { upstreams: { connections: 4, maxPending: 8, connectTimeoutMs: 300 } }
  })
  const started = performance.now()
  const res = await send(gw.url, '/slow/x')
  const ms = performance.now() - started
  t.comment(`answered after ${ms.toFixed(0)} ms (connect timeout 300 ms)`)
  t.equal(res.status, 502)
  t.equal(res.json().code, 'UPSTREAM_UNAVAILABLE')
  t.match(res.json().detail, /did not accept a connection in time; the request was not sent/)
  t.equal(res.headers['retry-after'], '1')
  t.ok(ms >= 250 && ms < 5000, `after the 300 ms connect timeout, not the route's 30 s (${ms.toFixed(0)} ms)`)
})

t.test('memory stays bounded: 10,000 requests with 16 KiB bodies, 500 at a time, against 2 connections and 16 waiting', async (t) => {
  const upstream = await startRecorder(t, { delayMs: 200 })
  const file = routeFile(t, `routes:\n  - prefix: /slow/\n    upstream: ${upstream.url}\n    auth: public\n`)
  const { port, pid } = await startMeasuredGateway(t, {
    LOG_LEVEL: 'warn', // no line per request: the figure is the queue's, not the log's
    KEYGATE_ROUTES: file.path,
    KEYGATE_UPSTREAM_CONNECTIONS: '2',
    KEYGATE_UPSTREAM_MAX_PENDING: '16',
    // a saturated gateway on a shared machine must not cut clients off as slow: not what is measured
    KEYGATE_HEADERS_TIMEOUT_MS: '60000',
    KEYGATE_REQUEST_TIMEOUT_MS: '60000'
  })
  const agent = new Agent({ keepAlive: true, maxSockets: 500 })
  t.teardown(() => { agent.destroy() })
  const body = Buffer.alloc(16 * 1024, 'k')
  const post = async (i: number): Promise<number> => await new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: `/slow/${i}`, agent, headers: { 'content-length': body.length } }, (res) => {
      res.resume()
      res.on('end', () => { resolve(res.statusCode ?? 0) })
    })
    req.on('error', () => { resolve(-1) })
    req.end(body)
  })
  const run = async (total: number): Promise<Map<number, number>> => {
    const statuses = new Map<number, number>()
    let next = 0
    await Promise.all(Array.from({ length: 500 }, async () => {
      while (next < total) {
        const status = await post(next++)
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
      }
    }))
    return statuses
  }

  await run(1000) // warm-up: the connections, the code paths, the heap at its working size
  await sleep(500)
  const before = rssOf(pid)
  let peak = before
  const sampler = setInterval(() => { peak = Math.max(peak, rssOf(pid)) }, 20)
  t.teardown(() => { clearInterval(sampler) })
  const started = performance.now()
  const statuses = await run(10_000)
  const seconds = (performance.now() - started) / 1000
  const firstPeak = peak = Math.max(peak, rssOf(pid))
  // the same again: what a bounded queue shows is that memory does not grow with the requests
  await run(10_000)
  clearInterval(sampler)
  const secondPeak = Math.max(peak, rssOf(pid))
  const growth = firstPeak - before
  const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
  t.comment(`10,000 requests in ${seconds.toFixed(1)} s: ${[...statuses].map(([status, n]) => `${n} x ${status}`).join(', ')}; ` +
    `gateway RSS ${mib(before)} after a warm-up of the same shape, peak ${mib(firstPeak)} during (+${mib(growth)}); ` +
    `10,000 more: peak ${mib(secondPeak)} (+${mib(secondPeak - firstPeak)})`)
  t.equal((statuses.get(200) ?? 0) + (statuses.get(503) ?? 0), 10_000, 'every request answered, 200 or 503')
  t.ok((statuses.get(503) ?? 0) > 5000, 'most refused at once')
  t.ok(growth < 150 * 1024 * 1024, `RSS grew by ${mib(growth)}, under a generous 150 MiB`)
})
