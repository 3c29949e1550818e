// RFC 9421 (HTTP Message Signatures) with RFC 9530 Content-Digest, end to end on real sockets and
// real Redis: requests signed by an independent implementation (the http-message-signatures
// package, used only in tests) with a registered RSA key, PKCS#1 v1.5 and PSS, go through; a
// tampered body, a body signed over again, a stale `created`, a body or query not covered, a
// changed query and a replay are refused, and the upstream never sees them. The route option
// `signature` (seed, rfc9421, any) and `signatureLabel`; the seed's scheme beside it, unchanged.
import { createHash } from 'node:crypto'
import { httpbis, createSigner } from 'http-message-signatures'
import t, { type Test } from 'tap'
import { route, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders, type TestKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, registerKey, sendSigned, startTestGateway } from '../helpers/stack.js'

const DEFAULTS = { bodyLimit: 1024 * 1024, timeoutMs: 5000 }

function routes (upstream: string): RouteConfig[] {
  return [
    route({ name: 'any', prefix: '/v1/clients/', upstream, auth: 'signed', methods: ['GET', 'POST'] }, DEFAULTS),
    route({ name: 'seed-only', prefix: '/v1/seed/', upstream, auth: 'signed', methods: ['GET', 'POST'], signature: 'seed' }, DEFAULTS),
    route({ name: 'rfc-only', prefix: '/v1/rfc/', upstream, auth: 'signed', methods: ['GET', 'POST'], signature: 'rfc9421' }, DEFAULTS),
    route({ name: 'labelled', prefix: '/v1/labelled/', upstream, auth: 'signed', methods: ['GET'], signatureLabel: 'gw' }, DEFAULTS)
  ]
}

const digestOf = (body: string | Buffer): string => `sha-256=:${createHash('sha256').update(body).digest('base64')}:`

type Alg = 'rsa-v1_5-sha256' | 'rsa-pss-sha512'

interface SignInput {
  keys: TestKeyPair
  token: string
  method: string
  target: string
  body?: string
  alg?: Alg
  /** the covered components; by default @method, @target-uri, and content-type and content-digest with a body */
  fields?: string[]
  created?: Date
  nonce?: string
  /** the signature's label (default sig) */
  name?: string
  /** headers added before signing */
  headers?: Record<string, string>
  /** the origin the client addresses, when not the gateway's own (behind a load balancer) */
  origin?: string
}

/** The headers of a request signed by http-message-signatures (the independent implementation). */
async function rfcHeaders (url: string, input: SignInput): Promise<Record<string, string>> {
  const headers: Record<string, string> = { authorization: `Bearer ${input.token}`, host: new URL(url).host, ...input.headers }
  if (input.body !== undefined) {
    headers['content-type'] = 'application/json'
    headers['content-digest'] = digestOf(input.body)
  }
  const fields = input.fields ?? (input.body === undefined ? ['@method', '@target-uri'] : ['@method', '@target-uri', 'content-type', 'content-digest'])
  const created = input.created ?? new Date()
  const signed = await httpbis.signMessage({
    key: createSigner(input.keys.privateKey, input.alg ?? 'rsa-v1_5-sha256', input.keys.apiKey),
    fields,
    ...(input.name !== undefined && { name: input.name }),
    params: ['keyid', 'alg', 'created', 'expires', ...(input.nonce === undefined ? [] : ['nonce'])],
    paramValues: { created, expires: new Date(created.getTime() + 300_000), ...(input.nonce !== undefined && { nonce: input.nonce }) }
  }, { method: input.method, url: (input.origin ?? url) + input.target, headers })
  // the library writes Signature and Signature-Input: lower-case names, so the tests can edit them
  return Object.fromEntries(Object.entries(signed.headers).map(([name, value]) => [name.toLowerCase(), String(value)]))
}

async function sendWith (url: string, input: Pick<SignInput, 'method' | 'target'>, headers: Record<string, string>, body?: string): Promise<RawResponse> {
  return await send(url, input.target, { method: input.method, headers, ...(body !== undefined && { body }) })
}

async function sendRfc (url: string, input: SignInput): Promise<RawResponse> {
  return await sendWith(url, input, await rfcHeaders(url, input), input.body)
}

