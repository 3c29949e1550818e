// What reaches the upstream, checked at a recording upstream: exactly the verified bytes, the
// gateway's identity headers and nothing a client sent in their place; nothing at all for a
// request the gateway refuses. Plus the proxy's own failures (413, 502, 504, 400).
import { createHash } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { defaultRoutes } from '../../../../gateway/src/proxy/route.js'
import { send, sendRaw } from '../../../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../../../helpers/keys.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { freePort } from '../../../helpers/redis.js'
import { addUser, login, registerKey, sendSigned, startTestGateway } from '../../../helpers/stack.js'

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

t.test('forwarding to a recording upstream', async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: recorder.url,
    routes: (upstream) => defaultRoutes({ upstream, bodyLimit: 1024, timeoutMs: 30_000 })
  })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'alice key')).status, 201)
  const last = () => recorder.requests.at(-1)

  t.test('client-sent identity headers never reach the upstream', async (t) => {
    const before = recorder.requests.length
    const res = await sendSigned(gw.url, {
      keys,
      token,
      method: 'GET',
      target: '/v1/clients/',
      headers: {
        'x-gateway-user': 'mallory',
        'X-Gateway-Key': 'forged',
        'x-gateway-key-name': 'forged',
        'x-gateway-admin': 'true',
        'x-gateway-scopes': 'admin',
        connection: 'x-gateway-user, authorization'
      }
    })
    t.equal(res.status, 200)
    t.equal(recorder.requests.length, before + 1)
    const seen = last()!
    t.equal(seen.headers['x-gateway-user'], 'alice')
    t.equal(seen.headers['x-gateway-key'], keys.apiKey)
    t.equal(seen.headers['x-gateway-key-name'], 'alice key')
    t.notOk('x-gateway-admin' in seen.headers)
    t.notOk('authorization' in seen.headers, 'the bearer token stays at the gateway')
    t.notOk('x-api-signature' in seen.headers)
    const identityLines = seen.rawHeaders.filter((_, i) => i % 2 === 0).map((h) => h.toLowerCase()).filter((h) => h.startsWith('x-gateway-'))
    t.same(identityLines.sort(), ['x-gateway-key', 'x-gateway-key-name', 'x-gateway-scopes', 'x-gateway-user'], 'each identity header exactly once')
    t.equal(seen.headers['x-gateway-scopes'], '', 'the scopes the gateway knows (alice has none), never the client\'s')
    t.equal(seen.headers['x-api-key'], keys.apiKey, 'other client headers pass')
  })

  t.test('keygate\'s own headers and answer fields sent by a client never reach the upstream', async (t) => {
    const forged = {
      'x-keygate-identity': 'forged.jwt.token',
      'x-keygate-content-digest': 'sha-256=:forged:',
      'x-keygate-status': '200',
      'x-keygate-problem': '{}',
      x_keygate_status: '200',
      ratelimit: '"forged";r=9;t=1',
      'ratelimit-policy': '"forged";q=9;w=1'
    }
    const res = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/?forged', headers: forged })
    t.equal(res.status, 200)
    const seen = last()!
    t.equal(seen.url, '/v1/clients/?forged')
    const names = seen.rawHeaders.filter((_, i) => i % 2 === 0).map((h) => h.toLowerCase())
    for (const name of Object.keys(forged)) t.notOk(names.includes(name), `${name} is not forwarded`)
    t.equal(seen.headers['x-api-key'], keys.apiKey, 'the key id and timestamp pass, as before')
    t.ok(seen.headers['x-api-timestamp'])
  })

  t.test('the upstream receives exactly the signed method, target and body bytes', async (t) => {
    const bodies: Array<[string, Buffer, string]> = [
      ['JSON with odd spacing and duplicate keys', Buffer.from('{ "a" :1,\n"a":2 , "__proto__": {"x":1}}  \n'), 'application/json'],
      ['bytes that are not UTF-8', Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80]), 'application/octet-stream'],
      ['a UTF-8 BOM', Buffer.from('\uFEFF{"name":"x"}'), 'application/json'],
      // (a seed-signed body starts with a byte no target holds: a quote here)
      ['text', Buffer.from('"plain" text body'), 'text/plain']
    ]
    for (const [name, body, contentType] of bodies) {
      const target = '/v1/clients/?b=2&a=1&a=%20x'
      const res = await sendSigned(gw.url, { keys, token, method: 'POST', target, body, headers: { 'content-type': contentType } })
      t.equal(res.status, 200, name)
      const seen = last()!
      t.equal(seen.method, 'POST', name)
      t.equal(seen.url, target, `${name}: target byte for byte, query order kept`)
      t.equal(sha256(seen.body), sha256(body), `${name}: body byte for byte`)
      t.equal(seen.headers['content-length'], String(body.length), name)
      t.equal(seen.headers['content-type'], contentType, name)
    }
  })

  t.test('a chunked body is verified and forwarded with its length', async (t) => {
    const body = '{"chunked":true}'
    const headers = signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body })
    const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
    const res = await sendRaw(gw.url, 'POST /v1/clients/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n' +
      `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n${lines}\r\n\r\n${chunked}`)
    t.equal(res.status, 200)
    t.equal(last()!.body.toString(), body)
    t.equal(last()!.headers['content-length'], String(body.length))
    t.notOk('transfer-encoding' in last()!.headers)
  })

  t.test('refused requests never reach the upstream', async (t) => {
    const before = recorder.requests.length
    const attempts: Array<[string, () => Promise<{ status: number }>, number]> = [
      ['no credentials', async () => await send(gw.url, '/v1/clients/'), 401],
      ['bad signature', async () => await send(gw.url, '/v1/clients/', {
        headers: { ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' }), 'x-api-signature': 'AAAA' }
      }), 401],
      ['body over the limit', async () => await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body: 'x'.repeat(1025) }), 413],
      ['a GET with a body', async () => await send(gw.url, '/v1/clients/', {
        headers: signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/', body: 'x' }),
        body: 'x'
      }), 400],
      ['a method the route does not allow', async () => await sendSigned(gw.url, { keys, token, method: 'DELETE', target: '/v1/clients/' }), 405],
      ['a dot segment', async () => await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/../admin' }), 400],
      ['an encoded dot segment', async () => await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/%2e%2E/admin' }), 400]
    ]
    for (const [name, attempt, status] of attempts) {
      t.equal((await attempt()).status, status, name)
    }
    t.equal(recorder.requests.length, before, 'none was forwarded')
    const tooLarge = await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body: 'x'.repeat(1025) })
    t.equal(tooLarge.json().code, 'PAYLOAD_TOO_LARGE')
    const wrongMethod = await sendSigned(gw.url, { keys, token, method: 'DELETE', target: '/v1/clients/' })
    t.equal(wrongMethod.json().code, 'METHOD_NOT_ALLOWED')
    t.equal(wrongMethod.headers.allow, 'GET, POST')
  })

  t.test('request targets a URI may not carry are refused with 400 before any check', async (t) => {
    const before = recorder.requests.length
    const targets = [
      '/v1/clients/ x', '/v1/clients/"', '/v1/clients/{', '/v1/clients/}', '/v1/clients/<', '/v1/clients/>',
      '/v1/clients/\\', '/v1/clients/^', '/v1/clients/`', '/v1/clients/|', '/v1/clients/\u00e9', '/v1/clients/%zz',
      '/v1/clients/#frag', 'http://evil.example/v1/clients/', '*'
    ]
    for (const target of targets) {
      const res = await sendRaw(gw.url, Buffer.from(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, 'utf8'))
      t.equal(res.status, 400, JSON.stringify(target))
    }
    const problem = await sendRaw(gw.url, 'GET /v1/clients/{x} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    t.match(problem.text, /"code":"INVALID_TARGET"/)
    t.equal(recorder.requests.length, before)
  })
})

