// Path aliases through a weaker route (issue #20, point 2): a bearer catch-all "/" beside a signed
// /v1/clients/ on one recording upstream. Every spelling of a /v1/clients/ path that a backend
// reads as one (case folded, a trailing slash added or dropped, trailing dots, spaces, TABs or
// NULs trimmed from a segment) is refused before authentication with no credentials, a token
// alone and a signature over the alias, and the upstream receives nothing. The canonical paths
// are forwarded byte for byte, and so are the catch-all's own paths that merely look alike.
// Then the route file's say: backendNormalises, and routes on another upstream.
import t, { type Test } from 'tap'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders, type TestKeyPair } from '../helpers/keys.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { uniqueTimestamp } from '../helpers/security.js'
import { addUser, login, registerKey, startTestGateway, testConfig, type GatewayHandle } from '../helpers/stack.js'

/** Each an alias of a /v1/clients/ path, and the code that refuses it. */
const ALIASES: Array<[target: string, code: 'PATH_ALIAS' | 'INVALID_TARGET']> = [
  // the issue's
  ['/V1/CLIENTS/42', 'PATH_ALIAS'],
  ['/v1/Clients/42', 'PATH_ALIAS'],
  ['/V1/clients/', 'PATH_ALIAS'],
  ['/v1/clients', 'PATH_ALIAS'],
  ['/v1/clients?limit=1', 'PATH_ALIAS'],
  ['/v1/clients%20/42', 'PATH_ALIAS'],
  ['/v1/clients%09/42', 'INVALID_TARGET'],
  ['/v1/clients%00/42', 'INVALID_TARGET'],
  ['/v1/clients./42', 'PATH_ALIAS'],
  // mixed and more
  ['/v1/CLIENTS./42', 'PATH_ALIAS'],
  ['/V1/Clients%20/42', 'PATH_ALIAS'],
  ['/v1/clients%20%20/42', 'PATH_ALIAS'],
  ['/v1/clients.%20./42', 'PATH_ALIAS'],
  ['/v1/clients...', 'PATH_ALIAS'],
  ['/v1/clients%20', 'PATH_ALIAS'],
  ['/v1/clients.?limit=1', 'PATH_ALIAS'],
  ['/V1/CLIENTS', 'PATH_ALIAS'],
  ['/v1./clients/42', 'PATH_ALIAS'],
  ['/v1%20/clients/', 'PATH_ALIAS'],
  ['/v1/clientS/42/', 'PATH_ALIAS'],
  ['/v1/clients%2E/42', 'INVALID_TARGET'],
  ['/v1/clients%2e%2e/42', 'INVALID_TARGET'],
  ['/v1/clients%0d%0a/42', 'INVALID_TARGET'],
  ['/v1/clients%7F/42', 'INVALID_TARGET'],
  ['/v1/clients%1f/42', 'INVALID_TARGET']
]

/** The catch-all's own paths: near /v1/clients/ but no spelling of one. */
const CATCH_ALL_PATHS = [
  '/v1/clientsx', '/v1/clientsx/42', '/v1/client/42', '/v1/clients-archive/1', '/v1/clients_/1', '/V2/clients/42',
  '/v1/clients%21/42', '/v1/x/clients/42', '/reports/Q3./x%20', '/reports/', '/V1/', '/v1?clients/'
]

/** /v1/clients/ paths, sent as the route spells them. */
const CANONICAL = ['/v1/clients/', '/v1/clients/42', '/v1/clients/?limit=1', '/v1/clients/42?x=%2F', '/v1/clients/Mixed.Case']

interface Stack { gw: GatewayHandle; recorder: Recorder; token: string; keys: TestKeyPair }

async function stack (t: Test, routes: (upstream: string, other: string) => string): Promise<Stack & { other: Recorder }> {
  const [recorder, other] = [await startRecorder(t), await startRecorder(t)]
  const file = routeFile(t, routes(recorder.url, other.url))
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config: testConfig({ routesFile: file.path }) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'aliases')).status, 201)
  return { gw, recorder, other, token, keys }
}

type Credentials = 'none' | 'bearer' | 'signed'
async function request (s: Stack, target: string, credentials: Credentials, method = 'GET'): Promise<RawResponse> {
  const headers = credentials === 'none'
    ? {}
    : credentials === 'bearer'
      ? { authorization: `Bearer ${s.token}` }
      : signedHeaders({ keys: s.keys, token: s.token, method, target, timestamp: uniqueTimestamp() })
  return await send(s.gw.url, target, { method, headers })
}

const LAYOUT = (upstream: string, clientsExtra = '', catchAllUpstream = upstream): string => `
routes:
  - name: catch-all
    prefix: /
    upstream: ${catchAllUpstream}
    auth: bearer
  - name: clients
    prefix: /v1/clients/
    upstream: ${upstream}
    auth: signed
    methods: [GET, POST]${clientsExtra}
`

