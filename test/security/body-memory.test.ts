// Memory under slow bodies (KEYGATE_BODY_MEMORY_LIMIT), against a running gateway on raw sockets:
// the request bodies buffered across all requests at once never pass the limit; a body that would
// is refused at once with 503 BODY_MEMORY_EXHAUSTED and never forwarded; bodyless requests are still
// served; keygate's own JSON endpoints count too; the bytes come back when a request completes, is
// refused or its client goes away; and the
// RSS figure of 100 slow 1 MiB senders, with a limit and without one.
import { connect, type Socket } from 'node:net'
import t from 'tap'
import { route, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { sendRaw, send } from '../helpers/http.js'
import { rssOf, startMeasuredGateway } from '../helpers/process-tree.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { startTestGateway, type GatewayHandle } from '../helpers/stack.js'

const KIB = 1024
const MIB = 1024 * KIB
const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

async function until (what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await sleep(5)
  }
}

/** A POST that declares `declared` bytes and sends `sent` of them, then waits: a slow sender. */
interface SlowSender {
  socket: Socket
  /** the answer, once the server sends one */
  answer: Promise<string>
  /** sends the rest of the declared body */
  finish: () => void
}

function slowSender (url: string, target: string, declared: number, sent: number | Buffer, fill = 'a'): SlowSender {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  const chunks: Buffer[] = []
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('close', () => { resolve(Buffer.concat(chunks).toString('latin1')) })
    // a reset after an answer is the server closing a connection it stopped reading
    socket.on('error', () => {})
  })
  socket.write(`POST ${target} HTTP/1.1\r\nHost: keygate.test\r\nContent-Type: application/octet-stream\r\n` +
    `Content-Length: ${declared}\r\nConnection: close\r\n\r\n`)
  const part = typeof sent === 'number' ? Buffer.alloc(sent, fill) : sent
  socket.write(part)
  return { socket, answer, finish: () => { socket.write(Buffer.alloc(declared - part.length, fill)) } }
}

const statusOf = (answer: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0)
const codeOf = (answer: string): string | undefined => /"code":"([A-Z_]+)"/.exec(answer)?.[1]

interface Teardown { teardown: (fn: () => unknown) => void }
async function gateway (t: Teardown, upstream: string, bodyMemoryLimit: number, bodyLimit: number): Promise<GatewayHandle> {
  const routes = (u: string): RouteConfig[] =>
    [route({ prefix: '/public/', upstream: u, auth: 'public', methods: ['GET', 'POST'] }, { bodyLimit, timeoutMs: 30_000 })]
  return await startTestGateway(t, { store: 'memory', upstreamUrl: upstream, routes, config: { bodyMemoryLimit } })
}

