// A route file in front of several upstreams on real sockets: each route's tier, methods,
// rewrite, headers, body limit, timeout and identity token, the most specific route winning,
// and unknown paths answered 404 without reaching any upstream.
import t from 'tap'
import { createLocalJWKSet, jwtVerify } from 'jose'
import { loadRouteFile } from '../../../../gateway/src/proxy/route-file.js'
import { send, sendRaw } from '../../../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../../../helpers/keys.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { routeFile } from '../../../helpers/routes.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, testConfig } from '../../../helpers/stack.js'

t.test('routes from a file', async (t) => {
  const a = await startRecorder(t)
  const b = await startRecorder(t)
  const slow = await startRecorder(t, { hang: true })
  const file = routeFile(t, `
routes:
  - prefix: /a/
    upstream: ${a.url}
    auth: public
    methods: [GET]
  - prefix: /a/deep/
    upstream: ${b.url}
    auth: public
  - path: /exact
    upstream: ${b.url}
    auth: bearer
  - prefix: /signed/
    upstream: ${a.url}
    auth: signed
    bodyLimit: 100
  - prefix: /rewrite/
    upstream: ${b.url}
    auth: public
    rewrite: /internal/
  - prefix: /headers/
    upstream: ${a.url}
    auth: bearer
    identityHeaders: { user: X-User }
    addHeaders: { X-Env: prod }
    removeHeaders: [Cookie]
  - prefix: /slow/
    upstream: ${slow.url}
    auth: public
    timeoutMs: 200
  - prefix: /base/
    upstream: ${b.url}/api/
    auth: public
  - prefix: /proof/
    name: proof
    upstream: ${a.url}
    auth: bearer
    identityToken: { header: X-Proof, ttlSeconds: 60 }
`)
  const config = testConfig({ routesFile: file.path })
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config, routes: undefined })
  t.equal(gw.app.keygate.routes.current.routes.length, 9, 'the file, not the built-in routes')
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const bearer = { authorization: `Bearer ${token}` }
  const total = (): number => a.requests.length + b.requests.length + slow.requests.length

  t.test('the most specific prefix wins; methods are per route', async (t) => {
    t.equal((await send(gw.url, '/a/x?q=1')).status, 200)
    t.equal(a.requests.at(-1)?.url, '/a/x?q=1')
    t.equal((await send(gw.url, '/a/deep/y')).status, 200)
    t.equal(b.requests.at(-1)?.url, '/a/deep/y', '/a/deep/ beats /a/')
    const post = await send(gw.url, '/a/x', { method: 'POST', body: 'x' })
    t.equal(post.status, 405)
    t.equal(post.json().code, 'METHOD_NOT_ALLOWED')
    t.equal(post.headers.allow, 'GET')
  })

  t.test('tiers are enforced per route', async (t) => {
    const before = total()
    t.equal((await send(gw.url, '/exact')).json().code, 'MISSING_TOKEN')
    t.equal((await send(gw.url, '/signed/x', { headers: bearer })).json().code, 'MISSING_SIGNATURE_HEADERS')
    t.equal(total(), before, 'nothing forwarded')
    const exact = await send(gw.url, '/exact', { headers: bearer })
    t.equal(exact.status, 200)
    t.equal(b.requests.at(-1)?.headers['x-gateway-user'], 'alice')
    t.equal((await send(gw.url, '/exact/more', { headers: bearer })).status, 404, 'an exact path is only that path')

    const keys = rsaKeyPair()
    await registerKey(gw.url, token, keys)
    const signed = await sendSigned(gw.url, { keys, token, method: 'PUT', target: '/signed/item?x=1', body: '{"v":1}' })
    t.equal(signed.status, 200)
    t.match(a.requests.at(-1), { method: 'PUT', url: '/signed/item?x=1', headers: { 'x-gateway-key': keys.apiKey } })
  })

  t.test('unknown paths get 404 and reach no upstream', async (t) => {
    const before = total()
    for (const target of ['/nothing', '/A/x', '/ab', '/v1/clients/', '/signed', '/']) {
      const res = await send(gw.url, target, { headers: bearer })
      t.equal(res.status, 404, target)
      t.equal(res.json().code, 'NOT_FOUND', target)
    }
    t.equal(total(), before)
  })

  t.test('rewrite and an upstream with a path', async (t) => {
    await send(gw.url, '/rewrite/x/y?q=%20')
    t.equal(b.requests.at(-1)?.url, '/internal/x/y?q=%20')
    await send(gw.url, '/base/z')
    t.equal(b.requests.at(-1)?.url, '/api/base/z')
  })

  t.test('headers added, removed, and identity under the route\'s names', async (t) => {
    await send(gw.url, '/headers/x', { headers: { ...bearer, cookie: 'session=1', 'x-user': 'mallory', 'x-env': 'dev', 'x-gateway-user': 'mallory' } })
    const seen = a.requests.at(-1)!
    t.equal(seen.headers['x-user'], 'alice')
    t.equal(seen.headers['x-env'], 'prod')
    t.notOk('cookie' in seen.headers)
    t.notOk('x-gateway-user' in seen.headers)
    t.equal(seen.rawHeaders.filter((h) => h.toLowerCase() === 'x-user').length, 1)
  })

  t.test('per-route body limit, declared or streamed', async (t) => {
    const keys = rsaKeyPair()
    await registerKey(gw.url, token, keys, 'limit')
    const before = total()
    const big = ` ${'x'.repeat(100)}`
    const declared = await sendSigned(gw.url, { keys, token, method: 'POST', target: '/signed/x', body: big })
    t.equal(declared.status, 413)
    t.equal(declared.json().code, 'PAYLOAD_TOO_LARGE')
    const headers = signedHeaders({ keys, token, method: 'POST', target: '/signed/x', body: big })
    const chunks = `40\r\n${big.slice(0, 64)}\r\n25\r\n${big.slice(64)}\r\n0\r\n\r\n`
    const streamed = await sendRaw(gw.url, 'POST /signed/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n' +
      `${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${chunks}`)
    t.equal(streamed.status, 413, 'a chunked body is cut off at the limit too')
    t.equal(total(), before)
    const fits = await sendSigned(gw.url, { keys, token, method: 'POST', target: '/signed/x', body: ` ${'x'.repeat(99)}` })
    t.equal(fits.status, 200)
  })

  t.test('per-route timeout: 504 UPSTREAM_TIMEOUT', async (t) => {
    const res = await send(gw.url, '/slow/x')
    t.equal(res.status, 504)
    t.equal(res.json().code, 'UPSTREAM_TIMEOUT')
  })

  t.test('an identity token a backend can verify with the JWKS', async (t) => {
    await send(gw.url, '/proof/1', { headers: { ...bearer, 'x-proof': 'forged' } })
    await send(gw.url, '/proof/2', { headers: bearer })
    const [first, second] = a.requests.slice(-2).map((r) => r.headers['x-proof'] as string)
    t.not(first, 'forged')
    t.equal(first, second, 'cached: one signature serves many requests')
    const jwks = (await send(gw.url, '/.well-known/jwks.json')).json()
    const { payload, protectedHeader } = await jwtVerify(first!, createLocalJWKSet(jwks as never), { issuer: 'keygate', audience: a.url })
    t.equal(payload.sub, 'alice')
    t.equal((payload.exp ?? 0) - (payload.iat ?? 0), 60)
    t.equal(protectedHeader.typ, 'keygate-identity+jwt')
    const asBearer = await send(gw.url, '/exact', { headers: { authorization: `Bearer ${first}` } })
    t.equal(asBearer.status, 401, 'an identity token is no bearer token')
  })

  t.test('routes check prints what the gateway loads', async (t) => {
    const routes = await loadRouteFile(file.path, config.routeDefaults)
    t.same(routes.map((r) => r.name), gw.app.keygate.routes.current.routes.map((r) => r.name))
  })
})
