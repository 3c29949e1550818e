// The OpenAPI document at /docs/json: valid OpenAPI 3.1, every keygate endpoint with the error
// codes it can answer, both security schemes, and the business routes of the live route table
// (never the proxy's catch-all). /docs stays keygate's even under a catch-all route, and is off
// with KEYGATE_DOCS=off.
import { validate } from '@readme/openapi-parser'
import t from 'tap'
import { loadConfig } from '../../../../gateway/src/config/env.js'
import { route } from '../../../../gateway/src/proxy/route.js'
import { ERRORS } from '../../../../gateway/src/errors.js'
import { routesFromDocument } from '../../../../gateway/src/proxy/route-file.js'
import { RESERVED_PATHS } from '../../../../gateway/src/proxy/route-rules.js'
import { send } from '../../../helpers/http.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { routeFile } from '../../../helpers/routes.js'
import { startStack } from '../../../helpers/stack.js'

interface Operation {
  summary?: string
  security?: Array<Record<string, string[]>>
  responses: Record<string, { description: string; content?: Record<string, { examples?: Record<string, { value: { code: string; status: number } }> }> }>
  'x-keygate-errors'?: string[]
  'x-keygate-route'?: { name: string; match: string; auth: string }
}
interface OpenApiDocument {
  openapi: string
  info: { title: string; version: string; description: string }
  paths: Record<string, Record<string, Operation>>
  components: { securitySchemes: Record<string, Record<string, string>>; schemas: Record<string, unknown> }
}

const defaults = { bodyLimit: 1024, timeoutMs: 30_000 }

async function documentOf (url: string): Promise<OpenApiDocument> {
  const res = await send(url, '/docs/json')
  if (res.status !== 200) throw new Error(`/docs/json answered ${res.status}: ${res.text}`)
  return res.json<OpenApiDocument>()
}

/** every (status, code) an operation documents as problem+json */
function documentedProblems (operation: Operation): Array<[number, string]> {
  return Object.entries(operation.responses).flatMap(([status, response]) =>
    Object.values(response.content?.['application/problem+json']?.examples ?? {}).map((example): [number, string] => {
      if (String(example.value.status) !== status) throw new Error(`example ${example.value.code} has status ${example.value.status} under ${status}`)
      return [Number(status), example.value.code]
    }))
}

t.test('the document is valid OpenAPI 3.1 and lists every keygate endpoint and configured route', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const doc = await documentOf(gw.url)
  t.equal(doc.openapi, '3.1.0')
  t.equal(doc.info.title, 'keygate')
  t.match(doc.info.description, /signing string/)

  const result = await validate(structuredClone(doc) as unknown as Parameters<typeof validate>[0])
  t.ok(result.valid, `validates as OpenAPI: ${result.valid ? '' : result.errors.map((e) => e.message).join('; ')}`)
  t.equal(result.specification, 'OpenAPI')

  for (const path of RESERVED_PATHS) t.ok(doc.paths[path], `keygate's own ${path} is documented`)
  t.ok(doc.paths['/v1/api-keys/{apiKey}/usage']?.get, 'and the usage of one of your keys')
  const configured = ['/v1/clients/', '/v1/transactions/']
  for (const path of configured) t.ok(doc.paths[path], `the configured route ${path} is documented`)
  const others = Object.keys(doc.paths).filter((path) => !configured.includes(path) && !RESERVED_PATHS.includes(path))
  t.same(others.filter((path) => !RESERVED_PATHS.some((own) => path.startsWith(`${own}/`))), [],
    'nothing else but keygate\'s endpoints (and their sub-resources): no catch-all "/" or "/*", no /docs paths')
  t.notOk(Object.keys(doc.paths).some((path) => path.includes('*') || path.startsWith('/docs')), 'no wildcard, no docs route')
  t.same(Object.keys(doc.paths['/v1/auth/token'] ?? {}), ['post'])
  t.same(Object.keys(doc.paths['/v1/clients/'] ?? {}).sort(), ['get', 'post'])
})

