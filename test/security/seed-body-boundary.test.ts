// One seed signature, one request (issue #20, point 1). The seed's signing string is timestamp +
// METHOD + target + body with no separator, so without a rule bytes could move between the end of
// the target and the start of the body under one signature. The rule (protocol core:
// seedBodyProblem): a non-empty body must start with a byte the target rule never admits.
// a. the property: for generated accepted (timestamp, method, target, body), adversarial at the
//    boundary, no other split of the same bytes into (timestamp', method', target', body') passes
//    the gateway's rules; and how many splits only the body rule stops (so the test can fail);
// b. on a running gateway with a recording upstream: the three attacks, on a default
//    route, a `replay: allow` route and a route taking a body on DELETE, refused with 0 forwarded;
//    JSON accepted; a form body with RFC 9421; a route with `seedBodyBoundary: unchecked` takes it.
import { performance } from 'node:perf_hooks'
import fc from 'fast-check'
import t from 'tap'
import { signRequest } from '../../client/src/index.js'
import {
  HTTP_METHODS, isTargetByte, MILLISECONDS_TIMESTAMP, requestTargetProblem, seedBodyProblem, signedBodyMethodProblem, TARGET_CHARACTER
} from '../../client/src/protocol/index.js'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { routesFromYaml } from '../helpers/routes.js'
import { Tally, uniqueTimestamp } from '../helpers/security.js'
import { addUser, login, registerKey, startTestGateway } from '../helpers/stack.js'

const RUNS = 16_000
/** the most lenient body setting a signed route can have: the body rule alone must make the split unique */
const BODY_ON_METHODS = ['DELETE', 'OPTIONS']

interface Parts { timestamp: string; method: string; target: string; body: Buffer }

/** Everything the gateway checks of a seed-signed request's four parts before its signature, by the gateway's own functions. */
function refusal (parts: Parts, bodyRule = true): string | undefined {
  if (!MILLISECONDS_TIMESTAMP.test(parts.timestamp)) return 'timestamp'
  if (!(HTTP_METHODS as readonly string[]).includes(parts.method)) return 'method'
  if (requestTargetProblem(parts.target) !== undefined) return 'target'
  if (parts.body.length > 0 && signedBodyMethodProblem(parts.method, BODY_ON_METHODS) !== undefined) return 'body on method'
  if (bodyRule && seedBodyProblem(parts.body) !== undefined) return 'body rule'
  return undefined
}

/**
 * Every split of the signing-string bytes into (timestamp', method', target', body') that passes
 * the rules. Pruned from the left (a timestamp' or method' that fails needs no longer look), but
 * every cut is tried.
 */
function acceptedSplits (bytes: Buffer, bodyRule: boolean): Parts[] {
  const text = bytes.toString('latin1')
  const found: Parts[] = []
  for (let i = 1; i < bytes.length; i++) {
    const timestamp = text.slice(0, i)
    if (!MILLISECONDS_TIMESTAMP.test(timestamp)) continue
    for (let j = i + 1; j < bytes.length; j++) {
      const method = text.slice(i, j)
      if (!(HTTP_METHODS as readonly string[]).includes(method)) continue
      for (let k = j + 1; k <= bytes.length; k++) {
        const parts = { timestamp, method, target: text.slice(j, k), body: bytes.subarray(k) }
        if (refusal(parts, bodyRule) === undefined) found.push(parts)
      }
    }
  }
  return found
}

const signingBytes = (p: Parts): Buffer => Buffer.concat([Buffer.from(p.timestamp + p.method + p.target, 'latin1'), p.body])
const same = (a: Parts, b: Parts): boolean => a.timestamp === b.timestamp && a.method === b.method && a.target === b.target && a.body.equals(b.body)

