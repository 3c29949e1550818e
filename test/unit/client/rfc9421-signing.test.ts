// @keygate/client's RFC 9421 signatures (scheme: 'rfc9421'), checked two independent ways: by the
// http-message-signatures package's verifier (another implementation of RFC 9421, with a keyLookup
// by keyid), and by node:crypto over a signature base rebuilt here by hand from the parsed
// Signature-Input (structured-headers), with the Content-Digest recomputed over the body bytes.
import { createHash, generateKeyPairSync, type KeyObject, verify, webcrypto } from 'node:crypto'
import { httpbis, createVerifier } from 'http-message-signatures'
import { parseDictionary, type InnerList } from 'structured-headers'
import t from 'tap'
import {
  apiKeyOf, createClient, describeSignatureBase, type MessageSignatureAlgorithm, type MessageSignatureHeaders, signatureBaseMismatches, signRequest
} from '../../../client/src/index.js'
import { rejection } from '../../helpers/rejection.js'

interface Case { name: string; privateKey: KeyObject; publicKey: KeyObject; alg: MessageSignatureAlgorithm }
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 })
const cases: Case[] = [
  { name: 'RSA PKCS#1 v1.5', ...rsa, alg: 'rsa-v1_5-sha256' },
  { name: 'RSA-PSS SHA-512', ...rsa, alg: 'rsa-pss-sha512' },
  { name: 'Ed25519', ...generateKeyPairSync('ed25519'), alg: 'ed25519' },
  { name: 'P-256', ...generateKeyPairSync('ec', { namedCurve: 'P-256' }), alg: 'ecdsa-p256-sha256' }
]
const ORIGIN = 'https://api.example.com'
const BODY = '{"name":"Zoë Ada","email":"ada@example.com","tax_id":"12345678"}'

/** What a server receives: the method, the full URL and the header fields (lowercase names). */
interface Received { method: string; url: string; headers: Record<string, string>; body: Buffer }

function received (method: string, url: string, body: string | undefined, signed: MessageSignatureHeaders | Record<string, string>): Received {
  return { method, url, headers: Object.fromEntries(Object.entries(signed).map(([name, value]) => [name.toLowerCase(), value])), body: Buffer.from(body ?? '') }
}

/** http-message-signatures' verdict, looking the key up by keyid as keygate does. */
async function libraryVerifies (request: Received, keys: Map<string, Case>): Promise<boolean | null> {
  return await httpbis.verifyMessage({
    keyLookup: async (params) => {
      const found = keys.get(String(params.keyid))
      return found === undefined ? null : { id: String(params.keyid), algs: [found.alg], verify: createVerifier(found.publicKey, found.alg) }
    },
    requiredParams: ['created', 'keyid', 'alg', 'nonce'],
    requiredFields: ['@method']
  }, { method: request.method, url: request.url, headers: request.headers })
}