t.test('the issue\'s layout: no spelling of a /v1/clients/ path gets through the bearer catch-all', async (t) => {
  const s = await stack(t, (upstream) => LAYOUT(upstream))
  const codes: Record<string, number> = {}
  let requests = 0
  for (const [target, code] of ALIASES) {
    for (const [credentials, method] of [['none', 'GET'], ['bearer', 'GET'], ['bearer', 'DELETE'], ['signed', 'GET']] as const) {
      const res = await request(s, target, credentials, method)
      const problem = res.json<{ code?: string; detail?: string }>()
      t.equal(res.status, 400, `${method} ${target} (${credentials}): 400`)
      t.equal(problem.code, code, `${method} ${target} (${credentials}): ${code}, before authentication`)
      if (code === 'PATH_ALIAS') t.match(problem.detail, /route clients guards \(signed\).*Send it as clients spells it \(\/v1\/clients\/\.\.\.\)/, target)
      codes[String(problem.code)] = (codes[String(problem.code)] ?? 0) + 1
      requests++
    }
  }
  t.equal(s.recorder.requests.length, 0, `${requests} alias requests (${ALIASES.length} spellings x none, token GET and DELETE, signed): ` +
    `${JSON.stringify(codes)}; the upstream received nothing`)

  // the canonical paths: signed forwarded byte for byte, a token alone refused by the signed route
  for (const target of CANONICAL) {
    const before = s.recorder.requests.length
    t.equal((await request(s, target, 'signed')).status, 200, `${target} (signed)`)
    t.equal(s.recorder.requests.length, before + 1)
    t.equal(s.recorder.requests.at(-1)?.url, target, `${target}: received as sent`)
    t.equal((await request(s, target, 'bearer')).json().code, 'MISSING_SIGNATURE_HEADERS', `${target} (token alone)`)
  }
  const body = '{"name":"a"}'
  const signed = signedHeaders({ keys: s.keys, token: s.token, method: 'POST', target: '/v1/clients/', body, timestamp: uniqueTimestamp() })
  const signedPost = await send(s.gw.url, '/v1/clients/', { method: 'POST', body, headers: { 'content-type': 'application/json', ...signed } })
  t.equal(signedPost.status, 200, 'a signed POST to the canonical path')
  t.equal(s.recorder.requests.at(-1)?.body.toString(), body, 'its body byte for byte')

  // the catch-all's own paths are its own: forwarded with a token, byte for byte
  for (const target of CATCH_ALL_PATHS) {
    const res = await request(s, target, 'bearer')
    t.equal(res.status, 200, `${target} (token): forwarded`)
    t.equal(s.recorder.requests.at(-1)?.url, target, `${target}: received as sent`)
    t.equal((await request(s, target, 'none')).json().code, 'MISSING_TOKEN', `${target} (nothing): the catch-all still asks for a token`)
  }
  t.equal(s.recorder.requests.length, CANONICAL.length + 1 + CATCH_ALL_PATHS.length, 'nothing else reached the upstream')
})

t.test('backendNormalises: a route whose backend routes case-sensitively and keeps dots lets those spellings through, and only those', async (t) => {
  const s = await stack(t, (upstream) => LAYOUT(upstream, '\n    backendNormalises: [slash]'))
  for (const target of ['/V1/CLIENTS/42', '/v1/Clients/42', '/v1/clients./42', '/v1/clients%20/42']) {
    t.equal((await request(s, target, 'bearer')).status, 200, `${target}: the catch-all's, for a strict backend`)
    t.equal(s.recorder.requests.at(-1)?.url, target)
  }
  for (const target of ['/v1/clients', '/v1/clients?limit=1']) {
    const res = await request(s, target, 'bearer')
    t.equal(res.json().code, 'PATH_ALIAS', `${target}: the backend still drops the trailing slash`)
    t.match(res.json().detail, /to a backend that adds or drops a trailing slash, a path under \/v1\/clients\//)
  }
  t.equal(s.recorder.requests.length, 4)
})

t.test('routes on another upstream are not aliases: a backend serves only its own paths', async (t) => {
  const s = await stack(t, (upstream, other) => LAYOUT(upstream, '', other))
  for (const target of ['/V1/CLIENTS/42', '/v1/clients', '/v1/clients./42']) {
    t.equal((await request(s, target, 'bearer')).status, 200, `${target}: the catch-all's upstream serves no clients`)
    t.equal(s.other.requests.at(-1)?.url, target)
  }
  t.equal(s.recorder.requests.length, 0, 'the clients upstream received nothing')
  t.equal(s.other.requests.length, 3)
})
