// 10,000 malformed requests on raw sockets, generated from a fixed seed (fast-check's sampler),
// several connections at a time, to the token endpoint, key registration and the clients route:
// the gateway never crashes, never answers 5xx, answers every complete request, always with
// problem+json when the answer has a body, and forwards none of them.
import { sign } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { Writable } from 'node:stream'
import fc from 'fast-check'
import t from 'tap'
import { send } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, registerKey, startTestGateway } from '../helpers/stack.js'
import { exchange, pool, Tally, uniqueTimestamp, type Exchange } from '../helpers/security.js'

const COUNT = 10_000
const SEED = 20_240_601
const CONCURRENCY = 16

const ENDPOINTS = ['/v1/auth/token', '/v1/api-keys', '/v1/clients/'] as const
type Endpoint = typeof ENDPOINTS[number]
const KINDS = [
  'bad-json', 'odd-content-type', 'truncated-body', 'huge-headers', 'invalid-target', 'proto-payload', 'broken-framing', 'bad-request-line'
] as const
type Kind = typeof KINDS[number]
/** none: no credentials; bearer: a valid token; signed: token + a registered key + a signature that does not verify */
type Auth = 'none' | 'bearer' | 'signed'

interface Shape {
  endpoint: Endpoint
  kind: Kind
  auth: Auth
  /** the parts the kind fills in */
  pick: number
  text: string
  size: number
  bytes: Uint8Array
}

interface Case {
  kind: Kind
  endpoint: Endpoint
  auth: Auth
  bytes: Buffer
  /** Content-Length declares more than is sent, or the chunked body never ends; then the client closes */
  truncated: boolean
}

// ---- the pieces of malformed requests ---------------------------------------------------

