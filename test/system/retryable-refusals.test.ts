// A request keygate refused stays retryable, and a forwarded request's answer is always delivered.
// Against running gateways: with its Redis paused (SIGSTOP), a signed POST is refused (503) and
// never forwarded, and the same signed request sent again once Redis runs again (SIGCONT) is
// forwarded, once: the replay mark whose write timed out, which Redis ran when it woke, was
// cancelled behind it. A signed POST refused by a rate limit after its replay check passes when
// sent again. And a verified POST pipelined ahead of a malformed request is answered before the
// 400 that closes the connection.
import t from 'tap'
import { rawRequest, sendRaw } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { startPrivateRedis, uniquePrefix } from '../helpers/redis.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway, STORE_KINDS } from '../helpers/stack.js'

const post = (gw: { url: string }, bytes: string): Promise<{ status: number; text: string }> => sendRaw(gw.url, bytes)
const codeOf = (text: string): string | undefined => (/"code":"([A-Z_]+)"/.exec(text))?.[1]

t.test('Redis paused: the refused signed POST is retryable once Redis runs again, and runs once', async (t) => {
  const redis = await startPrivateRedis(t)
  const upstream = await startRecorder(t)
  const gw = await startTestGateway(t, {
    store: 'redis',
    redis: redis.url,
    redisPrefix: uniquePrefix('retryable'),
    upstreamUrl: upstream.url,
    config: { redisCommandTimeoutMs: 300 }
  })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  // registering caches the token, the user and the key: with Redis paused, only the replay check needs it
  t.equal((await registerKey(gw.url, token, keys)).status, 201)

  for (let round = 1; round <= 3; round++) {
    const body = `{"name":"round ${round}"}`
    const bytes = rawRequest('POST', '/v1/clients/', {
      ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json', connection: 'close'
    }, body)
    const before = upstream.requests.length
    redis.pause()
    let refused: { status: number; text: string }
    try {
      refused = await post(gw, bytes)
    } finally {
      redis.resume()
    }
    t.equal(refused.status, 503, `round ${round}: refused while Redis is paused`)
    t.equal(codeOf(refused.text), 'STORE_UNAVAILABLE')
    t.equal(upstream.requests.length, before, 'and not forwarded')
    // Redis now runs the mark's write it had queued, then its cancel; the retry comes after both
    const retry = await post(gw, bytes)
    t.equal(retry.status, 200, `round ${round}: the same signed request, sent again, is forwarded`)
    t.equal(upstream.requests.length, before + 1, 'once')
    t.equal(upstream.requests.at(-1)?.body.toString(), body, 'byte for byte')
    const replay = await post(gw, bytes)
    t.equal(replay.status, 401, 'and a third time it is a replay')
    t.equal(codeOf(replay.text), 'REPLAYED_REQUEST')
    t.equal(upstream.requests.length, before + 1, 'not forwarded')
  }
})

for (const store of STORE_KINDS) {
  t.test(`${store} store: a signed POST refused by a rate limit after its replay check passes when sent again`, async (t) => {
    const upstream = await startRecorder(t)
    const gw = await startTestGateway(t, {
      store,
      upstreamUrl: upstream.url,
      routes: (url) => routesFromYaml(`routes:
  - name: clients
    prefix: /v1/clients/
    upstream: UPSTREAM
    auth: signed
    methods: [POST]
    rateLimits:
      - { by: key, limit: 1, window: 1s }
`, url)
    })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, keys)).status, 201)
    const signed = (body: string): string => rawRequest('POST', '/v1/clients/', {
      ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json', connection: 'close'
    }, body)
    t.equal((await post(gw, signed('{"n":1}'))).status, 200, 'the first takes the window\'s one request')
    const second = signed('{"n":2}')
    const limited = await post(gw, second)
    t.equal(limited.status, 429)
    t.equal(codeOf(limited.text), 'RATE_LIMITED')
    const retryAfter = Number(/\r\nretry-after: (\d+)\r\n/i.exec(limited.text)?.[1])
    t.ok(retryAfter >= 1 && retryAfter <= 1, `Retry-After: ${retryAfter}`)
    // as a client does: wait what Retry-After says, then send the same request again
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000 + 50))
    const retried = await post(gw, second)
    t.equal(retried.status, 200, 'the refused request, sent again, is forwarded (not a replay)')
    t.same(upstream.requests.map((r) => r.body.toString()), ['{"n":1}', '{"n":2}'], 'each once')
    t.equal(codeOf((await post(gw, second)).text), 'REPLAYED_REQUEST', 'and a third time it is a replay')
  })

  t.test(`${store} store: a verified POST pipelined ahead of a malformed request is answered before the 400`, async (t) => {
    // the upstream answers late: the malformed bytes are read long before the POST's answer exists
    const upstream = await startRecorder(t, { delayMs: 300 })
    const gw = await startTestGateway(t, { store, upstreamUrl: upstream.url })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, keys)).status, 201)
    const malformed = [
      ['a bare LF in a header line', 'GET /v1/clients/ HTTP/1.1\r\nHost: keygate.test\nX-Broken: 1\r\n\r\n'],
      ['a request line that is not HTTP', 'NOT HTTP AT ALL\r\n\r\n']
    ]
    for (const [label, bad] of malformed) {
      const before = upstream.requests.length
      const body = JSON.stringify({ name: label })
      const signed = rawRequest('POST', '/v1/clients/', {
        ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json'
      }, body)
      const answer = await sendRaw(gw.url, signed + bad)
      const statuses = [...answer.text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))
      t.same(statuses, [200, 400], `${label}: the POST's answer, then the 400, in order`)
      t.equal(codeOf(answer.text), 'MALFORMED_HTTP', 'the 400 is MALFORMED_HTTP')
      t.match(answer.text, /\{"recorded":\d+\}/, 'the first answer is the upstream\'s, whole')
      t.equal(upstream.requests.length, before + 1, 'the POST ran once upstream')
    }
  })
}
