// What the client receives of the upstream's answer: its status, headers (minus hop-by-hop ones)
// and exact bytes, whether small (collected and sent in one write), large or of unknown length
// (streamed as it arrives), plus the cases with no body (HEAD, 204, 304), an answer cut short,
// and a client that resets its connection while the upstream is still thinking.
import { createHash } from 'node:crypto'
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { route } from '../../../../gateway/src/proxy/route.js'
import { BUFFERED_RESPONSE_MAX } from '../../../../gateway/src/proxy/forwarder.js'
import { send } from '../../../helpers/http.js'
import { startTestGateway } from '../../../helpers/stack.js'

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')
const LARGE = Buffer.alloc(BUFFERED_RESPONSE_MAX * 16 + 7, 'keygate-')
const SMALL = Buffer.from('{"id":"c_1","name":"Ada"}')

interface Upstream {
  url: string
  /** requests whose connection the gateway closed before an answer */
  abandoned: string[]
  /** release the /stream answer's last event */
  finishStream: () => void
}

async function startUpstream (t: { teardown: (fn: () => unknown) => void }): Promise<Upstream> {
  const abandoned: string[] = []
  let finishStream = (): void => {}
  const answers: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
    '/small': (_req, res) => {
      res.writeHead(201, [
        'content-type', 'application/json', 'content-length', String(SMALL.length),
        'set-cookie', 'a=1; HttpOnly', 'set-cookie', 'b=2; HttpOnly',
        'x-upstream', 'yes', 'keep-alive', 'timeout=99', 'connection', 'keep-alive, x-hop', 'x-hop', 'secret'
      ])
      res.end(SMALL)
    },
    '/large': (_req, res) => { res.writeHead(200, { 'content-length': String(LARGE.length) }).end(LARGE) },
    '/chunked': (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      let i = 0
      const timer = setInterval(() => {
        if (i === 5) { clearInterval(timer); res.end('end'); return }
        res.write(`part ${i++};`)
      }, 5)
    },
    '/stream': (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: first\n\n')
      finishStream = () => { res.end('data: last\n\n') }
    },
    '/empty': (_req, res) => { res.writeHead(204, { 'x-upstream': 'yes' }).end() },
    '/not-modified': (_req, res) => { res.writeHead(304, { etag: '"v1"' }).end() },
    '/teapot': (_req, res) => { res.writeHead(418, { 'content-type': 'text/plain' }).end('short and stout') },
    '/cut': (_req, res) => {
      res.writeHead(200, { 'content-length': '100' })
      res.write('only half')
      setTimeout(() => res.socket?.destroy(), 20)
    },
    '/cut-large': (_req, res) => {
      res.writeHead(200, { 'content-length': String(LARGE.length) })
      res.write(LARGE.subarray(0, BUFFERED_RESPONSE_MAX * 2))
      setTimeout(() => res.socket?.destroy(), 20)
    },
    '/never': (req) => { req.socket.once('close', () => abandoned.push(req.url ?? '')) }
  }
  const server = createServer((req, res) => {
    req.resume()
    const answer = answers[req.url ?? '']
    if (answer === undefined) res.writeHead(404).end()
    else answer(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, abandoned, finishStream: () => { finishStream() } }
}

t.test('the upstream answer reaches the client', async (t) => {
  const upstream = await startUpstream(t)
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: upstream.url,
    routes: (url) => [route({ prefix: '/', upstream: url, auth: 'public' }, { bodyLimit: 1024, timeoutMs: 30_000 })]
  })

  t.test('a small answer: status, headers and bytes as sent, hop-by-hop headers dropped', async (t) => {
    const res = await send(gw.url, '/small')
    t.equal(res.status, 201)
    t.same(res.body, SMALL)
    t.equal(res.headers['content-length'], String(SMALL.length))
    t.same(res.headers['set-cookie'], ['a=1; HttpOnly', 'b=2; HttpOnly'], 'both cookies, in order')
    t.equal(res.headers['x-upstream'], 'yes')
    t.equal(res.headers['keep-alive'], undefined, "the upstream's Keep-Alive describes its connection to the gateway")
    t.equal(res.headers['x-hop'], undefined, 'a header the upstream named in Connection is hop-by-hop')
    t.ok(res.headers['x-request-id'], "keygate's own headers are added")
  })

  t.test('a large answer is streamed, byte for byte', async (t) => {
    const res = await send(gw.url, '/large')
    t.equal(res.status, 200)
    t.equal(res.body.length, LARGE.length)
    t.equal(sha256(res.body), sha256(LARGE))
  })

  t.test('an answer of unknown length is streamed, byte for byte', async (t) => {
    const res = await send(gw.url, '/chunked')
    t.equal(res.status, 200)
    t.equal(res.text, 'part 0;part 1;part 2;part 3;part 4;end')
  })

  t.test('an event stream reaches the client as it is written, before it ends', async (t) => {
    const { hostname, port } = new URL(gw.url)
    const first = await new Promise<{ text: string; rest: Promise<string> }>((resolve, reject) => {
      const req = httpRequest({ host: hostname, port, path: '/stream', agent: false }, (res) => {
        let text = ''
        const rest = new Promise<string>((resolve) => { res.on('end', () => { resolve(text) }) })
        res.once('data', (chunk: Buffer) => {
          text += chunk.toString()
          res.on('data', (more: Buffer) => { text += more.toString() })
          resolve({ text, rest })
        })
      })
      req.on('error', reject)
      req.end()
    })
    t.equal(first.text, 'data: first\n\n', 'the first event arrives while the upstream still holds the stream open')
    upstream.finishStream()
    t.equal(await first.rest, 'data: first\n\ndata: last\n\n')
  })

  t.test('HEAD, 204 and 304 carry no body', async (t) => {
    const head = await send(gw.url, '/small', { method: 'HEAD' })
    t.equal(head.status, 201)
    t.equal(head.headers['content-length'], String(SMALL.length), "HEAD keeps the length a GET's body would have")
    t.equal(head.body.length, 0)
    const empty = await send(gw.url, '/empty')
    t.equal(empty.status, 204)
    t.equal(empty.headers['x-upstream'], 'yes')
    t.equal(empty.body.length, 0)
    const notModified = await send(gw.url, '/not-modified')
    t.equal(notModified.status, 304)
    t.equal(notModified.headers.etag, '"v1"')
    t.equal(notModified.body.length, 0)
  })

  t.test("an upstream's error status passes through untouched", async (t) => {
    const res = await send(gw.url, '/teapot')
    t.equal(res.status, 418)
    t.equal(res.text, 'short and stout')
  })

  t.test('a small answer cut short: 502 UPSTREAM_UNAVAILABLE, not half an answer', async (t) => {
    const res = await send(gw.url, '/cut')
    t.equal(res.status, 502)
    t.equal(res.json().code, 'UPSTREAM_UNAVAILABLE')
  })

  t.test('a streamed answer cut short: the client sees it cut, never a complete-looking answer', async (t) => {
    await t.rejects(send(gw.url, '/cut-large'), 'the client request fails rather than ending cleanly')
  })

  // A client that closes with a FIN cannot be told from one that only half-closed and still reads
  // (the gateway answers those: test/system/half-close.test.ts): its request, once sent, runs until
  // the upstream answers or the route's timeout. A reset connection is gone for sure.
  t.test('a client that resets its connection frees its upstream request', async (t) => {
    const { hostname, port } = new URL(gw.url)
    const req = httpRequest({ host: hostname, port, path: '/never', agent: false })
    req.on('error', () => {})
    req.end()
    await new Promise((resolve) => setTimeout(resolve, 200))
    req.socket?.resetAndDestroy()
    const deadline = Date.now() + 5000
    while (!upstream.abandoned.includes('/never') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    t.same(upstream.abandoned, ['/never'], "the upstream sees its connection closed long before the route's 30 s timeout")
  })
})
