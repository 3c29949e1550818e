// The request-line tracker: table-driven over byte streams fed whole, byte by byte and in pieces
// (pipelined requests, Content-Length and chunked bodies that hold request lines, extensions,
// trailers, leading CRLFs, long keep-alive runs, what makes it stop following); then against
// Node's own parser on a real socket: for generated connections, every request Node serves is
// flagged exactly when its line had a run of spaces, and the tracker never loses the framing.
import { EventEmitter } from 'node:events'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { Socket, connect, type AddressInfo } from 'node:net'
import fc from 'fast-check'
import t from 'tap'
import { RequestLineTracker, TrackedIncomingMessage, hasSpacedRequestLine, trackRequestLines } from '../../../../gateway/src/lib/request-line-tracker.js'

const MAX_LINE = 16 * 1024

/** What the tracker read, in order: `ok METHOD-LENGTH TARGET-LENGTH` or `spaced METHOD TARGET`. */
function readings (tracker: RequestLineTracker): string[] {
  const out: string[] = []
  for (let r = tracker.take(); r !== undefined; r = tracker.take()) {
    out.push(typeof r === 'number' ? `ok ${r % 64} ${Math.floor(r / 64)}` : `spaced ${r.method} ${r.target}`)
  }
  return out
}

/** The stream fed in pieces of `size` bytes (Infinity: one chunk). */
function feedIn (bytes: Buffer, size: number): RequestLineTracker {
  const tracker = new RequestLineTracker(MAX_LINE)
  for (let i = 0; i < bytes.length; i += size) tracker.feed(bytes.subarray(i, Math.min(bytes.length, i + size)))
  return tracker
}

const CHUNKINGS: Array<[string, number]> = [['one chunk', Infinity], ['byte by byte', 1], ['2-byte pieces', 2], ['7-byte pieces', 7], ['64-byte pieces', 64]]

const get = (target: string, extra = ''): string => `GET ${target} HTTP/1.1\r\nHost: a\r\n${extra}\r\n`
/** a request with a body: the head's extra lines as given, then the body bytes */
const withBody = (method: string, target: string, lines: string, body: string): string => `${method} ${target} HTTP/1.1\r\nHost: a\r\n${lines}\r\n${body}`
const ok = (method: string, target: string): string => `ok ${method.length} ${target.length}`
const smuggledLine = 'GET  /x HTTP/1.1\r\nHost: a\r\n\r\n'
const hex = (n: number): string => n.toString(16)

interface Case { name: string; bytes: string; readings: string[]; following?: boolean }
/** Where it stops following: the readings so far stand, and the spaced line after is not read. */
const stops = (name: string, bytes: string, readings: string[]): Case => ({ name, bytes: bytes + smuggledLine, readings, following: false })