/**
 * Codes an operation answers under another status than the catalog's, as its contract says: key
 * registration's proof of possession (CONTRACT.md: 400), and the token endpoint's DPoP proof and
 * nonce (RFC 9449 §5 and §8: an authorization server's 400 invalid_dpop_proof, use_dpop_nonce).
 */
const OWN_STATUS: Readonly<Record<string, Readonly<Record<string, number>>>> = {
  'post /v1/api-keys': { INVALID_SIGNATURE: 400 },
  'post /v1/auth/token': { INVALID_DPOP_PROOF: 400, USE_DPOP_NONCE: 400 }
}

t.test('each operation lists the catalog codes it can answer, as problem+json', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const doc = await documentOf(gw.url)
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const problems = documentedProblems(operation)
      t.ok(problems.length > 0, `${method} ${path} documents its errors`)
      for (const [status, code] of problems) {
        t.ok(code in ERRORS, `${method} ${path}: ${code} is a catalog code`)
        const expected = OWN_STATUS[`${method} ${path}`]?.[code] ?? ERRORS[code as keyof typeof ERRORS].status
        t.equal(status, expected, `${method} ${path}: ${code} under its status`)
      }
      t.same(
        [...new Set(problems.map(([, code]) => code))].sort(),
        [...operation['x-keygate-errors'] ?? []].sort(),
        `${method} ${path}: x-keygate-errors lists the same codes`
      )
    }
  }
  const token = documentedProblems(doc.paths['/v1/auth/token']?.post as Operation)
  for (const expected of [
    [401, 'INVALID_CREDENTIALS'], [429, 'RATE_LIMITED'], [400, 'VALIDATION_FAILED'], [415, 'UNSUPPORTED_MEDIA_TYPE'], [503, 'STORE_UNAVAILABLE']
  ]) {
    t.ok(token.some(([s, c]) => s === expected[0] && c === expected[1]), `POST /v1/auth/token: ${expected[1]} ${expected[0]}`)
  }
  const register = documentedProblems(doc.paths['/v1/api-keys']?.post as Operation)
  for (const expected of [[400, 'INVALID_SIGNATURE'], [400, 'INVALID_PUBLIC_KEY'], [409, 'DUPLICATE_KEY'], [401, 'MISSING_TOKEN'], [401, 'INVALID_TOKEN'],
    [403, 'KEY_LIMIT_REACHED']]) {
    t.ok(register.some(([s, c]) => s === expected[0] && c === expected[1]), `POST /v1/api-keys: ${expected[1]} ${expected[0]}`)
  }
  const business = documentedProblems(doc.paths['/v1/clients/']?.post as Operation)
  for (const code of [
    'MISSING_TOKEN', 'MISSING_SIGNATURE_HEADERS', 'TIMESTAMP_OUT_OF_RANGE', 'UNKNOWN_API_KEY',
    'KEY_OWNER_MISMATCH', 'REPLAYED_REQUEST', 'PAYLOAD_TOO_LARGE', 'UPSTREAM_TIMEOUT', 'RATE_LIMITED', 'INVALID_CONTENT_DIGEST'
  ]) {
    t.ok(business.some(([, c]) => c === code), `POST /v1/clients/: ${code}`)
  }
  t.ok(business.some(([s, c]) => s === 400 && c === 'AMBIGUOUS_SIGNED_BODY'), 'POST /v1/clients/: the seed body rule, 400 AMBIGUOUS_SIGNED_BODY')
  t.notOk(documentedProblems(doc.paths['/v1/clients/']?.get as Operation).some(([, c]) => c === 'AMBIGUOUS_SIGNED_BODY'), 'a GET has no body to refuse so')
  t.notOk(documentedProblems(doc.paths['/v1/clients/']?.get as Operation).some(([, c]) => c === 'REPLAYED_REQUEST'), 'a GET may repeat: no REPLAYED_REQUEST')
  t.ok(documentedProblems(doc.paths['/readyz']?.get as Operation).some(([s, c]) => s === 503 && c === 'STORE_UNAVAILABLE'))
  t.ok(doc.paths['/v1/auth/token']?.post?.responses['200'], 'the success answer from the route schema')
  t.ok(doc.paths['/v1/api-keys']?.post?.responses['201'])
})

