// Headers that change a request's meaning (issue #12, part 3): the signature covers the method,
// the target and the body, not headers, so X-HTTP-Method-Override, X-HTTP-Method,
// X-Method-Override, X-Original-URL and X-Rewrite-URL would let an upstream that honours them act
// on something else than what was verified. Against a running gateway and a recording upstream:
// none reaches the upstream on any tier, in any spelling; a route's keepHeaders forwards the ones
// it names, and only those.
import t from 'tap'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { uniqueTimestamp } from '../helpers/security.js'
import { addUser, login, registerKey, startTestGateway, testConfig } from '../helpers/stack.js'

const OVERRIDES: Record<string, string> = {
  'X-HTTP-Method-Override': 'DELETE',
  'X-HTTP-Method': 'DELETE',
  'X-Method-Override': 'DELETE',
  'X-Original-URL': '/admin/users',
  'X-Rewrite-URL': '/admin/users'
}
/** the same headers as CGI-style servers also read them, and in other cases */
const SPELLINGS: Record<string, string> = {
  x_http_method_override: 'PUT',
  'x-http-method-OVERRIDE': 'PATCH',
  X_Original_URL: '/admin'
}

t.test('stripped on every tier, unless a route keeps one by name', async (t) => {
  const recorder = await startRecorder(t)
  const file = routeFile(t, `
routes:
  - { prefix: /public/, upstream: ${recorder.url}, auth: public }
  - { prefix: /bearer/, upstream: ${recorder.url}, auth: bearer }
  - { prefix: /signed/, upstream: ${recorder.url}, auth: signed }
  - { prefix: /kept/, upstream: ${recorder.url}, auth: signed, keepHeaders: [X-HTTP-Method-Override, x-original-url] }
`)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config: testConfig({ routesFile: file.path }) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'overrides')).status, 201)
  const credentials = (tier: string, method: string, target: string): Record<string, string> =>
    tier === 'public'
      ? {}
      : tier === 'bearer'
        ? { authorization: `Bearer ${token}` }
        : signedHeaders({ keys, token, method, target, body: '{}', timestamp: uniqueTimestamp() })

  const overrideNames = Object.keys(OVERRIDES).map((name) => name.toLowerCase())
  for (const tier of ['public', 'bearer', 'signed']) {
    for (const [name, value] of Object.entries({ ...OVERRIDES, ...SPELLINGS })) {
      const target = `/${tier}/x`
      const res = await send(gw.url, target, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-other': 'kept', [name]: value, ...credentials(tier, 'POST', target) },
        body: '{}'
      })
      t.equal(res.status, 200, `${tier}: ${name} accepted`)
      const seen = recorder.requests.at(-1)
      t.equal(seen?.method, 'POST')
      const received = Object.keys(seen?.headers ?? {}).filter((h) => overrideNames.includes(h.replaceAll('_', '-')))
      t.same(received, [], `${tier}: ${name} not received upstream`)
      t.equal(seen?.headers['x-other'], 'kept', `${tier}: other client headers still are`)
    }
  }

  // all five at once, on the route that keeps two of them
  const target = '/kept/x'
  const headers = { 'content-type': 'application/json', ...OVERRIDES, ...credentials('signed', 'POST', target) }
  const res = await send(gw.url, target, { method: 'POST', headers, body: '{}' })
  t.equal(res.status, 200)
  const seen = recorder.requests.at(-1)?.headers ?? {}
  t.equal(seen['x-http-method-override'], 'DELETE', 'keepHeaders: x-http-method-override received')
  t.equal(seen['x-original-url'], '/admin/users', 'keepHeaders: x-original-url received')
  for (const name of ['x-http-method', 'x-method-override', 'x-rewrite-url']) t.notOk(name in seen, `${name}, not kept, still stripped`)
})