const BAD_JSON = [
  '{', '}', '[', '{"username":', '{"username":"a","password":}', "{'username':'a'}", '{"a":NaN}', '{"a":1,}',
  '/* c */ {}', '{"a":1} trailing', '{"a":"\\x41"}', '{"a":"\\u12"}', '{"a":01}', '{"a":.5}', '{"a":+1}', 'nul',
  'tru', '"unterminated', '{"a":"b"', '{"a" "b"}', '{,}', '[1,,2]', '\u0000', '{"a":"\u0001"}', 'undefined', '\uFEFF\uFEFF{}',
  '{"a":Infinity}', '{"username":"a","password":"b"}{"x":1}', '{"a":1}}', '{{}}', '{"a":[}', '{"":"', '--', '0x10'
]
const ODD_CONTENT_TYPES = [
  'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json, text/plain',
  'APPLICATION/JSON', 'application/jsonx', 'application/json; charset=utf-16', 'application/json;;;', '', ' ', '*/*',
  'application/*', 'json', 'application/json; charset="', 'text/html; charset=utf-8', 'application/xml',
  'application/json; boundary=' + 'x'.repeat(2000), 'application/problem+json', 'application/octet-stream', 'image/png',
  'application/json\u0000', 'application/json\t; x=1'
]
/** never valid credentials or a valid registration: these must all be refused */
const ODD_TYPE_BODIES = [
  '{"username":1,"password":2}', '{"name":"k"}', 'a=1&b=2', '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--', '{}', '<a/>'
]
const PROTO_PAYLOADS = [
  '{"__proto__":{"isAdmin":true}}',
  '{"constructor":{"prototype":{"isAdmin":true}}}',
  '{"username":"alice","password":"x","__proto__":{"isAdmin":true}}',
  '{"username":"alice","password":"x","constructor":{"prototype":{"polluted":1}}}',
  '{"name":"k","publicKey":"x","signature":"y","__proto__":{"owner":"mallory"}}',
  '{"name":"k","publicKey":"x","signature":"y","constructor":{"prototype":{"owner":"mallory"}}}',
  '{"\\u005f_proto__":{"isAdmin":true}}',
  '{"__proto\\u005f_":{"isAdmin":true}}',
  '{"a":{"__proto__":{"isAdmin":true}}}',
  '[{"__proto__":{"isAdmin":true}}]',
  '{"__proto__":null}',
  '{"__proto__":[]}',
  '{"constructor":"x","prototype":"y"}',
  '{"constructor":{"prototype":null}}',
  '{"username":{"__proto__":"a"},"password":"b"}',
  '{"name":"__proto__","publicKey":"-----BEGIN PUBLIC KEY-----\\nAAAA\\n-----END PUBLIC KEY-----","signature":"AAAA"}',
  '{"toString":"x","valueOf":"y","hasOwnProperty":"z"}'
]
const INVALID_TARGET_SUFFIXES = [
  ' x', '\u0001', '\u007f', '\u00ff', '{', '}', '"', '<', '>', '|', '\\', '^', '`', '#frag', '%zz', '%', '%4', '%00',
  '%c0%ae%c0%ae/', '%ff', '\t', 'é', '\u0000', '..', '../x', '%2e%2e/x', '?x=%zz', '?\u0001', '//x', '%25%32%65'
]
const INVALID_TARGET_WHOLE = [
  '*', 'http://evil.example/v1/clients/', 'v1/clients/', '//v1/clients/', '/v1/%2F%2Fclients/', '\\v1\\clients\\', '/V1/CLIENTS/', '/v1/clients'
]
const BAD_METHODS = ['FOO', 'get', 'P0ST', 'POST ', 'CONNECT', 'TRACE', 'PRI', 'G\u0000T', 'POSTPOSTPOSTPOSTPOSTPOSTPOSTPOSTPOSTPOST']
const BAD_VERSIONS = ['HTTP/1.2', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1', 'http/1.1', 'HTTP/1.1 extra', 'HTTP/11', '']

function pickOf<T> (list: readonly T[], n: number): T {
  return list[n % list.length] as T
}

const shapeArb = fc.record({
  endpoint: fc.constantFrom(...ENDPOINTS),
  kind: fc.constantFrom(...KINDS),
  auth: fc.constantFrom<Auth>('none', 'bearer', 'signed'),
  pick: fc.nat(),
  text: fc.string({ maxLength: 60 }),
  size: fc.integer({ min: 1, max: 4000 }),
  bytes: fc.uint8Array({ maxLength: 200 })
})

interface Credentials { token: string; apiKey: string }

/** The raw bytes of one malformed request, built from its generated shape. */
function build (shape: Shape, credentials: Credentials): Case {
  const { kind, endpoint, pick, text, size, bytes } = shape
  // the token endpoint needs no credentials; the clients route may get a well-formed but wrong signature
  const auth: Auth = endpoint === '/v1/auth/token' ? 'none' : endpoint === '/v1/api-keys' && shape.auth === 'signed' ? 'bearer' : shape.auth
  let method = 'POST'
  let target: string = endpoint
  let version = 'HTTP/1.1'
  let headers: Array<[string, string]> = [['Host', 'gateway.test']]
  let body: Buffer = Buffer.alloc(0)
  let contentType: string | undefined = 'application/json'
  let framing: 'length' | 'none' | 'raw' = 'length'
  let truncated = false
  let declaredExtra = 0
  let rawBodyAndFraming: Buffer | undefined

  switch (kind) {
    case 'bad-json': {
      const variants = [
        () => Buffer.from(pickOf(BAD_JSON, pick)),
        // valid JSON cut short
        () => {
          const json = JSON.stringify({ username: text, password: text, n: [size, { x: text }] })
          return Buffer.from(json.slice(0, pick % json.length))
        },
        // raw bytes, mostly not UTF-8
        () => Buffer.from(bytes),
        // a JSON string holding bytes that are not UTF-8
        () => Buffer.concat([Buffer.from('{"username":"'), Buffer.from([0xff, 0xfe, 0xc0, 0xae]), Buffer.from(bytes), Buffer.from('","password":1}')]),
        // deep nesting
        () => Buffer.from('['.repeat(size) + ']'.repeat(pick % 2 === 0 ? size : 0)),
        () => Buffer.from('{"a":'.repeat(size) + '1' + '}'.repeat(size - 1))
      ]
      body = pickOf(variants, pick)()
      break
    }
    case 'odd-content-type':
      contentType = pick % 7 === 0 ? undefined : pickOf(ODD_CONTENT_TYPES, pick)
      body = Buffer.from(pickOf(ODD_TYPE_BODIES, pick >> 3))
      break
    case 'truncated-body': {
      body = Buffer.from(pickOf([...PROTO_PAYLOADS, ...BAD_JSON, '{"username":"alice","password":"' + text + '"}'], pick))
      truncated = true
      if (pick % 4 === 3) {
        // chunked, never finished
        framing = 'raw'
        headers.push(['Transfer-Encoding', 'chunked'])
        rawBodyAndFraming = Buffer.from(`${(body.length + size).toString(16)}\r\n${body.toString('latin1')}`, 'latin1')
      } else {
        declaredExtra = size
      }
      break
    }
    case 'huge-headers': {
      const variants = [
        () => { headers.push(['X-Big', 'a'.repeat(16 * 1024 + size)]) },
        () => { for (let i = 0; i < 400 + (size % 400); i++) headers.push([`X-H${i}`, 'v'.repeat(40)]) },
        () => { target = endpoint + '?q=' + 'a'.repeat(16 * 1024 + size) },
        () => { headers.push(['Cookie', 'c='.padEnd(64 * 1024 + size, 'x')]) },
        () => { headers.push(['Authorization', 'Bearer ' + 'x'.repeat(16 * 1024 + size)]) },
        () => { headers.push([`X-${'n'.repeat(16 * 1024 + size)}`, '1']) }
      ]
      pickOf(variants, pick)()
      body = Buffer.from('{}')
      break
    }
    case 'invalid-target':
      target = pick % 5 === 4 ? pickOf(INVALID_TARGET_WHOLE, pick >> 3) : endpoint + pickOf(INVALID_TARGET_SUFFIXES, pick >> 3)
      body = Buffer.from('{}')
      break
    case 'proto-payload':
      body = Buffer.from(pickOf(PROTO_PAYLOADS, pick))
      if (pick % 3 === 0) contentType = 'application/json; charset=utf-8'
      break
    case 'broken-framing': {
      framing = 'raw'
      const payload = pickOf(PROTO_PAYLOADS, pick)
      const variants: Array<() => void> = [
        () => { headers.push(['Transfer-Encoding', 'chunked']); rawBodyAndFraming = Buffer.from(`zz\r\n${payload}\r\n0\r\n\r\n`) },
        () => { headers.push(['Transfer-Encoding', 'chunked']); rawBodyAndFraming = Buffer.from(`-1\r\n${payload}\r\n0\r\n\r\n`) },
        () => { headers.push(['Transfer-Encoding', 'chunked']); rawBodyAndFraming = Buffer.from(`ffffffffffffffffffff\r\n${payload}\r\n0\r\n\r\n`) },
        () => { headers.push(['Transfer-Encoding', 'chunked']); rawBodyAndFraming = Buffer.from(`${payload.length.toString(16)}\r\n${payload}XX0\r\n\r\n`) },
        () => { headers.push(['Transfer-Encoding', 'chunked']); rawBodyAndFraming = Buffer.from(`${payload.length.toString(16)}\n${payload}\n0\n\n`) },
        () => {
          headers.push(['Content-Length', String(payload.length)], ['Transfer-Encoding', 'chunked'])
          rawBodyAndFraming = Buffer.from(`0\r\n\r\n${payload}`)
        },
        () => {
          headers.push(['Content-Length', `${payload.length}`], ['Content-Length', `${payload.length + 1}`])
          rawBodyAndFraming = Buffer.from(payload + 'x')
        },
        () => { headers.push(['Content-Length', `-${payload.length}`]); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['Content-Length', `${payload.length}abc`]); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['Content-Length', '1e3']); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['Content-Length', '99999999999999999999999']); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['Transfer-Encoding', 'gzip']); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['Transfer-Encoding', 'chunked, chunked']); rawBodyAndFraming = Buffer.from('0\r\n\r\n') },
        () => { headers.push(['Content-Length', String(payload.length)], ['Expect', 'x-teapot']); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['Bad Header', 'x'], ['Content-Length', String(payload.length)]); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['X-Ctl', 'a\u0001b'], ['Content-Length', String(payload.length)]); rawBodyAndFraming = Buffer.from(payload) },
        () => { headers.push(['Content-Length', String(payload.length)], [' X-Folded', 'y']); rawBodyAndFraming = Buffer.from(payload) }
      ]
      pickOf(variants, pick)()
      break
    }
    case 'bad-request-line': {
      const variants: Array<() => void> = [
        () => { method = pickOf(BAD_METHODS, pick >> 2) },
        () => { version = pickOf(BAD_VERSIONS, pick >> 2) },
        // HTTP/1.1 without Host
        () => { headers = headers.filter(([name]) => name !== 'Host') },
        () => { method = 'GET'; body = Buffer.from('{"a":1}') },
        () => { headers.push(['Upgrade', pick % 2 === 0 ? 'websocket' : 'h2c'], ['Connection', 'Upgrade']) }
      ]
      pickOf(variants, pick)()
      if (body.length === 0) body = Buffer.from('{"username":1}')
      break
    }
  }

  if (auth !== 'none') headers.push(['Authorization', `Bearer ${credentials.token}`])
  if (auth === 'signed') {
    const timestamp = String(uniqueTimestamp())
    // a real signature, but over other bytes than these: it must not verify
    const signature = sign('sha256', Buffer.from(timestamp + 'POST/v1/clients/other'), privateKeyFor(credentials)).toString('base64')
    headers.push(['X-API-Key', credentials.apiKey], ['X-API-Timestamp', timestamp], ['X-API-Signature', pick % 9 === 0 ? 'not base64!' : signature])
  }
  if (contentType !== undefined) headers.push(['Content-Type', contentType])
  if (framing === 'length') headers.push(['Content-Length', String(body.length + declaredExtra)])
  headers.push(['Connection', 'close'])
  const head = `${method} ${target} ${version}`.trimEnd() + '\r\n' + headers.map(([n, v]) => `${n}: ${v}\r\n`).join('') + '\r\n'
  return { kind, endpoint, auth, truncated, bytes: Buffer.concat([Buffer.from(head, 'latin1'), framing === 'raw' ? rawBodyAndFraming ?? body : body]) }
}