t.test('security schemes: the bearer JWT and the three signature headers', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const doc = await documentOf(gw.url)
  const schemes = doc.components.securitySchemes
  t.match(schemes.bearerAuth, { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' })
  t.match(schemes.bearerAuth?.description, /POST \/v1\/auth\/token.*an access token that IdP issued.*<issuer name>:<subject>.*IDP_KEYS_UNAVAILABLE/s,
    'a bearer token: keygate\'s own, or a trusted identity provider\'s')
  t.match(schemes.apiKey, { type: 'apiKey', in: 'header', name: 'X-API-Key' })
  t.match(schemes.apiTimestamp, { type: 'apiKey', in: 'header', name: 'X-API-Timestamp', description: /milliseconds/ })
  t.match(schemes.apiSignature, { type: 'apiKey', in: 'header', name: 'X-API-Signature', description: /Timestamp.*method.*target.*body/s })
  t.same(doc.paths['/v1/clients/']?.get?.security, [{ bearerAuth: [], apiKey: [], apiTimestamp: [], apiSignature: [] }])
  t.same(doc.paths['/v1/api-keys']?.post?.security, [{ bearerAuth: [] }])
  t.equal(doc.paths['/v1/auth/token']?.post?.security, undefined, 'logging in needs no credentials')
})

t.test('a route file\'s routes: paths, methods and auth tiers; a catch-all "/" as "/" only; reloads show at once', async (t) => {
  const recorder = await startRecorder(t)
  const file = routeFile(t, `routes:
  - { name: orders, prefix: /orders/, upstream: ${recorder.url}, auth: signed, methods: [GET, PUT, DELETE] }
  - { name: status, path: /status, upstream: ${recorder.url}, auth: public, methods: [GET] }
  - { name: reports, prefix: /reports, upstream: ${recorder.url}, auth: bearer, methods: [GET] }
  - { name: everything, prefix: /, upstream: ${recorder.url}, auth: public, methods: [GET] }
`)
  const gw = await startStack(t, { store: 'memory', upstreamUrl: recorder.url, config: { routesFile: file.path } })
  const doc = await documentOf(gw.url)
  t.same(Object.keys(doc.paths['/orders/'] ?? {}).sort(), ['delete', 'get', 'put'])
  t.same(doc.paths['/orders/']?.put?.['x-keygate-route'], { name: 'orders', match: 'prefix', auth: 'signed' })
  t.ok(documentedProblems(doc.paths['/orders/']?.delete as Operation).some(([, c]) => c === 'REPLAYED_REQUEST'))
  // a signed DELETE carries no body (no bodyOnMethods): refused as malformed, never too large or ambiguous
  const orderDelete = documentedProblems(doc.paths['/orders/']?.delete as Operation).map(([, c]) => c)
  t.ok(orderDelete.includes('VALIDATION_FAILED'), 'DELETE /orders/: VALIDATION_FAILED (a body)')
  t.notOk(orderDelete.includes('PAYLOAD_TOO_LARGE') || orderDelete.includes('AMBIGUOUS_SIGNED_BODY'), 'DELETE /orders/: no body, so no body limit or body rule')
  t.ok(documentedProblems(doc.paths['/orders/']?.put as Operation).some(([, c]) => c === 'AMBIGUOUS_SIGNED_BODY'), 'PUT /orders/: AMBIGUOUS_SIGNED_BODY')
  t.same(doc.paths['/status']?.get?.['x-keygate-route'], { name: 'status', match: 'exact', auth: 'public' })
  t.same(doc.paths['/status']?.get?.security, [], 'a public route needs no credentials')
  t.same(doc.paths['/reports']?.get?.security, [{ bearerAuth: [] }])
  t.same(doc.paths['/']?.get?.['x-keygate-route'], { name: 'everything', match: 'prefix', auth: 'public' }, 'the configured catch-all is documented as "/"')
  t.notOk(doc.paths['/*'], 'the proxy\'s own catch-all never appears')
  const result = await validate(structuredClone(doc) as unknown as Parameters<typeof validate>[0])
  t.ok(result.valid, 'still valid OpenAPI')

  file.write(`routes:\n  - { name: billing, prefix: /billing/, upstream: ${recorder.url}, auth: signed, methods: [POST] }\n`)
  t.ok((await gw.app.keygate.routes.reload()).ok)
  const after = await documentOf(gw.url)
  t.same(Object.keys(after.paths['/billing/'] ?? {}), ['post'], 'a reloaded table shows without a restart')
  t.notOk(after.paths['/orders/'], 'and the old routes are gone')
  t.equal(recorder.requests.length, 0, 'the docs never reached the upstream')
})

t.test('/docs is keygate\'s own even under a catch-all route; business traffic still flows', async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startStack(t, {
    store: 'memory',
    upstreamUrl: recorder.url,
    routes: (upstream) => [route({ prefix: '/', upstream, auth: 'public' }, defaults)]
  })
  const page = await send(gw.url, '/docs')
  t.equal(page.status, 200)
  t.match(page.headers['content-type'], /text\/html/)
  t.match(page.text, /swagger-ui-bundle\.js/)
  t.match(String(page.headers['content-security-policy']), /default-src 'self'/, 'the page may load nothing from elsewhere')
  t.match(page.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  for (const asset of [
    '/docs/json', '/docs/yaml', '/docs/static/swagger-ui-bundle.js', '/docs/static/swagger-ui.css', '/docs/static/swagger-initializer.js', '/docs/'
  ]) {
    t.equal((await send(gw.url, asset)).status, 200, `${asset} is served by keygate`)
  }
  t.equal(recorder.requests.length, 0, 'nothing under /docs was forwarded')
  const business = await send(gw.url, '/docsx/page?a=1')
  t.equal(business.status, 200)
  t.same(recorder.requests.map((r) => r.url), ['/docsx/page?a=1'], 'a path beside /docs goes to the catch-all route')
  t.equal((await send(gw.url, '/docs/static/../../etc/passwd')).status, 400, 'no climbing out of the assets')
})

t.test('KEYGATE_DOCS=off: no document, no page', async (t) => {
  t.equal(loadConfig({}).docs, true, 'on by default')
  t.equal(loadConfig({ KEYGATE_DOCS: 'off' }).docs, false)
  t.throws(() => loadConfig({ KEYGATE_DOCS: 'no' }), { name: 'ConfigError', message: /^KEYGATE_DOCS:/ })
  const gw = await startStack(t, { store: 'memory', config: { docs: false } })
  for (const path of ['/docs', '/docs/json', '/docs/static/swagger-ui.css']) {
    const res = await send(gw.url, path)
    t.equal(res.status, 404, path)
    t.equal(res.json().code, 'NOT_FOUND')
  }
  t.equal((await send(gw.url, '/healthz')).status, 200)
})

t.test('a route file may not take /docs or anything under it', async (t) => {
  const at = (prefix: string, exact = false): unknown => ({ routes: [{ [exact ? 'path' : 'prefix']: prefix, upstream: 'http://127.0.0.1:9', auth: 'public' }] })
  for (const [document, what] of [
    [at('/docs'), 'prefix /docs'],
    [at('/docs/'), 'prefix /docs/'],
    [at('/docs/static/'), 'a prefix inside'],
    [at('/docs/json', true), 'an exact path inside'],
    [at('/docs', true), 'the exact path']
  ] as const) {
    t.throws(
      () => routesFromDocument(document, 'r.yaml', { ...defaults, upstream: 'http://127.0.0.1:9' }),
      { message: /would shadow keygate's own \/docs/ },
      what
    )
  }
  for (const prefix of ['/doc', '/docsx/', '/', '/v1/']) {
    t.doesNotThrow(() => routesFromDocument(at(prefix), 'r.yaml', { ...defaults, upstream: 'http://127.0.0.1:9' }), `${prefix} is allowed`)
  }
})