t.test('upstream failures', async (t) => {
  t.test('an upstream that refuses connections: 502 UPSTREAM_UNAVAILABLE', async (t) => {
    const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: `http://127.0.0.1:${await freePort()}` })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    await registerKey(gw.url, token, keys)
    const res = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
    t.equal(res.status, 502)
    t.equal(res.json().code, 'UPSTREAM_UNAVAILABLE')
  })

  /** alice's signed GET through a gateway whose route waits 300 ms for `upstreamUrl`'s answer */
  const signedGetWithin300ms = async (t: Test, upstreamUrl: string): ReturnType<typeof sendSigned> => {
    const gw = await startTestGateway(t, {
      store: 'memory',
      upstreamUrl,
      routes: (upstream) => defaultRoutes({ upstream, bodyLimit: 1024, timeoutMs: 300 })
    })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    await registerKey(gw.url, token, keys)
    return await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
  }

  t.test('an upstream that does not answer in time: 504 UPSTREAM_TIMEOUT', async (t) => {
    const hanging = await startRecorder(t, { hang: true })
    const res = await signedGetWithin300ms(t, hanging.url)
    t.equal(res.status, 504)
    t.equal(res.json().code, 'UPSTREAM_TIMEOUT')
    t.equal(hanging.requests.length, 1)
  })

  t.test('an upstream that sends its headers, then no body in time: 504 UPSTREAM_TIMEOUT, not 500', async (t) => {
    // a streamed answer (no Content-Length) whose headers came and whose first byte never does:
    // nothing of it reached the client yet (its headers go with its first byte), so the client is
    // told what happened (as an MCP server's quiet SSE answer did: docs/mcp.md, "Tested with")
    const stalled = createServer((_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders() })
    await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve))
    t.teardown(async () => { stalled.closeAllConnections(); await new Promise((resolve) => stalled.close(resolve)) })
    const res = await signedGetWithin300ms(t, `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`)
    t.equal(res.status, 504)
    t.equal(res.json().code, 'UPSTREAM_TIMEOUT')
  })
})
