// Half-closed clients: a client that writes a whole request and then closes its sending side (a
// FIN, `socket.end()`, as `nc -N`, `curl` with a closed stdin and many scripts do) reads the whole
// answer, also when the answer takes asynchronous work (a password check, a token check, a forward),
// and then the gateway closes the connection. On raw sockets, on both stores. A request that would
// have to wait for an upstream connection is not sent for such a client (it may be gone):
// test/system/upstream-queue.test.ts. Shutdown still closes these connections.
import { connect } from 'node:net'
import t from 'tap'
import { route } from '../../gateway/src/proxy/route.js'
import { rawRequest, sendHalfClosed, type HalfClosedAnswer } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, PASSWORD, registerKey, startTestGateway, STORE_KINDS } from '../helpers/stack.js'

const DEFAULTS = { bodyLimit: 1024 * 1024, timeoutMs: 30_000 }

function bodyOf (answer: HalfClosedAnswer): string {
  return answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4)
}

/** the recorder's answer, streamed on (it has no Content-Length): whole, to its last chunk */
const wholeRecorderAnswer = /\r\n\r\n[0-9a-f]+\r\n\{"recorded":\d+\}\r\n0\r\n\r\n$/

for (const store of STORE_KINDS) {
  t.test(`${store} store: a half-closed client is answered in full, then the connection closes`, async (t) => {
    const upstream = await startRecorder(t)
    const gw = await startTestGateway(t, {
      store,
      upstreamUrl: upstream.url,
      routes: (url) => [
        route({ prefix: '/v1/clients/', upstream: url, auth: 'signed', methods: ['GET', 'POST'] }, DEFAULTS),
        route({ prefix: '/reports/', upstream: url, auth: 'bearer', methods: ['GET'] }, DEFAULTS)
      ]
    })
    await addUser(gw, 'alice')

    t.test('a login (POST /v1/auth/token): the password check is asynchronous', async (t) => {
      const body = JSON.stringify({ username: 'alice', password: PASSWORD })
      const answer = await sendHalfClosed(gw.url, rawRequest('POST', '/v1/auth/token', { 'content-type': 'application/json' }, body))
      t.equal(answer.status, 200)
      t.match(JSON.parse(bodyOf(answer)), { tokenType: 'Bearer', token: String })
      t.match(answer.text, /\r\nconnection: close\r\n/i, 'the answer says the connection closes')
      t.ok(answer.closedByServer, 'and the gateway closes it after the answer')
    })

    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, keys)).status, 201)

    t.test('a bearer route: the token check, then the forward', async (t) => {
      // a token the gateway has not seen yet: its check is not a cache hit
      const fresh = await login(gw.url, 'alice')
      const answer = await sendHalfClosed(gw.url, rawRequest('GET', '/reports/monthly', { authorization: `Bearer ${fresh}` }))
      t.equal(answer.status, 200)
      t.match(answer.text, wholeRecorderAnswer, 'the upstream\'s answer, whole')
      t.equal(upstream.requests.at(-1)?.url, '/reports/monthly')
      t.equal(upstream.requests.at(-1)?.headers['x-gateway-user'], 'alice')
      t.ok(answer.closedByServer)
    })

    t.test('a signed forwarded request', async (t) => {
      const body = JSON.stringify({ name: 'Ada', half: 'closed' })
      const headers = { ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json' }
      const answer = await sendHalfClosed(gw.url, rawRequest('POST', '/v1/clients/', headers, body))
      t.equal(answer.status, 200)
      t.match(answer.text, wholeRecorderAnswer, 'the upstream\'s answer, whole')
      t.equal(upstream.requests.at(-1)?.body.toString(), body, 'the upstream received the signed body')
      t.match(answer.text, /\r\nconnection: close\r\n/i)
      t.ok(answer.closedByServer)
    })

    t.test('a refusal that takes asynchronous work (an unknown key) is answered too', async (t) => {
      const other = rsaKeyPair()
      const headers = signedHeaders({ keys: other, token, method: 'GET', target: '/v1/clients/' })
      const answer = await sendHalfClosed(gw.url, rawRequest('GET', '/v1/clients/', headers))
      t.equal(answer.status, 401)
      t.match(bodyOf(answer), /"code":"UNKNOWN_API_KEY"/)
      t.ok(answer.closedByServer)
    })

    t.test('an idle connection that half-closes is closed at once', async (t) => {
      const answer = await sendHalfClosed(gw.url, '')
      t.equal(answer.text, '', 'nothing to answer')
      t.ok(answer.closedByServer, 'the gateway closes its side too')
    })
  })
}

t.test('shutdown: a half-closed client with a forward in flight is answered, its connection closed, and the gateway stops', async (t) => {
  const upstream = await startRecorder(t, { delayMs: 500 })
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: upstream.url,
    routes: (url) => [route({ prefix: '/slow/', upstream: url, auth: 'public' }, DEFAULTS)]
  })
  const { port } = new URL(gw.url)
  const inFlight = sendHalfClosed(gw.url, rawRequest('GET', '/slow/x'))
  // and a kept-alive connection, idle, that never half-closes: closing the gateway closes it
  const idle = connect(Number(port), '127.0.0.1')
  idle.on('error', () => {})
  idle.resume()
  idle.write(rawRequest('GET', '/healthz'))
  const idleClosed = new Promise<void>((resolve) => { idle.on('close', () => { resolve() }) })
  while (upstream.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10))
  const started = Date.now()
  await gw.app.close()
  const closeMs = Date.now() - started
  const answer = await inFlight
  t.equal(answer.status, 200, 'the request in flight is answered')
  t.ok(answer.closedByServer, 'and its connection closed')
  await idleClosed
  t.pass('the idle kept-alive connection is closed')
  t.ok(closeMs < 5000, `the gateway closed once the answer was out (${closeMs} ms)`)
})