t.test('RFC 9421 with a registered RSA key, on Redis', async (t) => {
  const upstream = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'redis', upstreamUrl: upstream.url, routes })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'alice laptop')).status, 201)

  /** `res` was refused with `code`, and the upstream saw nothing. */
  const refused = async (t: Test, send: () => Promise<RawResponse>, status: number, code: string): Promise<Record<string, unknown>> => {
    const before = upstream.requests.length
    const res = await send()
    t.equal(res.status, status, `${status} ${code}: ${res.text}`)
    const problem = res.json()
    t.equal(problem.code, code)
    t.equal(upstream.requests.length, before, 'the upstream never saw it')
    return problem
  }

  for (const alg of ['rsa-v1_5-sha256', 'rsa-pss-sha512'] as const) {
    t.test(`${alg}: GET with a query, POST with a body and Content-Digest go through`, async (t) => {
      const get = await sendRfc(gw.url, { keys, token, method: 'GET', target: '/v1/clients/?limit=2&q=a%20b', alg })
      t.equal(get.status, 200, get.text)
      const seen = upstream.requests.at(-1)
      t.equal(seen?.url, '/v1/clients/?limit=2&q=a%20b', 'the upstream gets the query as sent')
      t.equal(seen?.headers['x-gateway-key'], keys.apiKey)
      t.equal(seen?.headers['x-gateway-user'], 'alice')

      const body = `{"name":"Ada","alg":"${alg}"}`
      const post = await sendRfc(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body, alg })
      t.equal(post.status, 200, post.text)
      t.equal(upstream.requests.at(-1)?.body.toString(), body, 'the upstream gets the same bytes')

      const paths = await sendRfc(gw.url, { keys, token, method: 'GET', target: '/v1/clients/?x=1', alg, fields: ['@method', '@path', '@query', '@authority'] })
      t.equal(paths.status, 200, `@path and @query instead of @target-uri: ${paths.text}`)
    })
  }

  t.test('a body changed on the way, its digest kept: 401 INVALID_CONTENT_DIGEST with the digest of what arrived', async (t) => {
    const input = { keys, token, method: 'POST', target: '/v1/clients/', body: '{"name":"Ada"}' }
    const headers = await rfcHeaders(gw.url, input)
    const problem = await refused(t, () => sendWith(gw.url, input, headers, '{"name":"Eve"}'), 401, 'INVALID_CONTENT_DIGEST')
    t.equal(problem.computed, digestOf('{"name":"Eve"}'))
  })

  t.test('a body changed and its digest computed again: the signature no longer verifies, and the answer shows the base', async (t) => {
    const input = { keys, token, method: 'POST', target: '/v1/clients/', body: '{"name":"Ada"}' }
    const headers = await rfcHeaders(gw.url, input)
    headers['content-digest'] = digestOf('{"name":"Eve"}')
    const problem = await refused(t, () => sendWith(gw.url, input, headers, '{"name":"Eve"}'), 401, 'INVALID_SIGNATURE')
    const base = problem.signatureBase as string[]
    t.equal(base[0], '"@method": POST')
    t.equal(base[1], `"@target-uri": http://${new URL(gw.url).host}/v1/clients/`)
    t.equal(base[3], `"content-digest": ${digestOf('{"name":"Eve"}')}`)
    t.match(base.at(-1), /^"@signature-params": \("@method" "@target-uri" "content-type" "content-digest"\);keyid="/)
    t.equal(problem.signatureBaseSha256, createHash('sha256').update(base.join('\n')).digest('hex'))
    t.equal(problem.keyid, keys.apiKey)
    t.equal(problem.alg, 'rsa-v1_5-sha256')
    t.equal(problem.label, 'sig')
  })

  t.test('a created 20 minutes old: 401 TIMESTAMP_OUT_OF_RANGE with serverTime', async (t) => {
    const problem = await refused(t, () => sendRfc(gw.url, {
      keys, token, method: 'GET', target: '/v1/clients/', created: new Date(Date.now() - 20 * 60_000)
    }), 401, 'TIMESTAMP_OUT_OF_RANGE')
    t.type(problem.serverTime, 'number')
  })

  t.test('a created in milliseconds: 401 TIMESTAMP_INVALID, whose title and detail speak of RFC 9421\'s created', async (t) => {
    const problem = await refused(t, () => sendRfc(gw.url, {
      keys, token, method: 'GET', target: '/v1/clients/', created: new Date(Date.now() * 1000) // created=<milliseconds now>
    }), 401, 'TIMESTAMP_INVALID')
    t.match(problem.title, /RFC 9421 created: seconds/, 'the title says what RFC 9421\'s created counts')
    t.equal(problem.detail, 'Signature-Input sig: created looks like milliseconds; RFC 9421 counts seconds since the Unix epoch')

    const seedHeaders = signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/', timestamp: Math.floor(Date.now() / 1000) })
    const seed = await refused(t, () => send(gw.url, '/v1/clients/', { headers: seedHeaders }), 401, 'TIMESTAMP_INVALID')
    t.equal(seed.title, problem.title, 'the seed\'s X-API-Timestamp in seconds: the same title, one per code')
    t.match(seed.title, /X-API-Timestamp: milliseconds/)
    t.match(seed.detail, /^X-API-Timestamp looks like seconds/, 'and a detail that speaks of X-API-Timestamp')
  })

  t.test('a body not covered: 401 INVALID_SIGNATURE naming content-digest', async (t) => {
    const problem = await refused(t, () => sendRfc(gw.url, {
      keys, token, method: 'POST', target: '/v1/clients/', body: '{"name":"Ada"}', fields: ['@method', '@target-uri']
    }), 401, 'INVALID_SIGNATURE')
    t.same(problem.missingComponents, ['content-digest'])
  })

  t.test('a query not covered (@path without @query): 401 INVALID_SIGNATURE naming @query', async (t) => {
    const problem = await refused(t, () => sendRfc(gw.url, {
      keys, token, method: 'GET', target: '/v1/clients/?limit=1', fields: ['@method', '@path']
    }), 401, 'INVALID_SIGNATURE')
    t.same(problem.missingComponents, ['@query'])
  })

  t.test('a query changed after signing: 401 INVALID_SIGNATURE', async (t) => {
    const input = { keys, token, method: 'GET', target: '/v1/clients/?limit=1' }
    const headers = await rfcHeaders(gw.url, input)
    await refused(t, () => sendWith(gw.url, { ...input, target: '/v1/clients/?limit=100' }, headers), 401, 'INVALID_SIGNATURE')
  })

  t.test('a replayed POST: 401 REPLAYED_REQUEST; a nonce makes two identical requests two', async (t) => {
    const input = { keys, token, method: 'POST', target: '/v1/clients/', body: '{"name":"Once"}' }
    const headers = await rfcHeaders(gw.url, input)
    t.equal((await sendWith(gw.url, input, headers, input.body)).status, 200)
    const problem = await refused(t, () => sendWith(gw.url, input, headers, input.body), 401, 'REPLAYED_REQUEST')
    t.match(problem.detail, /nonce/)
    // PSS signatures differ each time: the same base signed again is still the same request
    const created = new Date()
    const pss = { ...input, body: '{"name":"Twice"}', alg: 'rsa-pss-sha512' as const, created }
    t.equal((await sendRfc(gw.url, pss)).status, 200)
    await refused(t, () => sendRfc(gw.url, pss), 401, 'REPLAYED_REQUEST')
    t.equal((await sendRfc(gw.url, { ...pss, nonce: 'n-1' })).status, 200, 'with a nonce it is another request')
    t.equal((await sendRfc(gw.url, { ...pss, nonce: 'n-2' })).status, 200)
  })

  t.test('an alg that does not suit the key: 401 INVALID_SIGNATURE naming the accepted ones', async (t) => {
    const input = { keys, token, method: 'GET', target: '/v1/clients/' }
    const headers = await rfcHeaders(gw.url, input)
    headers['signature-input'] = (headers['signature-input'] as string).replace('alg="rsa-v1_5-sha256"', 'alg="ed25519"')
    const problem = await refused(t, () => sendWith(gw.url, input, headers), 401, 'INVALID_SIGNATURE')
    t.same(problem.acceptedAlgorithms, ['rsa-v1_5-sha256', 'rsa-pss-sha512'])
  })

  t.test('an unregistered keyid: 401 UNKNOWN_API_KEY', async (t) => {
    const other = rsaKeyPair()
    await refused(t, () => sendRfc(gw.url, { keys: other, token, method: 'GET', target: '/v1/clients/' }), 401, 'UNKNOWN_API_KEY')
  })

  t.test('the route option signature: seed and rfc9421 take one scheme each; any takes both', async (t) => {
    const seedProblem = await refused(t, () => sendRfc(gw.url, { keys, token, method: 'GET', target: '/v1/seed/' }), 401, 'MISSING_SIGNATURE_HEADERS')
    t.same(seedProblem.missing, ['x-api-key', 'x-api-timestamp', 'x-api-signature'])
    const seedOk = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/seed/' })
    t.equal(seedOk.status, 200, 'the seed scheme on a seed route')

    const rfcProblem = await refused(t, () => sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/rfc/' }), 401, 'MISSING_SIGNATURE_HEADERS')
    t.same(rfcProblem.missing, ['signature-input', 'signature'])
    t.equal((await sendRfc(gw.url, { keys, token, method: 'GET', target: '/v1/rfc/' })).status, 200, 'RFC 9421 on an rfc9421 route')

    const seedOnAny = await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body: '{"name":"Seed"}' })
    t.equal(seedOnAny.status, 200, 'the seed scheme on an any route, as before')
    t.equal(upstream.requests.at(-1)?.body.toString(), '{"name":"Seed"}')
  })

  t.test('several signatures: the route\'s label, else the first whose keyid is registered', async (t) => {
    const target = '/v1/labelled/'
    const stranger = rsaKeyPair()
    const first = await rfcHeaders(gw.url, { keys: stranger, token, method: 'GET', target, name: 'other' })
    const second = await rfcHeaders(gw.url, { keys, token, method: 'GET', target, name: 'gw' })
    const both = {
      ...second,
      'signature-input': `${first['signature-input'] as string}, ${second['signature-input'] as string}`,
      signature: `${first.signature as string}, ${second.signature as string}`
    }
    t.equal((await sendWith(gw.url, { method: 'GET', target }, both)).status, 200, 'the gw signature is verified')
    const onAny = { method: 'GET', target: '/v1/clients/' }
    const strangerAny = await rfcHeaders(gw.url, { keys: stranger, token, ...onAny, name: 'a' })
    const mineAny = await rfcHeaders(gw.url, { keys, token, ...onAny, name: 'b' })
    const res = await sendWith(gw.url, onAny, {
      ...mineAny,
      'signature-input': `${strangerAny['signature-input'] as string}, ${mineAny['signature-input'] as string}`,
      signature: `${strangerAny.signature as string}, ${mineAny.signature as string}`
    })
    t.equal(res.status, 200, `the first signature whose keyid is registered: ${res.text}`)
    const onlyOther = await refused(t, () => sendWith(gw.url, { method: 'GET', target }, first), 401, 'INVALID_SIGNATURE')
    t.equal(onlyOther.label, 'gw')
  })
})

