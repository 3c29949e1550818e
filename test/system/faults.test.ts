// Faults under load: Redis going away and coming back, and upstreams that fail. Nothing
// unverified is forwarded, known keys keep serving safe requests, what needs the store fails fast,
// and everything works again soon after the store returns.
import { Agent, request } from 'node:http'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { startRelay } from '../helpers/relay.js'
import { addUser, login, registerKey, sendSigned, startTestGateway } from '../helpers/stack.js'

interface Outcome { status: number; code: string | undefined; ms: number }

async function timed (agent: Agent, url: string, target: string, method: string, headers: Record<string, string>, body?: string): Promise<Outcome> {
  const { hostname, port } = new URL(url)
  const started = performance.now()
  return await new Promise((resolve) => {
    const req = request({
      host: hostname,
      port,
      path: target,
      method,
      headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }) },
      agent
    }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => { text += c.toString() })
      res.on('end', () => {
        let code: string | undefined
        try { code = (JSON.parse(text) as { code?: string }).code } catch {}
        resolve({ status: res.statusCode ?? 0, code, ms: performance.now() - started })
      })
    })
    req.on('error', () => { resolve({ status: -1, code: undefined, ms: performance.now() - started }) })
    req.end(body)
  })
}

t.test('Redis down and back, under load', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('faults')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const relay = await startRelay(t, new URL(redisUrl))
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, {
    store: 'redis',
    redisPrefix: prefix,
    upstreamUrl: recorder.url,
    config: { redisUrl: relay.url, redisCommandTimeoutMs: 500 }
  })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(gw.url, token, keys)
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200, 'the key is known (and cached)')
  const agent = new Agent({ keepAlive: true, maxSockets: 8 })
  t.teardown(() => { agent.destroy() })

  // Load: signed GETs (a cached key needs no store) and signed POSTs (the replay check needs it).
  const phase: { name: string; outcomes: Map<string, Outcome[]> } = { name: 'before', outcomes: new Map() }
  let running = true
  const record = (kind: string, outcome: Outcome): void => {
    const key = `${phase.name} ${kind}`
    phase.outcomes.set(key, [...(phase.outcomes.get(key) ?? []), outcome])
  }
  let serial = 0
  const loop = async (kind: 'GET' | 'POST'): Promise<void> => {
    // eslint-disable-next-line no-unmodified-loop-condition -- the test sets it to false when it is done
    while (running) {
      // Two POST loops signing the same body in the same millisecond would make one signature
      // twice, and the second a replay: each body is distinct.
      const body = kind === 'POST' ? `{"n":${serial++}}` : undefined
      const headers = signedHeaders({ keys, token, method: kind, target: '/v1/clients/', body })
      record(kind, await timed(agent, gw.url, '/v1/clients/', kind, headers, body))
    }
  }
  const loops = [loop('GET'), loop('GET'), loop('POST'), loop('POST')]
  await new Promise((resolve) => setTimeout(resolve, 300))

  phase.name = 'down'
  const forwardedBefore = recorder.requests.length
  await relay.cut()
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const forwardedWhileDown = recorder.requests.slice(forwardedBefore).filter((r) => r.method === 'POST').length

  phase.name = 'back'
  const restoredAt = performance.now()
  await relay.restore()
  // From the moment Redis is back: when does every request succeed again?
  let recoveredMs = Number.NaN
  while (performance.now() - restoredAt < 10_000) {
    const body = '{"n":2}'
    const post = await timed(agent, gw.url, '/v1/clients/', 'POST', signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), body)
    if (post.status === 200) { recoveredMs = performance.now() - restoredAt; break }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  await new Promise((resolve) => setTimeout(resolve, 300))
  phase.name = 'after'
  await new Promise((resolve) => setTimeout(resolve, 300))
  running = false
  await Promise.all(loops)

  const summary = (key: string): string => {
    const list = phase.outcomes.get(key) ?? []
    const byStatus = list.reduce<Record<string, number>>((acc, o) => {
      const k = `${o.status}${o.code ? ' ' + o.code : ''}`
      acc[k] = (acc[k] ?? 0) + 1
      return acc
    }, {})
    return `${key}: ${JSON.stringify(byStatus)}, max ${Math.max(0, ...list.map((o) => o.ms)).toFixed(0)} ms`
  }
  for (const key of phase.outcomes.keys()) t.comment(summary(key))
  t.comment(`all traffic succeeded again ${recoveredMs.toFixed(0)} ms after Redis came back`)

  const down = (kind: string): Outcome[] => phase.outcomes.get(`down ${kind}`) ?? []
  t.ok(down('GET').length > 10, 'GETs kept coming while Redis was down')
  t.ok(down('GET').every((o) => o.status === 200), `known key, safe method: ${down('GET').length} GETs served without Redis`)
  const posts = down('POST').filter((o) => o.status !== 200)
  t.ok(
    posts.length > 0 && posts.every((o) => o.status === 503 && o.code === 'STORE_UNAVAILABLE'),
    `${posts.length} POSTs that need the store: 503 STORE_UNAVAILABLE`
  )
  t.ok(Math.max(...down('POST').map((o) => o.ms)) < 1500, 'none waited on the dead store much beyond the 500 ms command timeout')
  // (POSTs accepted just before the cut may be forwarded before it, or just after.)
  t.ok(
    forwardedWhileDown <= down('POST').filter((o) => o.status === 200).length,
    `no POST was forwarded unless it was accepted (${forwardedWhileDown} forwarded)`
  )
  t.ok(recoveredMs < 3000, `recovered within 3 s (${recoveredMs.toFixed(0)} ms)`)
  const after = [...(phase.outcomes.get('after GET') ?? []), ...(phase.outcomes.get('after POST') ?? [])]
  t.ok(after.length > 0 && after.every((o) => o.status === 200), `after recovery all ${after.length} requests succeed`)
})

t.test('upstream failures: 502 and 504 problem+json, and a POST is never retried', async (t) => {
  const resetting = await startRecorder(t, { reset: true })
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: resetting.url })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(gw.url, token, keys)
  const post = await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body: '{"a":1}' })
  t.equal(post.status, 502)
  t.equal(post.json().code, 'UPSTREAM_UNAVAILABLE')
  t.match(post.headers['content-type'], /^application\/problem\+json/)
  t.equal(resetting.requests.length, 1, 'a POST the upstream reset reached it once: not retried')
  const get = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
  t.equal(get.status, 502)
  t.equal(resetting.requests.length, 2, 'nor is a GET')
})
