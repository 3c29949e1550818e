// Properties of the signature, checked over thousands of generated requests (fast-check):
// a. at the signature stage: a signature over timestamp + METHOD + target + body stops verifying
//    when any single byte of any of the four changes;
// b. end to end: whatever the bytes of an accepted request, the upstream receives exactly the
//    signed method, target and body;
// c. end to end: a seed-signed body that starts with a byte a target may hold is refused with
//    AMBIGUOUS_SIGNED_BODY and never forwarded (the split is proven unique in seed-body-boundary.test.ts).
import { Agent } from 'node:http'
import { performance } from 'node:perf_hooks'
import { sign } from 'node:crypto'
import fc from 'fast-check'
import t from 'tap'
import { describedRequest } from '../helpers/auth-fixtures.js'
import { signatureStage } from '../../gateway/src/auth/signature.js'
import type { AuthState } from '../../gateway/src/auth/stage.js'
import { seedBodyProblem } from '../../client/src/protocol/index.js'
import { isGatewayError } from '../../gateway/src/errors.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, registerKey, startTestGateway } from '../helpers/stack.js'
import { sendOn, sha256, Tally, uniqueTimestamp } from '../helpers/security.js'

const MUTATION_RUNS = 10_000
const HTTP_RUNS = 10_000
/** requests sent side by side in one property run */
const BATCH = 8

/** RFC 3986 characters the gateway accepts in a target (request-target.ts), "%" included. */
const URI_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&\'()*+,;=:@/%?']

const keys = rsaKeyPair()
const key = { apiKey: keys.apiKey, owner: 'alice', name: 'k', keyObject: keys.publicKey }

type Field = 'timestamp' | 'method' | 'target' | 'body'
interface Parts { timestamp: string; method: string; target: string; body: Buffer }

function runStage (parts: Parts, signature: string): unknown {
  const request = describedRequest({
    headers: { 'x-api-key': keys.apiKey, 'x-api-timestamp': parts.timestamp, 'x-api-signature': signature },
    method: parts.method,
    url: parts.target,
    body: parts.body
  })
  const state: AuthState = { signatureHeaders: { apiKey: keys.apiKey, timestamp: parts.timestamp, signature }, key }
  try {
    void signatureStage().run(request, state)
    return undefined
  } catch (err) {
    return err
  }
}

/** One byte of a latin1 string (what the stage signs it as), or of the body, set to another value. */
function mutate (parts: Parts, field: Field, position: number, delta: number): Parts {
  if (field === 'body') {
    const body = Buffer.from(parts.body)
    const at = position % body.length
    body[at] = ((body[at] ?? 0) + delta) % 256
    return { ...parts, body }
  }
  const text = parts[field]
  const at = position % text.length
  const changed = String.fromCharCode((text.charCodeAt(at) + delta) % 256)
  return { ...parts, [field]: text.slice(0, at) + changed + text.slice(at + 1) }
}

t.test(`${MUTATION_RUNS} one-byte mutations of timestamp, method, target or body at the signature stage: ` +
  `${MUTATION_RUNS} refused with INVALID_SIGNATURE`, async (t) => {
  const byField = new Tally()
  let refused = 0
  let originalsAccepted = 0
  const started = performance.now()
  const parts = fc.record({
    timestamp: fc.integer({ min: 1_000_000_000_000, max: 9_999_999_999_999 }).map(String),
    method: fc.oneof(
      fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'),
      fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZ'), minLength: 1, maxLength: 12 })
    ),
    target: fc.string({ unit: fc.constantFrom(...URI_CHARS), maxLength: 200 }).map((rest) => '/' + rest),
    // arbitrary bytes: non-UTF-8 sequences, NUL, lone continuation bytes, all of 0-255
    body: fc.oneof(
      fc.uint8Array({ maxLength: 1024 }).map((bytes) => Buffer.from(bytes)),
      fc.string({ maxLength: 200 }).map((s) => Buffer.from(s, 'utf8'))
    )
  })
  fc.assert(fc.property(
    parts,
    fc.constantFrom<Field>('timestamp', 'method', 'target', 'body'),
    fc.nat(),
    fc.integer({ min: 1, max: 255 }),
    (original, wanted, position, delta) => {
      // a field with no byte to change (an empty body) hands the mutation to the target
      const field: Field = wanted === 'body' && original.body.length === 0 ? 'target' : wanted
      const signed = Buffer.concat([Buffer.from(original.timestamp + original.method + original.target, 'latin1'), original.body])
      const signature = sign('sha256', signed, keys.privateKey).toString('base64')
      if (runStage(original, signature) !== undefined) return false
      originalsAccepted++
      const changed = mutate(original, field, position, delta)
      const err = runStage(changed, signature)
      if (!isGatewayError(err) || err.code !== 'INVALID_SIGNATURE') return false
      refused++
      byField.add(field)
      return true
    }
  ), { numRuns: MUTATION_RUNS })
  t.equal(originalsAccepted, MUTATION_RUNS, 'every unmodified request verifies')
  t.equal(refused, MUTATION_RUNS, 'every one-byte change is refused')
  t.comment(`mutated field: ${byField.toString()}; ${((performance.now() - started) / 1000).toFixed(1)} s`)
})