t.test('behind a trusted load balancer: @target-uri is the scheme and host the client addressed', async (t) => {
  for (const header of ['x-forwarded-for', 'forwarded'] as const) {
    const upstream = await startRecorder(t)
    const gw = await startTestGateway(t, {
      store: 'memory', upstreamUrl: upstream.url, routes, config: { clientAddress: { trustedProxies: ['127.0.0.1'], header } }
    })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, keys)).status, 201)
    const input = { keys, token, method: 'POST', target: '/v1/clients/?x=1', body: '{"name":"Ada"}', origin: 'https://api.example.com' }
    const forwarding: Record<string, string> = header === 'forwarded'
      ? { forwarded: 'for=203.0.113.5;proto=https;host=api.example.com' }
      : { 'x-forwarded-for': '203.0.113.5', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com' }
    const res = await sendWith(gw.url, input, { ...await rfcHeaders(gw.url, input), ...forwarding }, input.body)
    t.equal(res.status, 200, `${header}: ${res.text}`)
    t.equal(upstream.requests.length, 1)

    const direct = await sendWith(gw.url, input, await rfcHeaders(gw.url, { ...input, body: '{"name":"Bob"}' }), '{"name":"Bob"}')
    t.equal(direct.status, 401, 'without the balancer\'s headers keygate sees its own origin')
    t.equal(direct.json<{ signatureBase: string[] }>().signatureBase[1], `"@target-uri": http://${new URL(gw.url).host}/v1/clients/?x=1`)
    t.equal(upstream.requests.length, 1)
  }
})