// Generators that aim at the boundary: targets ending in digits, "=", "&", "/", "%", "?", and
// bodies that start with target bytes (which the rule must refuse) or with the bytes a valid body
// starts with.
const TARGET_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&\'()*+,;=:@/%?']
const BOUNDARY = [...'0123456789=&/%?aAeE.-']
const targetTail = fc.array(fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...BOUNDARY) },
  { weight: 2, arbitrary: fc.constantFrom(...TARGET_CHARS) },
  { weight: 1, arbitrary: fc.constantFrom('%20', '%3D', '%26', '%7B', 'true', '42', '=1', '&a=', '?confirm=true') }
), { maxLength: 24 }).map((units) => units.join(''))
const target = fc.tuple(fc.constantFrom('/v1/clients/', '/v1/clients', '/', '/a', '/v1/clients/?confirm=', '/x?'), targetTail)
  .map(([head, tail]) => head + tail)
/** what a body may start with: bytes no target holds, among them the first bytes of JSON */
const BODY_STARTS = ['{', '[', '"', ' ', '\n', '\r', '\t', '#', '<', '\\', '^', '`', '|', '}', ']', '\u0000', '\u00e9', '\u00ff']
const rest = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.array(fc.constantFrom(...BOUNDARY, '1=2&x', 'true', '/a?b', '{}'), { maxLength: 6 }).map((units) => units.join(''))
)
const bodyText = fc.oneof(
  // bodies the rule accepts, their rest as adversarial as the target's tail
  { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...BODY_STARTS), rest).map(([a, b]) => a + b) },
  // bodies it refuses: the issue's, and any target byte first
  { weight: 1, arbitrary: fc.constantFrom('42', 'a=1', '=1', '&a=1', '/x', '%7B', '?a', 'e', '.', '-1', '~') },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...BOUNDARY, ...TARGET_CHARS), rest).map(([a, b]) => a + b) },
  { weight: 1, arbitrary: fc.constant('') }
)
const body = fc.oneof(
  { weight: 4, arbitrary: bodyText.map((s) => Buffer.from(s, 'utf8')) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 16 }).map((b) => Buffer.from(b)) }
)
const parts = fc.record({
  timestamp: fc.oneof(fc.integer({ min: 1_000_000_000_000, max: 9_999_999_999_999 }), fc.integer({ min: 10_000_000_000_000, max: 999_999_999_999_999 }))
    .map(String),
  // GET, HEAD: only without a body (refused with one before this rule); the others with or without
  method: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'GET', 'HEAD'),
  target,
  body
}).map((p) => p.method === 'GET' || p.method === 'HEAD' ? { ...p, body: Buffer.alloc(0) } : p)

t.test(`${RUNS} generated seed-signed requests, adversarial at the target/body boundary: every accepted one splits one way only`, async (t) => {
  let accepted = 0
  let refusedByBodyRule = 0
  const refusals = new Tally()
  /** runs in which another split passes every rule but the body rule: what the rule is there for */
  let wouldBeAmbiguous = 0
  let otherSplitsStopped = 0
  const started = performance.now()
  fc.assert(fc.property(parts, (p) => {
    const why = refusal(p)
    if (why === 'body rule') refusedByBodyRule++
    if (why !== undefined) refusals.add(why)
    if (why !== undefined) return true
    accepted++
    const bytes = signingBytes(p)
    const splits = acceptedSplits(bytes, true)
    if (splits.length !== 1 || !same(splits[0] as Parts, p)) return false
    const withoutRule = acceptedSplits(bytes, false).length - 1
    if (withoutRule > 0) wouldBeAmbiguous++
    otherSplitsStopped += withoutRule
    return true
  }), { numRuns: RUNS })
  t.ok(accepted > RUNS / 2, `${accepted} of ${RUNS} generated requests pass the rules, each with exactly one accepted split`)
  t.ok(refusedByBodyRule > RUNS / 10, `${refusedByBodyRule} refused by the body rule`)
  t.ok(wouldBeAmbiguous > accepted / 10, `without the body rule, ${wouldBeAmbiguous} of the accepted would have another split`)
  t.comment(`accepted ${accepted}, refused by the body rule ${refusedByBodyRule}; without the rule ${wouldBeAmbiguous} accepted requests ` +
    `had ${otherSplitsStopped} other accepted splits; refused: ${refusals.toString()}; ${((performance.now() - started) / 1000).toFixed(1)} s`)
})