t.test('past the limit: 503 BODY_MEMORY_EXHAUSTED at once, nothing forwarded; within it, every body passes byte for byte', async (t) => {
  const upstream = await startRecorder(t)
  const gw = await gateway(t, upstream.url, 512 * KIB, 128 * KIB)
  const memory = gw.app.keygate.bodyMemory
  t.equal(memory.limit, 512 * KIB)

  // 8 senders each declare 64 KiB and send half: their 512 KiB, the whole limit, are taken at once
  const holders = Array.from({ length: 8 }, (_, i) => slowSender(gw.url, `/public/held/${i}`, 64 * KIB, 32 * KIB, String.fromCharCode(97 + i)))
  await until('the gateway holds the 8 bodies begun', () => memory.used === 512 * KIB)

  // a 9th body: refused at once, with Retry-After, never forwarded
  const late = slowSender(gw.url, '/public/late', 16 * KIB, 1)
  const lateAnswer = await late.answer
  t.equal(statusOf(lateAnswer), 503, 'a body past the limit: 503')
  t.equal(codeOf(lateAnswer), 'BODY_MEMORY_EXHAUSTED')
  t.match(lateAnswer, /\r\nretry-after: 1\r\n/i, 'with Retry-After')
  t.equal(memory.used, 512 * KIB, 'the refused body holds nothing')
  const small = await send(gw.url, '/public/small', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  t.equal(small.status, 503, 'even a 2-byte body waits for room')
  t.equal(small.json().code, 'BODY_MEMORY_EXHAUSTED')
  const chunked = await sendRaw(gw.url, 'POST /public/chunked HTTP/1.1\r\nHost: keygate.test\r\nTransfer-Encoding: chunked\r\n' +
    'Connection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n')
  t.equal(chunked.status, 503, 'so does a chunked body, at its first chunk')
  t.match(chunked.text, /"code":"BODY_MEMORY_EXHAUSTED"/)
  const loginBody = JSON.stringify({ username: 'nobody', password: 'x' })
  const loginRefused = await send(gw.url, '/v1/auth/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: loginBody })
  t.equal(loginRefused.status, 503, 'so does a body to keygate\'s own JSON endpoints')
  t.equal(loginRefused.json().code, 'BODY_MEMORY_EXHAUSTED')
  const bodyless = await send(gw.url, '/public/get')
  t.equal(bodyless.status, 200, 'a bodyless request is still served')
  t.same(upstream.requests.map((r) => r.url), ['/public/get'], 'only the bodyless request reached the upstream')

  // the 8 finish: each forwarded byte for byte, and the bytes come back
  for (const holder of holders) holder.finish()
  const answers = await Promise.all(holders.map(async (h) => await h.answer))
  t.same(answers.map(statusOf), Array(8).fill(200), 'the 8 held bodies, once complete, are all served')
  const forwarded = upstream.requests.filter((r) => r.url.startsWith('/public/held/'))
  t.equal(forwarded.length, 8)
  for (const r of forwarded) {
    const fill = String.fromCharCode(97 + Number(r.url.split('/').at(-1)))
    t.ok(r.body.equals(Buffer.alloc(64 * KIB, fill)), `${r.url}: the client's 64 KiB, byte for byte`)
  }
  await until('every byte is given back', () => memory.used === 0)
  t.equal(memory.used, 0, 'nothing held once the answers are sent')
  const login = await send(gw.url, '/v1/auth/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: loginBody })
  t.equal(login.status, 401, 'with room again, the login is checked (and its bytes given back)')
  await until('the login\'s bytes are given back', () => memory.used === 0)
})

t.test('no leak: 40 clients cut off mid-body, 8 chunked bodies over the route limit, then full-size bodies still pass', async (t) => {
  const upstream = await startRecorder(t)
  const gw = await gateway(t, upstream.url, 1024 * KIB, 128 * KIB)
  const memory = gw.app.keygate.bodyMemory
  for (let round = 0; round < 5; round++) {
    const cut = Array.from({ length: 8 }, (_, i) => slowSender(gw.url, `/public/cut/${i}`, 128 * KIB, 30 * KIB))
    await until(`round ${round}: the 8 bodies begun are held`, () => memory.used === 8 * 128 * KIB)
    for (const sender of cut) sender.socket.destroy()
    await until(`round ${round}: their bytes are given back`, () => memory.used === 0)
  }
  // chunked, past the route's limit: refused with 413 mid-body, the bytes read so far given back
  const chunk = Buffer.alloc(50 * KIB, 'x')
  const chunkedOver = Buffer.concat([
    Buffer.from('POST /public/over HTTP/1.1\r\nHost: keygate.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'),
    ...Array.from({ length: 4 }, () => Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])),
    Buffer.from('0\r\n\r\n')
  ])
  const over = await Promise.all(Array.from({ length: 8 }, async () => await sendRaw(gw.url, chunkedOver)))
  t.same(over.map((r) => r.status), Array(8).fill(413), 'chunked bodies past the route limit: 413')
  await until('the bytes of the refused bodies are given back', () => memory.used === 0)
  t.equal(memory.used, 0, 'after 40 cut off and 8 refused, nothing is held')

  // the whole limit at once: 8 bodies of the route's full 128 KiB
  const full = Buffer.alloc(128 * KIB, 'f')
  const oks = await Promise.all(Array.from({ length: 8 }, async (_, i) =>
    await send(gw.url, `/public/full/${i}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: full })))
  t.same(oks.map((r) => r.status), Array(8).fill(200), '8 bodies of the full route limit, the whole memory limit, pass')
  t.ok(upstream.requests.every((r) => r.body.equals(full)), 'forwarded byte for byte')
  t.same(upstream.requests.map((r) => r.url).sort(), Array.from({ length: 8 }, (_, i) => `/public/full/${i}`),
    'nothing of the cut-off or refused bodies was forwarded')
  await until('every byte is given back', () => memory.used === 0)
})

t.test('the figure: 100 slow senders of 1 MiB to a public route, with the default limit (64 MiB) and without one', async (t) => {
  const run = async (limit: string | undefined): Promise<{ before: number; after: number; refused: number; forwarded: number }> => {
    const upstream = await startRecorder(t)
    const file = routeFile(t, `routes:\n  - prefix: /public/\n    upstream: ${upstream.url}\n    auth: public\n`)
    const { url, child, pid, exited } = await startMeasuredGateway(t, {
      LOG_LEVEL: 'warn',
      KEYGATE_ROUTES: file.path,
      ...(limit !== undefined && { KEYGATE_BODY_MEMORY_LIMIT: limit })
    })
    await send(url, '/public/warm-up', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: Buffer.alloc(MIB, 'w') })
    const before = rssOf(pid)
    // each declares 1 MiB and sends all but its last byte, then waits, as a slow sender does
    const part = Buffer.alloc(MIB - 1, 's')
    const senders = Array.from({ length: 100 }, (_, i) => slowSender(url, `/public/slow/${i}`, MIB, part))
    let refused = 0
    for (const s of senders) void s.answer.then((a) => { if (codeOf(a) === 'BODY_MEMORY_EXHAUSTED') refused++ })
    // every byte sent has reached the gateway's process, and its memory has settled
    await Promise.all(senders.map(async (s) => { await new Promise<void>((resolve) => { s.socket.write('', () => { resolve() }) }) }))
    let after = rssOf(pid)
    for (let still = 0; still < 10; await sleep(20)) {
      const now = rssOf(pid)
      still = now > after ? 0 : still + 1
      after = Math.max(after, now)
    }
    const forwarded = upstream.requests.length - 1
    for (const s of senders) s.socket.destroy()
    child.kill('SIGKILL')
    await exited
    return { before, after, refused, forwarded }
  }
  const limited = await run(undefined)
  t.equal(limited.refused, 36, 'with the default 64 MiB: 36 of the 100 refused with BODY_MEMORY_EXHAUSTED')
  const unlimited = await run(String(1024 * MIB))
  t.equal(unlimited.refused, 0, 'with a 1 GiB limit: none refused')
  t.equal(limited.forwarded + unlimited.forwarded, 0, 'no incomplete body was forwarded')
  const grew = (r: { before: number; after: number }): string => `${(r.before / MIB).toFixed(0)} -> ${(r.after / MIB).toFixed(0)} MiB`
  t.comment(`100 slow senders of 1 MiB: gateway RSS ${grew(limited)} with the default 64 MiB limit (64 held, 36 refused); ` +
    `${grew(unlimited)} with a 1 GiB limit (100 held)`)
  // a wide margin: the point is that the limited gateway holds clearly less than the unlimited one
  t.ok(limited.after - limited.before < unlimited.after - unlimited.before, 'the limited gateway grows less')
})