const CASES: Case[] = [
  { name: 'one request', bytes: get('/a'), readings: [ok('GET', '/a')] },
  { name: 'pipelined requests', bytes: get('/a') + get('/bb') + get('/ccc?x=1'), readings: [ok('GET', '/a'), ok('GET', '/bb'), ok('GET', '/ccc?x=1')] },
  { name: 'two spaces after the method', bytes: 'GET  /x HTTP/1.1\r\nHost: a\r\n\r\n', readings: ['spaced GET /x'] },
  { name: 'two spaces before the version', bytes: 'GET /x  HTTP/1.1\r\nHost: a\r\n\r\n', readings: ['spaced GET /x'] },
  { name: 'runs of three, both places', bytes: 'DELETE   /v1/clients/42   HTTP/1.1\r\nHost: a\r\n\r\n', readings: ['spaced DELETE /v1/clients/42'] },
  {
    name: 'a spaced line between good ones',
    bytes: get('/a') + 'POST  /v1/clients/ HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}' + get('/c'),
    readings: [ok('GET', '/a'), 'spaced POST /v1/clients/', ok('GET', '/c')]
  },
  { name: 'leading empty lines (CRLF, bare LF, CR)', bytes: '\r\n\r\n' + get('/a') + '\r\n\n\r' + get('/b'), readings: [ok('GET', '/a'), ok('GET', '/b')] },
  {
    name: 'a Content-Length body holding request lines is not read as one',
    bytes: withBody('POST', '/p', `Content-Length: ${smuggledLine.length * 2}\r\n`, smuggledLine + smuggledLine) + get('/after'),
    readings: [ok('POST', '/p'), ok('GET', '/after')]
  },
  {
    name: 'header names in any case, Content-Length with spaces around it',
    bytes: withBody('PUT', '/p', `CONTENT-length:  ${smuggledLine.length} \r\n`, smuggledLine) + get('/after'),
    readings: [ok('PUT', '/p'), ok('GET', '/after')]
  },
  {
    name: 'look-alike header names carry no body',
    bytes: get('/p', 'X-Content-Length: 9\r\nContent-Lengthy: 9\r\nX-Note: Content-Length: 9\r\nTransfer-Encodings: chunked\r\n') + smuggledLine,
    readings: [ok('GET', '/p'), 'spaced GET /x']
  },
  {
    name: 'a chunked body with extensions and trailers, holding request lines',
    bytes: withBody('POST', '/c', 'Transfer-Encoding: chunked\r\n',
      `${hex(smuggledLine.length)};name=value;q="a b"\r\n${smuggledLine}\r\n` +
      `A\r\nGET  /y HT\r\n${hex(smuggledLine.length).toUpperCase()}\r\n${smuggledLine}\r\n` +
      '0;last\r\nX-Trailer: GET  /z HTTP/1.1\r\nOther: 1\r\n\r\n') +
      'GET /next  HTTP/1.1\r\nHost: a\r\n\r\n',
    readings: [ok('POST', '/c'), 'spaced GET /next']
  },
  {
    name: 'Transfer-Encoding whose last coding is chunked, and two of them',
    bytes: withBody('POST', '/c', 'Transfer-Encoding: gzip, CHUNKED\r\n', '3\r\nabc\r\n0\r\n\r\n') +
      withBody('POST', '/d', 'Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n', '1\r\nz\r\n0\r\n\r\n') + get('/e'),
    readings: [ok('POST', '/c'), ok('POST', '/d'), ok('GET', '/e')]
  },
  {
    name: 'Content-Length: 0 and a body-less HEAD',
    bytes: get('/a', 'Content-Length: 0\r\n') + 'HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n' + get('/b'),
    readings: [ok('GET', '/a'), ok('HEAD', '/h'), ok('GET', '/b')]
  },
  { name: 'an Upgrade header alone changes nothing', bytes: get('/a', 'Upgrade: websocket\r\n') + smuggledLine, readings: [ok('GET', '/a'), 'spaced GET /x'] },
  { name: 'HTTP/1.0', bytes: 'GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b  HTTP/1.0\r\n\r\n', readings: [ok('GET', '/a'), 'spaced GET /b'] },
  { name: 'an absolute-form target', bytes: 'GET  http://h/a?b HTTP/1.1\r\nHost: h\r\n\r\n', readings: ['spaced GET http://h/a?b'] },
  stops('an upgrade', get('/ws', 'Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n'), [ok('GET', '/ws')]),
  stops('CONNECT', 'CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n', [ok('CONNECT', 'h:443')]),
  stops('an HTTP/0.9 line', 'GET /old\r\n', [ok('GET', '/old')]),
  stops('a folded header', get('/f', 'X-A: 1\r\n 2\r\n'), [ok('GET', '/f')]),
  stops('two Content-Lengths', withBody('POST', '/p', 'Content-Length: 3\r\nContent-Length: 3\r\n', 'abc'), [ok('POST', '/p')]),
  stops('a Content-Length that is not digits', withBody('POST', '/p', 'Content-Length: 3x\r\n', 'abc'), [ok('POST', '/p')]),
  stops('Content-Length and Transfer-Encoding', withBody('POST', '/p', 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'), [ok('POST', '/p')]),
  stops('a Transfer-Encoding that does not end in chunked', withBody('POST', '/p', 'Transfer-Encoding: chunked, gzip\r\n', '0\r\n\r\n'), [ok('POST', '/p')]),
  stops('whitespace after a chunk size', withBody('POST', '/p', 'Transfer-Encoding: chunked\r\n', '3 ;a\r\nabc\r\n0\r\n\r\n'), [ok('POST', '/p')]),
  stops('chunk data not followed by CRLF', withBody('POST', '/p', 'Transfer-Encoding: chunked\r\n', '3\r\nabcX\r\n0\r\n\r\n'), [ok('POST', '/p')]),
  stops('a space before the method', ' GET /a HTTP/1.1\r\nHost: a\r\n\r\n', []),
  stops('a header line longer than the limit', get('/a', `X-Long: ${'v'.repeat(MAX_LINE)}\r\n`), [ok('GET', '/a')])
]

t.test('readings, whatever the chunking', async (t) => {
  for (const c of CASES) {
    for (const [chunking, size] of CHUNKINGS) {
      const tracker = feedIn(Buffer.from(c.bytes, 'latin1'), size)
      t.same(readings(tracker), c.readings, `${c.name}, ${chunking}`)
      t.equal(tracker.following, c.following ?? true, `${c.name}, ${chunking}: ${c.following === false ? 'stopped' : 'still following'}`)
    }
  }
})

t.test('a keep-alive run of 100 requests, bodies of every kind, one line spaced', async (t) => {
  const parts: string[] = []
  const expected: string[] = []
  for (let i = 0; i < 100; i++) {
    const target = `/r/${i}`
    if (i === 57) {
      parts.push(`GET  ${target} HTTP/1.1\r\nHost: a\r\n\r\n`)
      expected.push(`spaced GET ${target}`)
    } else if (i % 3 === 0) {
      parts.push(withBody('POST', target, `Content-Length: ${smuggledLine.length}\r\n`, smuggledLine))
      expected.push(ok('POST', target))
    } else if (i % 3 === 1) {
      parts.push(withBody('PATCH', target, 'Transfer-Encoding: chunked\r\n', '5;x=1\r\nGET  \r\n0\r\nT: GET  /t HTTP/1.1\r\n\r\n'))
      expected.push(ok('PATCH', target))
    } else {
      parts.push(get(target))
      expected.push(ok('GET', target))
    }
  }
  for (const [chunking, size] of CHUNKINGS) {
    const tracker = feedIn(Buffer.from(parts.join(''), 'latin1'), size)
    t.same(readings(tracker), expected, `${chunking}: 100 readings, the 58th spaced`)
  }
})

/** A Node HTTP server with the tracker, as keygate's listeners have it; each request's method, target and verdict. */
interface Served { method: string; url: string; spaced: boolean }

async function trackedServer (t: { teardown: (fn: () => unknown) => void }): Promise<{ server: Server; port: number; seen: Served[] }> {
  const seen: Served[] = []
  const server = createServer({ IncomingMessage: TrackedIncomingMessage }, (req: IncomingMessage, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', spaced: hasSpacedRequestLine(req) })
    req.resume()
    req.on('end', () => { res.end() })
  })
  trackRequestLines(server, MAX_LINE)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => { await new Promise((resolve) => server.close(resolve)) })
  return { server, port: (server.address() as AddressInfo).port, seen }
}

/** Writes `pieces` one by one (each waits for the last to be flushed) and resolves once `until()` holds. */
async function sendPieces (port: number, pieces: Buffer[], until: () => boolean): Promise<void> {
  const socket = connect(port, '127.0.0.1')
  socket.setNoDelay(true)
  socket.on('data', () => {})
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject) })
  for (const piece of pieces) {
    await new Promise<void>((resolve, reject) => { socket.write(piece, (err) => { if (err) reject(err); else resolve() }) })
  }
  const deadline = Date.now() + 5000
  while (!until() && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve))
  socket.destroy()
}