t.test('the body rule is the target rule\'s own character class: every byte 0-255 as a body\'s first', async (t) => {
  let refused = 0
  for (let byte = 0; byte < 256; byte++) {
    const inTarget = byte < 128 && TARGET_CHARACTER.test(String.fromCharCode(byte))
    t.equal(isTargetByte(byte), inTarget, `0x${byte.toString(16)}`)
    t.equal(seedBodyProblem(Buffer.from([byte, 0x7b])) !== undefined, inTarget, `0x${byte.toString(16)} first`)
    if (inTarget) refused++
    // only the first byte counts: a target byte later on is fine
    t.equal(seedBodyProblem(Buffer.from([0x7b, byte])), undefined)
  }
  t.equal(refused, 82, 'the 82 bytes a target may hold: A-Z a-z 0-9 and -._~!$&\'()*+,;=:@/%?')
  t.equal(seedBodyProblem(undefined), undefined, 'no body')
  t.equal(seedBodyProblem(Buffer.alloc(0)), undefined, 'an empty body')
})

// ---- b. on a running gateway ---------------------------------------------------------------

const ROUTES = `routes:
  - name: clients
    prefix: /v1/clients/
    upstream: UPSTREAM
    auth: signed
    methods: [GET, POST, DELETE]
  - name: lenient
    prefix: /v2/clients/
    upstream: UPSTREAM
    auth: signed
    methods: [GET, POST, DELETE]
    replay: allow
    bodyOnMethods: [DELETE]
  - name: forms
    prefix: /forms/
    upstream: UPSTREAM
    auth: signed
    methods: [POST, DELETE]
    bodyOnMethods: [DELETE]
    seedBodyBoundary: unchecked
`

/**
 * The three: a request keygate accepts, signed by its owner, and the same bytes split
 * another way by whoever saw the headers. (POST / with body a=1 and POST /a=1 are one such pair:
 * of the two, keygate now accepts only the one without a body, and @keygate/client signs only it.)
 */
const ATTACKS = (prefix: string): Array<{ name: string; signed: [method: string, target: string, body: string]; sent: [target: string, body: string] }> => [
  { name: 'DELETE /42 as DELETE / with body 42', signed: ['DELETE', `${prefix}42`, ''], sent: [prefix, '42'] },
  { name: 'POST /a=1 as POST / with body a=1', signed: ['POST', `${prefix}a=1`, ''], sent: [prefix, 'a=1'] },
  { name: '?confirm=true as ?confirm=tru with body e', signed: ['POST', `${prefix}x?confirm=true`, ''], sent: [`${prefix}x?confirm=tru`, 'e'] }
]