// ---- b. over HTTP -------------------------------------------------------------------------

const SEGMENT_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~!$&\'()*+,;=:@']
/** in a path: no ";" (matrix parameters: the built-in routes take none, see canonical-paths.test.ts) */
const PATH_SEGMENT_CHARS = SEGMENT_CHARS.filter((c) => c !== ';')
/** percent-encodings a path may hold without the gateway refusing it (no unreserved character, slash or backslash) */
const PATH_ESCAPES = ['%20', '%25', '%3F', '%23', '%22', '%7b', '%7D', '%3B', '%c3%a9']
const hex = fc.constantFrom(...'0123456789abcdefABCDEF')
const pathSegment = fc.array(fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...PATH_SEGMENT_CHARS) },
  { weight: 1, arbitrary: fc.constantFrom(...PATH_ESCAPES) },
  { weight: 1, arbitrary: fc.constant('.') }
), { minLength: 1, maxLength: 12 }).map((units) => units.join(''))
  // "." and ".." segments are refused by contract; segments that merely start or end with ".." are
  // valid but hit a gateway bug (see 'targets with ".." inside a segment' below), so kept apart here
  .filter((segment) => !segment.startsWith('..') && !segment.endsWith('..') && segment !== '.')
/** a query may hold any URI character and any well-formed %XX, non-UTF-8 and dots included */
const query = fc.array(fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...SEGMENT_CHARS, '/', '?', '.', '=', '&') },
  { weight: 2, arbitrary: fc.tuple(hex, hex).map(([a, b]) => `%${a}${b}`) }
), { maxLength: 40 }).map((units) => units.join(''))
const target = fc.tuple(fc.array(pathSegment, { maxLength: 3 }), fc.boolean(), fc.option(query, { nil: undefined }))
  .map(([segments, trailingSlash, q]) =>
    '/v1/clients/' + segments.join('/') + (trailingSlash && segments.length > 0 ? '/' : '') + (q === undefined ? '' : '?' + q))

const jsonKey = fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'name', 'a'), fc.string({ maxLength: 6 }))
const jsonValue = fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.constant('{"isAdmin":true}'), fc.constant(null))
/** JSON text with duplicate keys and __proto__ / constructor members, spaced oddly */
const dupJson = fc.array(fc.tuple(jsonKey, jsonValue, fc.constantFrom('', ' ', '\n', '\t')), { minLength: 1, maxLength: 6 })
  .chain((members) => fc.constant(members.concat(members.slice(0, 1))))
  .map((members) => '{' +
    members.map(([k, v, ws]) => `${ws}${JSON.stringify(k)}${ws}:${typeof v === 'string' && v.startsWith('{') ? v : JSON.stringify(v)}`).join(',') +
    '}')
