// The definition of done of RFC 9421 with every key type keygate registers: a request signed by
// an independent implementation (the http-message-signatures package, used only in tests) with a
// registered RSA, Ed25519 or P-256 key goes through; a tampered body, a stale `created`, a body
// not covered, a changed query and a replay are refused and never reach the upstream. The same
// keys, registered and used by @keygate/client in both schemes, pass too. Real sockets, real Redis.
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { createSigner, httpbis } from 'http-message-signatures'
import t, { type Test } from 'tap'
import { createClient, registerKey, signRequest } from '../../client/src/index.js'
import { route, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { send, type RawResponse } from '../helpers/http.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, startTestGateway } from '../helpers/stack.js'

const DEFAULTS = { bodyLimit: 1024 * 1024, timeoutMs: 5000 }
const routes = (upstream: string): RouteConfig[] => [
  route({ name: 'clients', prefix: '/v1/clients/', upstream, auth: 'signed', methods: ['GET', 'POST'] }, DEFAULTS)
]

const KEY_TYPES = [
  { type: 'rsa', alg: 'rsa-v1_5-sha256', make: () => generateKeyPairSync('rsa', { modulusLength: 2048 }) },
  { type: 'ed25519', alg: 'ed25519', make: () => generateKeyPairSync('ed25519') },
  { type: 'p256', alg: 'ecdsa-p256-sha256', make: () => generateKeyPairSync('ec', { namedCurve: 'P-256' }) }
] as const

const digestOf = (body: string): string => `sha-256=:${createHash('sha256').update(body).digest('base64')}:`

interface Signing {
  privateKey: KeyObject
  alg: string
  apiKey: string
  token: string
}

/** Headers of a request signed by http-message-signatures: @method, @target-uri, and a body's content-type and content-digest. */
async function independentlySigned (url: string, key: Signing, method: string, target: string,
  options: { body?: string; fields?: string[]; created?: Date; nonce?: string } = {}): Promise<Record<string, string>> {
  const headers: Record<string, string> = { authorization: `Bearer ${key.token}`, host: new URL(url).host }
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json'
    headers['content-digest'] = digestOf(options.body)
  }
  const fields = options.fields ?? (options.body === undefined ? ['@method', '@target-uri'] : ['@method', '@target-uri', 'content-type', 'content-digest'])
  const signed = await httpbis.signMessage({
    key: createSigner(key.privateKey, key.alg as 'ed25519', key.apiKey),
    fields,
    params: ['keyid', 'alg', 'created', ...(options.nonce === undefined ? [] : ['nonce'])],
    paramValues: { created: options.created ?? new Date(), ...(options.nonce !== undefined && { nonce: options.nonce }) }
  }, { method, url: url + target, headers })
  return Object.fromEntries(Object.entries(signed.headers).map(([name, value]) => [name.toLowerCase(), String(value)]))
}