const privateKeys = new Map<string, ReturnType<typeof rsaKeyPair>['privateKey']>()
const privateKeyFor = (c: Credentials): ReturnType<typeof rsaKeyPair>['privateKey'] => privateKeys.get(c.apiKey) as ReturnType<typeof rsaKeyPair>['privateKey']

t.test(`${COUNT} malformed requests over raw sockets: 0 crashes, 0 5xx, 0 forwarded, ` +
  'every answer with a body problem+json, no answer only for truncated requests', async (t) => {
  const recorder = await startRecorder(t)
  const errorLines: string[] = []
  const logStream = new Writable({ write (chunk: Buffer, _enc, done) { errorLines.push(chunk.toString()); done() } })
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: recorder.url, logger: { level: 'error', stream: logStream } })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'malformed')).status, 201)
  privateKeys.set(keys.apiKey, keys.privateKey)
  const credentials = { token, apiKey: keys.apiKey }

  const shapes = fc.sample(shapeArb, { numRuns: COUNT, seed: SEED })
  const cases = shapes.map((shape) => build(shape, credentials))
  t.equal(cases.length, COUNT)

  const started = performance.now()
  const results = await pool(cases, CONCURRENCY, async (c) => await exchange(gw.url, c.bytes, { halfClose: c.truncated, timeoutMs: 15_000 }))
  const seconds = (performance.now() - started) / 1000

  const statuses = new Tally()
  const byKind = new Map<Kind, Tally>(KINDS.map((k) => [k, new Tally()]))
  const codes = new Tally()
  const failures: string[] = []
  // A CONNECT request goes to the server's 'connect' listener, not to Fastify: checked below.
  const connectUnanswered: string[] = []
  let answered = 0
  let silentTruncated = 0
  const describe = (c: Case, r: Exchange): string =>
    `${c.kind} ${c.endpoint} (${c.auth}${c.truncated ? ', truncated' : ''}): ${JSON.stringify(c.bytes.subarray(0, 160).toString('latin1'))} -> ` +
    `${r.responses.map((x) => x.status).join(',') || 'no answer'}${r.error !== undefined ? ` [${r.error}]` : ''}${r.timedOut ? ' [timed out]' : ''} ` +
    r.raw.subarray(0, 300).toString('latin1')
  cases.forEach((c, i) => {
    const r = results[i] as Exchange
    const kindTally = byKind.get(c.kind) as Tally
    if (r.timedOut) failures.push(`hung: ${describe(c, r)}`)
    if (r.responses.length === 0) {
      statuses.add('no answer')
      kindTally.add('no answer')
      if (c.truncated) silentTruncated++
      else if (c.bytes.subarray(0, 8).toString('latin1') === 'CONNECT ') connectUnanswered.push(describe(c, r))
      else failures.push(`no answer to a complete request: ${describe(c, r)}`)
      return
    }
    answered++
    if (r.responses.length > 1) failures.push(`${r.responses.length} answers to one request: ${describe(c, r)}`)
    for (const res of r.responses) {
      statuses.add(res.status)
      kindTally.add(res.status)
      if (res.status >= 500) failures.push(`5xx: ${describe(c, r)}`)
      else if (res.status < 400) failures.push(`not refused: ${describe(c, r)}`)
      if (res.body.length > 0) {
        if (!/^application\/problem\+json/i.test(res.headers['content-type'] ?? '')) {
          failures.push(`body that is not problem+json: ${describe(c, r)}`)
          continue
        }
        try {
          const problem = JSON.parse(res.body.toString('utf8')) as { status?: unknown; code?: unknown }
          if (problem.status !== res.status || typeof problem.code !== 'string') failures.push(`problem without status or code: ${describe(c, r)}`)
          codes.add(String(problem.code))
        } catch {
          failures.push(`problem+json that does not parse: ${describe(c, r)}`)
        }
      } else {
        codes.add(`(empty ${res.status})`)
      }
    }
  })

  const health = await send(gw.url, '/healthz')
  t.equal(health.status, 200, 'the gateway still answers /healthz: 0 crashes')
  t.equal(recorder.requests.length, 0, '0 malformed requests reached the upstream')
  t.same(failures.slice(0, 20), [], `${failures.length} answers break the rules (first 20 shown)`)
  // An upload abandoned on a business route (after the pre-body stages passed) surfaces as Node's
  // "aborted" (ECONNRESET) in the proxy's body parser: a client's doing, never an internal error.
  const aborted = errorLines.filter((line) => line.includes('"message":"aborted"') && line.includes('ECONNRESET'))
  const otherErrors = errorLines.filter((line) => !aborted.includes(line))
  t.same(otherErrors.slice(0, 3), [], `${otherErrors.length} errors logged by the gateway (first 3 shown)`)
  const truncatedCount = cases.filter((c) => c.truncated).length
  t.equal(aborted.length, 0, `0 of ${truncatedCount} abandoned uploads logged as an unhandled error (logged: ${aborted.length})`)
  const connects = cases.filter((c) => c.bytes.subarray(0, 8).toString('latin1') === 'CONNECT ').length
  t.same(connectUnanswered.slice(0, 2), [], `${connects} CONNECT requests: ${connects - connectUnanswered.length} answered with a 4xx`)
  t.comment(`${COUNT} requests (seed ${SEED}), ${CONCURRENCY} connections at a time, ${seconds.toFixed(1)} s`)
  t.comment(`by status: ${statuses.toString()}`)
  t.comment(`answered: ${answered}; truncated requests closed without an answer: ${silentTruncated} of ${cases.filter((c) => c.truncated).length}`)
  for (const [kind, tally] of byKind) t.comment(`  ${kind} (${tally.total}): ${tally.toString()}`)
  t.comment(`by code: ${codes.toString()}`)
})