const BOM = Buffer.from([0xef, 0xbb, 0xbf])
const anyBody = fc.oneof(
  fc.uint8Array({ maxLength: 600 }).map((b) => Buffer.from(b)),
  fc.tuple(fc.uint8Array({ maxLength: 40 }), fc.constantFrom([0xff], [0xfe, 0xff], [0xc0, 0xae], [0xed, 0xa0, 0x80], [0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]))
    .map(([prefix, invalid]) => Buffer.concat([Buffer.from(prefix), Buffer.from(invalid)])),
  dupJson.map((json) => Buffer.from(json)),
  dupJson.map((json) => Buffer.concat([BOM, Buffer.from(json)])),
  fc.constant(Buffer.from('{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"isAdmin":true}}}')),
  fc.string({ maxLength: 100 }).map((s) => Buffer.concat([BOM, Buffer.from(s, 'utf8')])),
  fc.constant(Buffer.alloc(0))
)
/** what the seed scheme accepts: bodies that do not start with a byte a target may hold (c. has the others) */
const body = anyBody.filter((b) => seedBodyProblem(b) === undefined)
/** and what it refuses: a target byte first, then anything */
const ambiguousBody = fc.tuple(fc.constantFrom(...URI_CHARS), anyBody).map(([first, rest]) => Buffer.concat([Buffer.from(first), rest]))
const contentType = fc.constantFrom(
  'application/json', 'application/json; charset=utf-8', 'application/octet-stream', 'text/plain', 'application/x-www-form-urlencoded', undefined
)

const signAsync = async (data: Buffer): Promise<string> => await new Promise((resolve, reject) => {
  // the callback form signs on libuv's thread pool: the requests of a batch are signed in parallel
  sign('sha256', data, keys.privateKey, (err, signature) => { err === null ? resolve(signature.toString('base64')) : reject(err) })
})

interface SeedRequest { method: string; target: string; payload: Buffer; type?: string | undefined }

/** Sends the request seed-signed by `keys` for `token`'s user, at a timestamp of its own (what the upstream's copy is found by). */
async function sendSeedSigned (agent: Agent, url: string, token: string, { method, target, payload, type }: SeedRequest) {
  const timestamp = String(uniqueTimestamp())
  const signature = await signAsync(Buffer.concat([Buffer.from(timestamp + method + target, 'latin1'), payload]))
  const res = await sendOn(agent, url, target, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      'x-api-key': keys.apiKey,
      'x-api-timestamp': timestamp,
      'x-api-signature': signature,
      ...(type !== undefined && { 'content-type': type })
    },
    ...(method !== 'GET' && { body: payload })
  })
  return { timestamp, res }
}

const request = fc.record({ method: fc.constantFrom('POST', 'POST', 'POST', 'POST', 'GET'), target, body, type: contentType })

t.test(`${HTTP_RUNS} generated signed requests over HTTP: ${HTTP_RUNS} accepted, ` +
  `${HTTP_RUNS} forwarded with the signed method, target and body bytes (SHA-256 equal)`, async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: recorder.url })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  t.equal((await registerKey(gw.url, token, keys, 'property key')).status, 201)
  const agent = new Agent({ keepAlive: true, maxSockets: BATCH })
  t.teardown(() => { agent.destroy() })

  const statuses = new Tally()
  const kinds = new Tally()
  let forwardedExactly = 0
  let sent = 0
  const started = performance.now()
  // Each run is a batch of BATCH requests sent side by side on keep-alive connections; the
  // upstream's copy of each is found by its X-API-Timestamp, unique to the request.
  await fc.assert(fc.asyncProperty(fc.array(request, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
    const before = recorder.requests.length
    const results = await Promise.all(batch.map(async ({ method, target, body: generated, type }) => {
      const payload = method === 'GET' ? Buffer.alloc(0) : generated
      const { timestamp, res } = await sendSeedSigned(agent, gw.url, token, { method, target, payload, type })
      sent++
      statuses.add(res.status)
      return { method, target, payload, timestamp, res }
    }))
    if (recorder.requests.length !== before + batch.length) {
      throw new Error(`${recorder.requests.length - before} of ${batch.length} requests reached the upstream`)
    }
    const seenByTimestamp = new Map(recorder.requests.slice(before).map((seen) => [seen.headers['x-api-timestamp'], seen]))
    for (const { method, target, payload, timestamp, res } of results) {
      if (res.status !== 200) throw new Error(`${method} ${target} (${payload.length} bytes): ${res.status} ${res.body.toString()}`)
      const seen = seenByTimestamp.get(timestamp)
      if (seen === undefined) throw new Error(`${method} ${target}: not seen upstream`)
      if (seen.method !== method) throw new Error(`method ${seen.method} forwarded for ${method}`)
      if (seen.url !== target) throw new Error(`target ${seen.url} forwarded for ${target}`)
      if (sha256(seen.body) !== sha256(payload)) throw new Error(`${target}: body of ${seen.body.length} bytes forwarded for ${payload.length}`)
      forwardedExactly++
      kinds.add(payload.length === 0
        ? 'empty'
        : payload.subarray(0, 3).equals(BOM)
          ? 'bom'
          : !Buffer.from(payload.toString('utf8')).equals(payload) ? 'non-utf8' : 'utf8')
    }
  }), { numRuns: HTTP_RUNS / BATCH })
  const seconds = (performance.now() - started) / 1000
  t.equal(sent, HTTP_RUNS, 'requests sent')
  t.equal(forwardedExactly, HTTP_RUNS, 'each forwarded exactly as signed')
  t.comment(`statuses: ${statuses.toString()}; bodies: ${kinds.toString()}; ${seconds.toFixed(1)} s (${(seconds * 1000 / HTTP_RUNS).toFixed(2)} ms a request)`)
})

