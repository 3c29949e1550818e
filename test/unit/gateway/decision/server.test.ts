// The decision listener's own error paths (gateway/src/decision/server.ts), over a real gateway's
// decision listener: a body the proxy sends counts against the body memory as inline does;
// a problem too long for one header line goes to nginx without its extension members, still JSON
// with its code; nginx gets every refusal as 403 with the real status beside it.
import t from 'tap'
import { FORWARDED_DIGEST_HEADER } from '../../../../client/src/protocol/index.js'
import { PROBLEM_HEADER, STATUS_HEADER } from '../../../../gateway/src/decision/server.js'
import { send } from '../../../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../../../helpers/keys.js'
import { addUser, login, registerKey, startStack } from '../../../helpers/stack.js'

const problemOf = (res: { headers: Record<string, unknown> }): string => String(res.headers[PROBLEM_HEADER])
const DECISION = { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1'] }

t.test('decision listener error paths', async (t) => {
  const gateway = await startStack(t, { store: 'memory', config: { decision: DECISION, bodyMemoryLimit: 1024 } })
  const decisionUrl = await gateway.app.keygate.decisions?.listen({ port: 0, host: DECISION.host }) as string
  const ask = async (method: string, url: string, headers: Record<string, string>, body?: string) =>
    await send(decisionUrl, url, { method, headers, ...(body !== undefined && { body }) })
  await addUser(gateway, 'alice')
  const token = await login(gateway.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gateway.url, token, keys)).status, 201)

  t.test('Envoy\'s body past the body memory: 503 BODY_MEMORY_EXHAUSTED with Retry-After, as inline', async (t) => {
    const body = JSON.stringify({ name: 'x'.repeat(2000) })
    const res = await ask('POST', '/decide/envoy/v1/clients/',
      { host: 'api.test', 'content-type': 'application/json', ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }) }, body)
    t.equal(res.status, 503, res.text)
    t.equal(res.json<{ code: string }>().code, 'BODY_MEMORY_EXHAUSTED')
    t.equal(res.headers['retry-after'], '1')
    const small = '{"a":1}'
    const within = await ask('POST', '/decide/envoy/v1/clients/',
      { host: 'api.test', 'content-type': 'application/json', ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body: small }) }, small)
    t.equal(within.status, 200, `a body within it passes, so the first one's bytes were given back: ${within.text}`)
    t.equal(within.headers[FORWARDED_DIGEST_HEADER], undefined, 'keygate saw that body: nothing for the upstream to check')
  })

  t.test('a problem too long for a header line: nginx gets it without its extension members, still JSON, in 8 KB', async (t) => {
    const target = `/v1/clients/?q=${'a'.repeat(9000)}`
    const headers = { ...signedHeaders({ keys, token, method: 'GET', target }), 'x-api-signature': Buffer.alloc(256, 1).toString('base64') }
    const res = await ask('GET', '/decide/nginx',
      { ...headers, 'x-original-method': 'GET', 'x-original-uri': target, 'x-forwarded-host': 'api.test', 'x-original-content-length': '0' })
    t.equal(res.status, 403, 'to nginx, every refusal is a 403')
    t.equal(res.headers[STATUS_HEADER], '401', `with the real status beside it: ${problemOf(res)}`)
    t.equal(res.text, '', 'and no body')
    const problem = String(res.headers[PROBLEM_HEADER])
    t.ok(problem.length <= 8 * 1024, `X-Keygate-Problem holds ${problem.length} characters`)
    const parsed = JSON.parse(problem) as Record<string, unknown>
    t.same(Object.keys(parsed).sort(), ['code', 'detail', 'status', 'title', 'type'], 'the members every problem has, and no others')
    t.equal(parsed.code, 'INVALID_SIGNATURE')
    t.equal(parsed.status, 401)
    const envoy = await ask('GET', `/decide/envoy${target}`, { ...headers, host: 'api.test' })
    t.equal(envoy.status, 401, 'Envoy passes the body: the whole problem is in it')
    t.equal(envoy.json<{ target: string }>().target, target, 'extension members included')
    t.ok(String(envoy.headers[PROBLEM_HEADER]).length <= 8 * 1024)
  })
})