t.test('a request Node answers itself (417 to an Expect) still takes its reading: the next ones keep theirs', async (t) => {
  const { port, seen } = await trackedServer(t)
  await sendPieces(port, [Buffer.from(get('/a', 'Expect: something\r\n') + smuggledLine + get('/c'), 'latin1')], () => seen.length === 2)
  t.same(seen, [{ method: 'GET', url: '/x', spaced: true }, { method: 'GET', url: '/c', spaced: false }])
})

/**
 * A tracked connection that has sent a plain line and two spaced ones (no server behind it): each
 * call builds the next request as Node would, with the method and target given.
 */
function connectionOfThree (): (method: string, url: string) => TrackedIncomingMessage {
  const server = new EventEmitter()
  trackRequestLines(server as unknown as Server, MAX_LINE)
  const socket = new Socket()
  server.emit('connection', socket)
  socket.emit('data', Buffer.from(get('/a') + smuggledLine + smuggledLine, 'latin1'))
  return (method, url) => Object.assign(new TrackedIncomingMessage(socket), { method, url })
}

t.test('a reading that does not match the request Node built: no verdict on that connection any more', async (t) => {
  const message = connectionOfThree()
  t.equal(hasSpacedRequestLine(message('GET', '/other')), false, 'the first: another target than the tracker read')
  t.equal(hasSpacedRequestLine(message('GET', '/x')), false, 'the second, spaced as read, is no longer refused: the tracker lost the framing')
  t.equal(hasSpacedRequestLine(message('GET', '/x')), false, 'nor the third')
  const stray = Object.assign(new TrackedIncomingMessage(new Socket()), { method: 'GET', url: '/x' })
  t.equal(hasSpacedRequestLine(stray), false, 'a socket without a tracker: no verdict')
})

t.test('the same messages with the readings matching: the spaced ones are flagged', async (t) => {
  const message = connectionOfThree()
  t.same([message('GET', '/a'), message('GET', '/x'), message('GET', '/x')].map(hasSpacedRequestLine), [false, true, true])
})