t.test('RFC 9421 with RSA, Ed25519 and P-256 keys, on Redis', async (t) => {
  const upstream = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'redis', upstreamUrl: upstream.url, routes })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')

  const refused = async (t: Test, what: string, sending: Promise<RawResponse>, status: number, code: string): Promise<void> => {
    const before = upstream.requests.length
    const res = await sending
    t.equal(res.status, status, `${what}: ${status} ${code}: ${res.text}`)
    t.equal(res.json().code, code, what)
    t.equal(upstream.requests.length, before, `${what}: the upstream never saw it`)
  }

  for (const { type, alg, make } of KEY_TYPES) {
    t.test(`${type} key (${alg})`, async (t) => {
      const { privateKey } = make()
      const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
      // registered by @keygate/client: its proof over the name, by the key's algorithm
      const registered = await registerKey({ baseUrl: gw.url, token, name: `alice ${type}`, privateKey: privatePem })
      const key: Signing = { privateKey, alg, apiKey: registered.apiKey, token }

      const get = await send(gw.url, '/v1/clients/?limit=2', { headers: await independentlySigned(gw.url, key, 'GET', '/v1/clients/?limit=2') })
      t.equal(get.status, 200, `independent signature, GET with a query: ${get.text}`)
      t.equal(upstream.requests.at(-1)?.url, '/v1/clients/?limit=2')
      t.equal(upstream.requests.at(-1)?.headers['x-gateway-key'], registered.apiKey)

      const body = `{"name":"Ada","key":"${type}"}`
      const postHeaders = await independentlySigned(gw.url, key, 'POST', '/v1/clients/', { body })
      const post = await send(gw.url, '/v1/clients/', { method: 'POST', headers: postHeaders, body })
      t.equal(post.status, 200, `independent signature, POST with Content-Digest: ${post.text}`)
      t.equal(upstream.requests.at(-1)?.body.toString(), body, 'the upstream got the same bytes')

      await refused(t, 'the same POST again', send(gw.url, '/v1/clients/', { method: 'POST', headers: postHeaders, body }), 401, 'REPLAYED_REQUEST')

      const tampered = await independentlySigned(gw.url, key, 'POST', '/v1/clients/', { body, nonce: 'tampered' })
      await refused(t, 'a tampered body', send(gw.url, '/v1/clients/', { method: 'POST', headers: tampered, body: body.replace('Ada', 'Eve') }),
        401, 'INVALID_CONTENT_DIGEST')

      const stale = await independentlySigned(gw.url, key, 'POST', '/v1/clients/', { body, created: new Date(Date.now() - 20 * 60_000) })
      await refused(t, 'a stale created', send(gw.url, '/v1/clients/', { method: 'POST', headers: stale, body }), 401, 'TIMESTAMP_OUT_OF_RANGE')

      const uncovered = await independentlySigned(gw.url, key, 'POST', '/v1/clients/', { body, fields: ['@method', '@target-uri'] })
      await refused(t, 'a body not covered', send(gw.url, '/v1/clients/', { method: 'POST', headers: uncovered, body }), 401, 'INVALID_SIGNATURE')

      const query = await independentlySigned(gw.url, key, 'GET', '/v1/clients/?limit=2')
      await refused(t, 'a changed query', send(gw.url, '/v1/clients/?limit=200', { headers: query }), 401, 'INVALID_SIGNATURE')

      // the same key through @keygate/client, in both schemes and both RFC 9421 component choices
      for (const options of [{ scheme: 'seed' }, { scheme: 'rfc9421' }, { scheme: 'rfc9421', components: 'path' }] as const) {
        const client = createClient({ baseUrl: gw.url, token, privateKey: privatePem, ...options })
        const res = await client.fetch('POST', '/v1/clients/?via=client', `{"name":"Grace","key":"${type}"}`)
        t.equal(res.status, 200, `@keygate/client ${JSON.stringify(options)}: ${await res.clone().text()}`)
        t.equal(upstream.requests.at(-1)?.body.toString(), `{"name":"Grace","key":"${type}"}`)
      }
    })
  }

  t.test('@keygate/client with expiresIn: a signature within its expires goes through, one past it is refused', async (t) => {
    const privatePem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
    const { apiKey } = await registerKey({ baseUrl: gw.url, token, name: 'alice expiring', privateKey: privatePem })
    const client = createClient({ baseUrl: gw.url, token, privateKey: privatePem, scheme: 'rfc9421', expiresIn: 300 })
    const sent = await client.send('GET', '/v1/clients/?limit=1')
    t.equal(sent.response.status, 200, await sent.response.clone().text())
    t.match(sent.headers['signature-input'], /;created=(\d+);expires=\d+;keyid=/, 'Signature-Input carries expires')

    // made two minutes ago, expiring after one: within keygate's 15-minute window, but expired
    const created = Math.floor(Date.now() / 1000) - 120
    const signing = { method: 'GET', target: '/v1/clients/?limit=1', apiKey, privateKey: privatePem, baseUrl: gw.url }
    const headers = await signRequest({ ...signing, scheme: 'rfc9421', created, expiresIn: 60 })
    await refused(t, 'a signature past its expires', send(gw.url, '/v1/clients/?limit=1', { headers: { ...headers, authorization: `Bearer ${token}` } }),
      401, 'TIMESTAMP_OUT_OF_RANGE')
  })
})