t.test('on a running gateway: one seed signature authorizes one request', async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: recorder.url, routes: (upstream) => routesFromYaml(ROUTES, upstream) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)
  const FORM = 'application/x-www-form-urlencoded'
  const sendAs = async (method: string, target: string, body: string, headers: Record<string, string>, contentType = FORM): Promise<RawResponse> =>
    await send(gw.url, target, { method, headers: { ...headers, ...(body !== '' && { 'content-type': contentType }) }, ...(body !== '' && { body }) })

  for (const prefix of ['/v1/clients/', '/v2/clients/']) {
    t.test(`the three attacks on ${prefix} (${prefix === '/v1/clients/' ? 'the defaults' : 'replay: allow, bodyOnMethods: [DELETE]'})`, async (t) => {
      for (const { name, signed: [method, signedTarget, signedBody], sent: [target, body] } of ATTACKS(prefix)) {
        const before = recorder.requests.length
        const headers = signedHeaders({ keys, token, method, target: signedTarget, body: signedBody, timestamp: uniqueTimestamp() })
        const attack = await sendAs(method, target, body, headers)
        t.equal(attack.status, 400, `${name}: refused`)
        // a DELETE with a body on a route that takes none is refused as such, before its body is read
        const code = method === 'DELETE' && prefix === '/v1/clients/' ? 'VALIDATION_FAILED' : 'AMBIGUOUS_SIGNED_BODY'
        t.equal(attack.json().code, code, `${name}: ${code}`)
        if (code === 'AMBIGUOUS_SIGNED_BODY') {
          t.match(attack.json().detail, /RFC 9421/, 'the detail points to RFC 9421')
          t.match(attack.json().detail, `The body starts with "${body.slice(0, 1)}" (0x${body.charCodeAt(0).toString(16)})`, 'and names the first byte')
        }
        t.equal(recorder.requests.length, before, `${name}: nothing forwarded`)
        // the refusal spent nothing: the request actually signed goes through, once
        const real = await sendAs(method, signedTarget, signedBody, headers)
        t.equal(real.status, 200, `${name}: the signed request itself is forwarded`)
        t.equal(recorder.requests.length, before + 1)
        t.equal(recorder.requests.at(-1)?.url, signedTarget)
        t.equal(recorder.requests.at(-1)?.body.toString(), signedBody)
      }
    })
  }

  t.test('a JSON body is accepted; a form body with RFC 9421; a route with seedBodyBoundary: unchecked takes the seed\'s', async (t) => {
    const json = '{"name":"Ada","email":"ada@example.com","tax_id":"42"}'
    const jsonHeaders = signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body: json, timestamp: uniqueTimestamp() })
    t.equal((await sendAs('POST', '/v1/clients/', json, jsonHeaders, 'application/json')).status, 200, 'JSON')
    t.equal(recorder.requests.at(-1)?.body.toString(), json)

    const form = 'a=1&b=2'
    const before = recorder.requests.length
    const seedForm = await sendAs('POST', '/v1/clients/', form, signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body: form }))
    t.equal(seedForm.json().code, 'AMBIGUOUS_SIGNED_BODY', 'a form body signed with the seed scheme: refused')
    const rfc = await signRequest({
      scheme: 'rfc9421',
      components: 'path',
      method: 'POST',
      target: '/v1/clients/',
      body: form,
      apiKey: keys.apiKey,
      privateKey: keys.privateKey,
      contentType: 'application/x-www-form-urlencoded'
    })
    const rfcForm = await send(gw.url, '/v1/clients/', { method: 'POST', headers: { authorization: `Bearer ${token}`, ...rfc }, body: form })
    t.equal(rfcForm.status, 200, 'the same form body signed with RFC 9421: accepted')
    t.equal(recorder.requests.length, before + 1, 'only the RFC 9421 one forwarded')
    t.equal(recorder.requests.at(-1)?.body.toString(), form)

    // the opt-out does what it says, attacks included: why routes check warns of it
    for (const { name, signed: [method, signedTarget, signedBody], sent: [target, body] } of ATTACKS('/forms/')) {
      const headers = signedHeaders({ keys, token, method, target: signedTarget, body: signedBody, timestamp: uniqueTimestamp() })
      const res = await sendAs(method, target, body, headers)
      t.equal(res.status, 200, `seedBodyBoundary: unchecked: ${name} is accepted`)
      t.equal(recorder.requests.at(-1)?.url, target)
      t.equal(recorder.requests.at(-1)?.body.toString(), body)
    }
  })

  t.test('a body on DELETE: refused on a signed route that takes none, forwarded where bodyOnMethods allows it', async (t) => {
    const before = recorder.requests.length
    const json = '{"reason":"duplicate"}'
    const refused = await sendAs('DELETE', '/v1/clients/7', json, signedHeaders({ keys, token, method: 'DELETE', target: '/v1/clients/7', body: json }))
    t.equal(refused.status, 400)
    t.equal(refused.json().code, 'VALIDATION_FAILED')
    t.match(refused.json().detail, /bodyOnMethods/)
    t.equal(recorder.requests.length, before, 'nothing forwarded')
    const takenHeaders = signedHeaders({ keys, token, method: 'DELETE', target: '/v2/clients/7', body: json })
    const taken = await sendAs('DELETE', '/v2/clients/7', json, takenHeaders, 'application/json')
    t.equal(taken.status, 200)
    t.equal(recorder.requests.at(-1)?.method, 'DELETE')
    t.equal(recorder.requests.at(-1)?.body.toString(), json, 'forwarded with its body')
  })
})
