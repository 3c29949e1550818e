// Canonical paths (issue #12, part 2): routes match the raw path, backends normalise it, so a
// weaker route could alias a stronger one. One recording upstream behind a bearer catch-all "/"
// and a signed /v1/clients/: every alias form of /v1/clients/42 (an encoded unreserved character,
// an encoded "/" or "\", "//", ";" parameters, dot segments) is refused with 400 INVALID_TARGET,
// with no credentials, with a token and correctly signed, and the upstream receives nothing. The
// same characters in the query pass. Then matrix parameters where a route allows them, and where
// the matching could be fooled by them.
import t, { type Test } from 'tap'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders, type TestKeyPair } from '../helpers/keys.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { uniqueTimestamp } from '../helpers/security.js'
import { addUser, login, registerKey, startTestGateway, testConfig, type GatewayHandle } from '../helpers/stack.js'

/** Each an alias of GET /v1/clients/42 for a backend that decodes or normalises, and the rule that refuses it. */
const ALIASES: Array<[target: string, rule: RegExp]> = [
  ['/v1/%63lients/42', /encoded unreserved character %63 \('c'\): send it unencoded/],
  ['/v1/%43lients/42', /encoded unreserved character %43 \('C'\)/],
  ['/v1/client%73/42', /encoded unreserved character %73 \('s'\)/],
  ['/%76%31/clients/42', /encoded unreserved character %76 \('v'\)/],
  ['/v1/clients/%34%32', /encoded unreserved character %34 \('4'\)/],
  ['/v1/clients/%7e42', /encoded unreserved character %7e \('~'\)/],
  ['/v1/clients%2F42', /encoded "\/" \(%2F\)/],
  ['/v1%2fclients/42', /encoded "\/" \(%2f\)/],
  ['/v1%5Cclients/42', /encoded "\\" \(%5C\)/],
  ['/v1%5cclients%5c42', /encoded "\\" \(%5c\)/],
  ['//v1/clients/42', /empty segment/],
  ['/v1//clients/42', /empty segment/],
  ['/v1/clients//42', /empty segment/],
  ['/v1/clients;x/42', /";" \(matrix parameters/],
  ['/v1;x/clients/42', /";" \(matrix parameters/],
  ['/v1/clients/42;jsessionid=1', /";" \(matrix parameters/],
  ['/v1/;/clients/42', /matrix parameters only/],
  ['/v1/.;x/clients/42', /"\." segment before matrix parameters/],
  ['/v1/./clients/42', /"\." or "\.\." segment/],
  ['/v1/x/../clients/42', /"\." or "\.\." segment/],
  ['/v1/x/..;/clients/42', /"\." or "\.\." segment/],
  ['/v1/x/%2e%2e/clients/42', /"\." or "\.\." segment/],
  ['/v1/%2e/clients/42', /"\." or "\.\." segment/],
  ['/v1/x/.%2E/clients/42', /"\." or "\.\." segment/]
]

/** The same characters after "?": no rule applies there. */
const QUERIES = ['?%63=1', '?next=%2F%2f&back=%5C', '?p=//a//b', '?m=;x;y', '?d=/../x/./y', '?t=%7e%2e', '?all=%63%2F//;%5c..']

interface Stack { gw: GatewayHandle; recorder: Recorder; token: string; keys: TestKeyPair }

async function stack (t: Test, routes: (upstream: string) => string): Promise<Stack> {
  const recorder = await startRecorder(t)
  const file = routeFile(t, routes(recorder.url))
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config: testConfig({ routesFile: file.path }) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'canonical')).status, 201)
  return { gw, recorder, token, keys }
}

type Credentials = 'none' | 'bearer' | 'signed'
async function get (s: Stack, target: string, credentials: Credentials): Promise<RawResponse> {
  const headers = credentials === 'none'
    ? {}
    : credentials === 'bearer'
      ? { authorization: `Bearer ${s.token}` }
      : signedHeaders({ keys: s.keys, token: s.token, method: 'GET', target, timestamp: uniqueTimestamp() })
  return await send(s.gw.url, target, { headers })
}

const CATCH_ALL_AND_CLIENTS = (upstream: string, catchAllExtra = ''): string => `
routes:
  - name: catch-all
    prefix: /
    upstream: ${upstream}
    auth: bearer${catchAllExtra}
  - name: clients
    prefix: /v1/clients/
    upstream: ${upstream}
    auth: signed
`