/** The signature base rebuilt by hand (RFC 9421 §2.5) from the parsed Signature-Input, and node:crypto's verdict over it. */
function handVerifies (request: Received, publicKey: KeyObject): { ok: boolean; base: string; components: string[] } {
  const input = parseDictionary(request.headers['signature-input'] ?? '')
  const signatures = parseDictionary(request.headers.signature ?? '')
  const [label] = [...input.keys()]
  const [items] = input.get(label ?? '') as InnerList
  const components = items.map(([name]) => String(name))
  const url = new URL(request.url)
  const values: Record<string, string> = {
    '@method': request.method,
    '@target-uri': url.href,
    '@path': url.pathname,
    '@query': url.search === '' ? '?' : url.search,
    'content-digest': request.headers['content-digest'] ?? '',
    'content-type': request.headers['content-type'] ?? ''
  }
  const params = (request.headers['signature-input'] ?? '').slice(`${label ?? ''}=`.length)
  const base = components.map((name) => `"${name}": ${values[name] ?? ''}`).join('\n') + `\n"@signature-params": ${params}`
  const signature = Buffer.from((signatures.get(label ?? '') as [ArrayBuffer, unknown])[0])
  const alg = (input.get(label ?? '') as InnerList)[1].get('alg')
  const data = Buffer.from(base)
  const ok = alg === 'rsa-pss-sha512'
    ? verify('sha512', data, { key: publicKey, padding: 6, saltLength: 64 }, signature)
    : verify(alg === 'ed25519' ? null : 'sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature)
  return { ok, base, components }
}

const digest = (body: Buffer): string => `sha-256=:${createHash('sha256').update(body).digest('base64')}:`

for (const c of cases) {
  t.test(`${c.name}: signRequest's signature verifies with http-message-signatures and by hand`, async (t) => {
    const apiKey = await apiKeyOf(c.publicKey)
    const keys = new Map([[apiKey, c]])
    const requests = [['POST', '/v1/clients/?x=1', BODY], ['GET', '/v1/clients/', undefined], ['DELETE', '/v1/clients/7', undefined]] as const
    for (const [method, target, body] of requests) {
      const signed = await signRequest({ scheme: 'rfc9421', method, target, body, apiKey, privateKey: c.privateKey, baseUrl: ORIGIN, algorithm: c.alg })
      const request = received(method, ORIGIN + target, body, signed)
      t.equal(await libraryVerifies(request, keys), true, `${method} ${target}: http-message-signatures`)
      const hand = handVerifies(request, c.publicKey)
      t.ok(hand.ok, `${method} ${target}: node:crypto over the hand-built base`)
      t.same(hand.components, body === undefined ? ['@method', '@target-uri'] : ['@method', '@target-uri', 'content-digest', 'content-type'])
      if (body !== undefined) {
        t.equal(signed['Content-Digest'], digest(request.body), 'Content-Digest over the exact body bytes')
        t.equal(signed['Content-Type'], 'application/json')
      }
      t.match(signed['Signature-Input'], new RegExp(`^sig1=\\(.*\\);created=\\d{10};keyid="${apiKey}";alg="${c.alg}";nonce="[A-Za-z0-9_-]{22}"$`))
      const tampered = { ...request, url: `${ORIGIN}${target}${target.includes('?') ? '2' : '?x=2'}` }
      t.equal(await libraryVerifies(tampered, keys), false, `${method}: a changed query does not verify`)
      t.notOk(handVerifies(tampered, c.publicKey).ok)
    }
  })
}

t.test('components: "path" covers @path and @query, which survive a rewritten Host', async (t) => {
  const c = cases[2] as Case
  const apiKey = await apiKeyOf(c.publicKey)
  const signed = await signRequest({
    scheme: 'rfc9421', method: 'PATCH', target: '/v1/clients/7?a=1&b=2', body: BODY, apiKey, privateKey: c.privateKey, components: 'path'
  })
  const request = received('PATCH', 'http://10.0.0.5:8080/v1/clients/7?a=1&b=2', BODY, signed)
  t.equal(await libraryVerifies(request, new Map([[apiKey, c]])), true, 'http-message-signatures, under another host')
  const hand = handVerifies(request, c.publicKey)
  t.ok(hand.ok)
  t.same(hand.components, ['@method', '@path', '@query', 'content-digest', 'content-type'])
  const noQuery = await signRequest({ scheme: 'rfc9421', method: 'GET', target: '/v1/clients/', apiKey, privateKey: c.privateKey, components: 'path' })
  t.same(handVerifies(received('GET', 'http://x/v1/clients/', undefined, noQuery), c.publicKey).components, ['@method', '@path'], 'no @query without a query')
})

t.test('two identical requests in the same second differ (nonce); label, created, nonce and content type are options', async (t) => {
  const c = cases[3] as Case
  const apiKey = await apiKeyOf(c.publicKey)
  const input = {
    scheme: 'rfc9421', method: 'POST', target: '/v1/clients/', body: BODY, apiKey, privateKey: c.privateKey, baseUrl: ORIGIN, created: 1790000000
  } as const
  const [a, b] = [await signRequest(input), await signRequest(input)]
  t.not(a['Signature-Input'], b['Signature-Input'])
  const chosen = await signRequest({ ...input, label: 'keygate', nonce: 'n-1', contentType: 'application/merge-patch+json' })
  t.equal(chosen['Signature-Input'],
    `keygate=("@method" "@target-uri" "content-digest" "content-type");created=1790000000;keyid="${apiKey}";alg="ecdsa-p256-sha256";nonce="n-1"`)
  t.match(chosen.Signature, /^keygate=:[A-Za-z0-9+/]{86}==:$/, 'P-256: the raw r || s, 64 bytes')
  t.ok(handVerifies(received('POST', ORIGIN + '/v1/clients/', BODY, chosen), c.publicKey).ok)
  const expiring = await signRequest({ ...input, nonce: 'n-2', expiresIn: 60 })
  t.equal(expiring['Signature-Input'],
    'sig1=("@method" "@target-uri" "content-digest" "content-type");created=1790000000;expires=1790000060;' +
      `keyid="${apiKey}";alg="ecdsa-p256-sha256";nonce="n-2"`,
    'expiresIn: expires is created + expiresIn')
  t.ok(handVerifies(received('POST', ORIGIN + '/v1/clients/', BODY, expiring), c.publicKey).ok, 'and the base signed has it in @signature-params')
})

t.test('describeSignatureBase gives the lines and SHA-256 of the base signed; signatureBaseMismatches names the differing lines', async (t) => {
  const c = cases[2] as Case
  const apiKey = await apiKeyOf(c.publicKey)
  const input = {
    method: 'POST', target: '/v1/clients/', body: BODY, apiKey, baseUrl: ORIGIN, created: 1790000000, nonce: 'abc', algorithm: 'ed25519'
  } as const
  const signed = await signRequest({ ...input, scheme: 'rfc9421', privateKey: c.privateKey })
  const described = await describeSignatureBase(input)
  const hand = handVerifies(received('POST', ORIGIN + '/v1/clients/', BODY, signed), c.publicKey)
  t.same(described.signatureBase, hand.base.split('\n'))
  t.equal(described.signatureBaseSha256, createHash('sha256').update(hand.base).digest('hex'))
  t.equal(`sig1=${described.signatureInput.slice('sig1='.length)}`, signed['Signature-Input'])
  const same = { signatureBaseSha256: described.signatureBaseSha256, signatureBase: described.signatureBase }
  t.same(signatureBaseMismatches(described, same), { mine: [], keygate: [] })
  const gatewaySaw = described.signatureBase.map((line) => line.startsWith('"@target-uri"') ? '"@target-uri": http://10.0.0.5:8080/v1/clients/' : line)
  t.same(signatureBaseMismatches(described, { signatureBaseSha256: 'x', signatureBase: gatewaySaw }), {
    mine: ['"@target-uri": https://api.example.com/v1/clients/'],
    keygate: ['"@target-uri": http://10.0.0.5:8080/v1/clients/']
  })
})

t.test('createClient with scheme rfc9421 sends headers that verify, for the bytes it sends', async (t) => {
  const c = cases[2] as Case
  const apiKey = await apiKeyOf(c.publicKey)
  const sent: Array<{ url: URL; init: RequestInit }> = []
  const client = createClient({
    baseUrl: 'http://127.0.0.1:8080',
    token: 'token',
    privateKey: await webcrypto.subtle.importKey('pkcs8', c.privateKey.export({ type: 'pkcs8', format: 'der' }), { name: 'Ed25519' }, true, ['sign']),
    scheme: 'rfc9421',
    fetch: async (url, init) => { sent.push({ url, init }); return new Response('{}', { status: 200 }) }
  })
  const info = await client.send('post', '/v1/clients/?q=1', BODY, { headers: { 'Content-Type': 'application/json; charset=utf-8' } })
  const { url, init } = sent[0] as { url: URL; init: RequestInit }
  const headers: Record<string, string> = {}
  new Headers(init.headers).forEach((value, name) => { headers[name] = value })
  t.equal(info.scheme, 'rfc9421')
  t.notOk('x-api-signature' in headers, 'no X-API-* headers')
  const request: Received = { method: String(init.method), url: url.href, headers, body: Buffer.from(init.body as Uint8Array) }
  t.equal(headers['content-digest'], digest(request.body))
  t.equal(await libraryVerifies(request, new Map([[apiKey, c]])), true)
  t.ok(handVerifies(request, c.publicKey).ok)
  t.equal(Buffer.from(info.signingString).toString(), handVerifies(request, c.publicKey).base, 'signingString is the signature base')
})

t.test('RFC 9421 input mistakes are named', async (t) => {
  const c = cases[2] as Case
  const apiKey = await apiKeyOf(c.publicKey)
  const base = { scheme: 'rfc9421', method: 'GET', target: '/v1/clients/', apiKey, privateKey: c.privateKey } as const
  t.match(await rejection(() => signRequest(base)), { input: 'baseUrl', message: /@target-uri needs the scheme and host.*components: "path"/ })
  t.match(await rejection(() => signRequest({ ...base, components: 'path', label: 'Sig 1' })), { input: 'label' })
  t.match(await rejection(() => signRequest({ ...base, components: 'uri' as 'path' })), { input: 'components' })
  t.match(await rejection(() => signRequest({ ...base, components: 'path', created: 1790000000000 })), { input: 'created', message: /milliseconds/ })
  for (const expiresIn of [0, -60, 1.5, '60']) {
    t.match(await rejection(() => signRequest({ ...base, components: 'path', expiresIn: expiresIn as number })), { input: 'expiresIn', message: /whole number of seconds/ },
      `expiresIn ${JSON.stringify(expiresIn)}`)
  }
  t.match(await rejection(async () => createClient({ baseUrl: ORIGIN, token: 't', privateKey: c.privateKey, scheme: 'rfc9421', expiresIn: 0 })),
    { input: 'expiresIn' }, 'createClient checks it at once')
  t.match(await rejection(() => signRequest({ ...base, scheme: 'cavage' as 'rfc9421' })), { input: 'scheme' })
  t.match(await rejection(() => createClient({ baseUrl: ORIGIN, token: 't', privateKey: c.privateKey, scheme: 'rfc9421', algorithm: 'rsa-v1_5-sha256' })),
    { input: 'algorithm' })
})