/** mostly one space, as clients send; a run now and then */
const SPACES = fc.oneof({ weight: 4, arbitrary: fc.constant(' ') }, { weight: 1, arbitrary: fc.constantFrom('  ', '   ') })
const TARGET = fc.stringMatching(/^\/[a-z0-9/._~-]{0,12}(\?[a-z0-9=&]{0,8})?$/)
/** body text that looks like framing: request lines (spaced too), chunk sizes, CRLFs */
const FRAMING_LOOKALIKES = ['{"a":1}', smuggledLine, 'GET /x HTTP/1.1\r\n', '\r\n', '0\r\n\r\n', '5;x=y\r\n', 'Content-Length: 3\r\n', 'abc', ' ']
const BODY_TEXT = fc.array(fc.constantFrom(...FRAMING_LOOKALIKES), { maxLength: 6 }).map((a) => a.join(''))
const REQUEST = fc.record({
  leading: fc.constantFrom('', '', '\r\n', '\r\n\r\n'),
  method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
  before: SPACES,
  target: TARGET,
  after: SPACES,
  headerCase: fc.constantFrom('Content-Length', 'content-length', 'CONTENT-LENGTH', 'Transfer-Encoding', 'transfer-encoding'),
  body: fc.oneof(
    fc.constant({ kind: 'none' as const, text: '' }),
    BODY_TEXT.map((text) => ({ kind: 'length' as const, text })),
    fc.record({
      kind: fc.constant('chunked' as const),
      text: BODY_TEXT,
      cuts: fc.array(fc.nat(), { maxLength: 3 }),
      ext: fc.constantFrom('', ';a=b', ';q="x y"'),
      trailer: fc.constantFrom('', 'T: GET  /t HTTP/1.1\r\n')
    })
  )
})

type GeneratedRequest = typeof REQUEST extends fc.Arbitrary<infer V> ? V : never

function requestBytes (r: GeneratedRequest): string {
  const head = `${r.leading}${r.method}${r.before}${r.target}${r.after}HTTP/1.1\r\nHost: a\r\nX-Note: Content-Length: 99\r\n`
  const body = r.body
  if (body.kind === 'none') return `${head}\r\n`
  const lengthName = r.headerCase.toLowerCase() === 'content-length' ? r.headerCase : 'Content-Length'
  if (body.kind === 'length') return `${head}${lengthName}: ${Buffer.byteLength(body.text, 'latin1')}\r\n\r\n${body.text}`
  const teName = r.headerCase.toLowerCase() === 'transfer-encoding' ? r.headerCase : 'Transfer-Encoding'
  const cuts = [...new Set(body.cuts.map((c) => c % (body.text.length + 1)))].sort((a, b) => a - b)
  const ends = [...cuts, body.text.length]
  const pieces = ends.map((end, i) => body.text.slice(i === 0 ? 0 : ends[i - 1], end)).filter((p) => p.length > 0)
  return `${head}${teName}: chunked\r\n\r\n${pieces.map((p) => `${p.length.toString(16)}${body.ext}\r\n${p}\r\n`).join('')}0\r\n${body.trailer}\r\n`
}

t.test('against Node\'s parser on a real socket: flagged exactly when the line had a run of spaces', async (t) => {
  const { port, seen } = await trackedServer(t)
  let requests = 0
  let spaced = 0
  const connection = fc.array(REQUEST, { minLength: 1, maxLength: 6 })
  const pieceSizes = fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 8 })
  await fc.assert(fc.asyncProperty(connection, pieceSizes, async (list, sizes) => {
    seen.length = 0
    const bytes = Buffer.from(list.map(requestBytes).join(''), 'latin1')
    const pieces: Buffer[] = []
    for (let i = 0, k = 0; i < bytes.length; k++) {
      const size = sizes[k % sizes.length] as number
      pieces.push(bytes.subarray(i, i + size))
      i += size
    }
    await sendPieces(port, pieces, () => seen.length === list.length)
    const expected = list.map((r) => ({ method: r.method, url: r.target, spaced: r.before.length > 1 || r.after.length > 1 }))
    requests += list.length
    spaced += expected.filter((e) => e.spaced).length
    return JSON.stringify(seen) === JSON.stringify(expected)
  }), { numRuns: 150, seed: 20 })
  t.comment(`${requests} requests on 150 connections, ${spaced} with a spaced line: each served by Node, each flagged exactly when spaced`)
  t.ok(spaced > 0 && spaced < requests, 'both kinds were drawn')
})