t.test('a bearer catch-all "/" and a signed /v1/clients/ on one upstream: no alias form gets through', async (t) => {
  const s = await stack(t, (upstream) => CATCH_ALL_AND_CLIENTS(upstream))
  let refused = 0
  for (const [target, rule] of ALIASES) {
    for (const credentials of ['none', 'bearer', 'signed'] as const) {
      const res = await get(s, target, credentials)
      const problem = res.json<{ code?: string; detail?: string }>()
      t.equal(res.status, 400, `${target} (${credentials}): 400`)
      t.equal(problem.code, 'INVALID_TARGET', `${target} (${credentials}): INVALID_TARGET, before authentication`)
      t.match(problem.detail, rule, `${target}: the detail names the rule`)
      if (res.status === 400 && problem.code === 'INVALID_TARGET') refused++
    }
  }
  t.equal(s.recorder.requests.length, 0, `${refused} of ${ALIASES.length * 3} alias requests refused; the upstream received nothing`)

  // the canonical form itself: signed passes, a token alone does not
  t.equal((await get(s, '/v1/clients/42', 'signed')).status, 200)
  t.equal((await get(s, '/v1/clients/42', 'bearer')).json().code, 'MISSING_SIGNATURE_HEADERS')
  t.equal(s.recorder.requests.length, 1)
})

t.test('the same characters in the query pass, forwarded byte for byte', async (t) => {
  const s = await stack(t, (upstream) => CATCH_ALL_AND_CLIENTS(upstream))
  for (const query of QUERIES) {
    for (const [target, credentials] of [[`/reports/x${query}`, 'bearer'], [`/v1/clients/42${query}`, 'signed']] as const) {
      const res = await get(s, target, credentials)
      t.equal(res.status, 200, `${target} (${credentials})`)
      t.equal(s.recorder.requests.at(-1)?.url, target, `${target}: received as sent`)
    }
  }
  t.equal(s.recorder.requests.length, QUERIES.length * 2)
})

t.test('keygate\'s own endpoints: refused before their own routing too', async (t) => {
  const s = await stack(t, (upstream) => CATCH_ALL_AND_CLIENTS(upstream))
  for (const target of ['/v1/%61uth/token', '/%68ealthz', '/v1/api-keys%2F', '/.well-known//jwks.json']) {
    const post = target.includes('auth')
    const res = await send(s.gw.url, target, { method: post ? 'POST' : 'GET', headers: { 'content-type': 'application/json' }, ...(post && { body: '{}' }) })
    t.equal(res.status, 400, target)
    t.equal(res.json().code, 'INVALID_TARGET', target)
  }
  t.equal(s.recorder.requests.length, 0)
})

t.test('matrix parameters: only where a route allows them, below its prefix, and never to steer matching', async (t) => {
  const s = await stack(t, (upstream) => `${CATCH_ALL_AND_CLIENTS(upstream, '\n    allowMatrixParams: true')}
  - name: items
    prefix: /v2/items/
    upstream: ${upstream}
    auth: signed
    allowMatrixParams: true
`)
  const refusedCases: Array<[string, Credentials, RegExp]> = [
    // the catch-all allows them, but these paths are /v1/clients/'s once the parameters are dropped
    ['/v1/clients;x/42', 'bearer', /route for this path does not take them/],
    ['/v1;x/clients/42', 'bearer', /route for this path does not take them/],
    ['/v1/clients/42;x', 'signed', /route for this path does not take them/],
    ['/v1/clients;x/42', 'signed', /route for this path does not take them/],
    // the route allows them, but not inside its prefix, which is matched as written
    ['/v2/items;x/a', 'signed', /inside its route's prefix: only the path below \/v2\/items\/ may carry them/]
  ]
  for (const [target, credentials, detail] of refusedCases) {
    const res = await get(s, target, credentials)
    t.equal(res.status, 400, `${target} (${credentials})`)
    t.match(res.json(), { code: 'INVALID_TARGET', detail }, target)
  }
  t.equal(s.recorder.requests.length, 0, 'none reached the upstream')

  const accepted: Array<[string, Credentials]> = [
    ['/reports;v=2/x', 'bearer'], ['/a/b;c=d;e/f;g', 'bearer'], ['/v2/items/a;v=1', 'signed'], ['/v2/items/a;v=1/b;w', 'signed']
  ]
  for (const [target, credentials] of accepted) {
    const res = await get(s, target, credentials)
    t.equal(res.status, 200, `${target} (${credentials})`)
    t.equal(s.recorder.requests.at(-1)?.url, target, `${target}: forwarded as signed, parameters and all`)
  }
  t.equal((await get(s, '/v2/items/a;v=1', 'bearer')).json().code, 'MISSING_SIGNATURE_HEADERS', 'the signed route still asks for a signature')
})

t.test('no route allows them: a ";" in the path is refused everywhere', async (t) => {
  const s = await stack(t, (upstream) => CATCH_ALL_AND_CLIENTS(upstream))
  for (const target of ['/reports;v=2/x', '/x;y', '/v1/clients/42;x']) {
    const res = await get(s, target, 'bearer')
    t.equal(res.status, 400, target)
    t.equal(res.json().code, 'INVALID_TARGET', target)
  }
  t.equal(s.recorder.requests.length, 0)
})