// Found by the property above: ".." next to a "/" inside a segment ("/a/..b") is refused by the
// proxy library after verification, so such a signed POST was verified, its signature spent by
// the replay check, and then refused. The gateway now refuses these targets up front, before any
// check, and nothing is spent.
const INNER_DOTS = ['/v1/clients/..a', '/v1/clients/a../', '/v1/clients/a../b', '/v1/clients/...', '/v1/clients/%2e%2eb', '/v1/clients/x/..%41']
t.test(`${INNER_DOTS.length} signed targets with ".." next to a "/": ` +
  `${INNER_DOTS.length} refused with 400 INVALID_TARGET before any check, 0 forwarded`, async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: recorder.url })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  await registerKey(gw.url, token, keys, 'dots key')
  const agent = new Agent({ keepAlive: false })
  t.teardown(() => { agent.destroy() })
  for (const target of INNER_DOTS) {
    const payload = Buffer.from('{"a":1}')
    const { res } = await sendSeedSigned(agent, gw.url, token, { method: 'POST', target, payload, type: 'application/json' })
    t.equal(res.status, 400, `${target}: refused`)
    t.match(res.body.toString(), /"code":"INVALID_TARGET"/, `${target}: as an invalid target`)
  }
  t.equal(recorder.requests.length, 0, 'none forwarded')
})

const AMBIGUOUS_RUNS = 2_000

t.test(`${AMBIGUOUS_RUNS} generated seed-signed requests whose body starts with a byte a target may hold: ` +
  `${AMBIGUOUS_RUNS} refused with 400 AMBIGUOUS_SIGNED_BODY, 0 forwarded`, async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: recorder.url })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  t.equal((await registerKey(gw.url, token, keys, 'property key')).status, 201)
  const agent = new Agent({ keepAlive: true, maxSockets: BATCH })
  t.teardown(() => { agent.destroy() })
  const firstBytes = new Tally()
  let refused = 0
  const started = performance.now()
  await fc.assert(fc.asyncProperty(fc.array(fc.record({ target, body: ambiguousBody, type: contentType }), { minLength: BATCH, maxLength: BATCH }),
    async (batch) => {
      await Promise.all(batch.map(async ({ target, body: payload, type }) => {
        const { res } = await sendSeedSigned(agent, gw.url, token, { method: 'POST', target, payload, type })
        const code = (JSON.parse(res.body.toString()) as { code?: string }).code
        if (res.status !== 400 || code !== 'AMBIGUOUS_SIGNED_BODY') throw new Error(`POST ${target} (${payload.length} bytes): ${res.status} ${code ?? ''}`)
        refused++
        firstBytes.add(/[0-9]/.test(String.fromCharCode(payload[0] ?? 0)) ? 'digit' : /[A-Za-z]/.test(String.fromCharCode(payload[0] ?? 0)) ? 'letter' : 'other')
      }))
    }), { numRuns: AMBIGUOUS_RUNS / BATCH })
  t.equal(refused, AMBIGUOUS_RUNS, 'each refused')
  t.equal(recorder.requests.length, 0, 'none forwarded')
  t.comment(`first byte: ${firstBytes.toString()}; ${((performance.now() - started) / 1000).toFixed(1)} s`)
})
