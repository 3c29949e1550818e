// @keygate/client's signing (WebCrypto), checked against the openssl command line on the same
// inputs (RSA PKCS#1 v1.5 is deterministic: the same key and bytes give the same signature), against
// node:crypto, and against the gateway's own verification function for arbitrary bodies and targets.
import { execFileSync } from 'node:child_process'
import { createHash, createPrivateKey, createPublicKey, createVerify, generateKeyPairSync, webcrypto } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import t from 'tap'
import { verifyRequestSignature } from '../../../gateway/src/auth/signature.js'
import { requestTargetProblem, seedBodyProblem } from '@keygate/client/protocol'
import {
  apiKeyOf, type CryptoKeyLike, describeRequest, importPrivateKey, keyRegistration, signatureMismatches, signKeyName, signRequest, SigningInputError,
  type SignRequestInput
} from '../../../client/src/index.js'
import { rejection } from '../../helpers/rejection.js'

const dir = mkdtempSync(join(tmpdir(), 'keygate-client-'))
t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
const openssl = (args: string[], input?: string | Buffer): Buffer => execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] })
const keyFile = join(dir, 'private.pem')
openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-quiet', '-out', keyFile])
const pem = readFileSync(keyFile, 'utf8')
const pkcs1Pem = openssl(['rsa', '-in', keyFile, '-traditional']).toString()
const keyObject = createPrivateKey(pem)
const publicKey = createPublicKey(keyObject)
const apiKey = openssl(['dgst', '-sha256', '-r'], openssl(['pkey', '-in', keyFile, '-pubout', '-outform', 'DER'])).toString().split(' ')[0] ?? ''
const opensslSign = (data: Buffer): string => openssl(['dgst', '-sha256', '-sign', keyFile], data).toString('base64')
const RSA = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }
// A CryptoKey as a WebCrypto program holds it: imported from the PKCS#8 DER, not extractable.
const cryptoKey = await webcrypto.subtle.importKey('pkcs8', keyObject.export({ type: 'pkcs8', format: 'der' }), RSA, false, ['sign'])

const TS = 1790000000000
const JSON_BODY = '{"name":"Zoë Ada","email":"ada@example.com","tax_id":"12345678"}'
const NON_UTF8 = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a])

t.test('the same signature as openssl dgst -sha256 -sign over the same bytes', async (t) => {
  const framed = Buffer.from([0xaa, ...NON_UTF8, 0xbb])
  const cases: Array<[string, Omit<SignRequestInput, 'apiKey' | 'privateKey'>, Buffer]> = [
    ['GET, no body', { method: 'GET', target: '/v1/clients/' }, Buffer.from(`${TS}GET/v1/clients/`)],
    ['GET with a query', { method: 'GET', target: '/v1/clients/?limit=10&cursor=a%2Fb' }, Buffer.from(`${TS}GET/v1/clients/?limit=10&cursor=a%2Fb`)],
    [
      'POST, a JSON string sent as UTF-8',
      { method: 'POST', target: '/v1/clients/', body: JSON_BODY },
      Buffer.from(`${TS}POST/v1/clients/${JSON_BODY}`, 'utf8')
    ],
    [
      'POST, non-UTF-8 bytes in a Buffer',
      { method: 'POST', target: '/v1/clients/', body: NON_UTF8 },
      Buffer.concat([Buffer.from(`${TS}POST/v1/clients/`), NON_UTF8])
    ],
    [
      'a Uint8Array view into a larger buffer: only its bytes',
      { method: 'PUT', target: '/x', body: new Uint8Array(framed.buffer, framed.byteOffset + 1, NON_UTF8.length) },
      Buffer.concat([Buffer.from(`${TS}PUT/x`), NON_UTF8])
    ],
    ['a lower-case method is signed in upper case', { method: 'patch', target: '/v1/clients/1', body: '{}' }, Buffer.from(`${TS}PATCH/v1/clients/1{}`)],
    [
      'a body ending in a newline keeps it',
      { method: 'POST', target: '/v1/clients/', body: `${JSON_BODY}\n` },
      Buffer.from(`${TS}POST/v1/clients/${JSON_BODY}\n`)
    ]
  ]
  for (const [label, input, bytes] of cases) {
    const expected = opensslSign(bytes)
    for (const [form, privateKey] of [
      ['PKCS#8 PEM', pem],
      ['PKCS#1 PEM', pkcs1Pem],
      ['a Buffer of PEM', Buffer.from(pem)],
      ['a KeyObject', keyObject],
      ['a CryptoKey', cryptoKey]
    ] as const) {
      const headers = await signRequest({ ...input, timestamp: TS, apiKey, privateKey })
      t.same(headers, { 'X-API-Key': apiKey, 'X-API-Timestamp': String(TS), 'X-API-Signature': expected }, `${label}, key as ${form}`)
    }
    const signature = (await signRequest({ ...input, timestamp: TS, apiKey, privateKey: pkcs1Pem }))['X-API-Signature']
    t.ok(createVerify('sha256').update(bytes).verify(publicKey, signature, 'base64'), `${label}: node:crypto verifies it over the exact bytes`)
  }
  t.equal(
    (await signRequest({ method: 'GET', target: '/', apiKey, privateKey: pem, timestamp: String(TS) }))['X-API-Signature'],
    opensslSign(Buffer.from(`${TS}GET/`)),
    'a timestamp given as a string'
  )
  t.equal(
    (await signRequest({ method: 'PUT', target: '/x', body: new Uint8Array(NON_UTF8).buffer, apiKey, privateKey: pem, timestamp: TS }))['X-API-Signature'],
    opensslSign(Buffer.concat([Buffer.from(`${TS}PUT/x`), NON_UTF8])),
    'an ArrayBuffer body'
  )
  const before = Date.now()
  const stamped = Number((await signRequest({ method: 'GET', target: '/', apiKey, privateKey: pem }))['X-API-Timestamp'])
  t.ok(stamped >= before && stamped <= Date.now(), 'the timestamp defaults to now, in milliseconds')
})

t.test('importPrivateKey: a non-extractable RSASSA-PKCS1-v1_5 SHA-256 CryptoKey, from every input form', async (t) => {
  for (const [form, input] of [['PKCS#8 PEM', pem], ['PKCS#1 PEM', pkcs1Pem], ['a KeyObject', keyObject], ['a Buffer of PEM', Buffer.from(pem)]] as const) {
    const key = await importPrivateKey(input) as CryptoKeyLike & { algorithm: { hash?: { name: string } } }
    t.match(key, { type: 'private', extractable: false, usages: ['sign'], algorithm: { name: 'RSASSA-PKCS1-v1_5', hash: { name: 'SHA-256' } } }, form)
    t.equal(Object.getPrototypeOf(key), Object.getPrototypeOf(cryptoKey), `${form}: a WebCrypto CryptoKey`)
  }
  t.equal(await importPrivateKey(cryptoKey), cryptoKey, 'a CryptoKey is returned as it is')
})

t.test('apiKeyOf: the SHA-256 of the DER SPKI, as node:crypto and openssl compute it, from either half in every form', async (t) => {
  const nodeApiKey = createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex')
  t.equal(nodeApiKey, apiKey, 'node:crypto and openssl agree')
  const extractable = await webcrypto.subtle.importKey('pkcs8', keyObject.export({ type: 'pkcs8', format: 'der' }), RSA, true, ['sign'])
  const publicCryptoKey = await webcrypto.subtle.importKey('spki', publicKey.export({ type: 'spki', format: 'der' }), RSA, true, ['verify'])
  const forms: Array<[string, Parameters<typeof apiKeyOf>[0]]> = [
    ['public PEM (SPKI)', publicKey.export({ type: 'spki', format: 'pem' }).toString()],
    ['public PEM (PKCS#1, BEGIN RSA PUBLIC KEY)', publicKey.export({ type: 'pkcs1', format: 'pem' }).toString()],
    ['private PEM (PKCS#8)', pem],
    ['private PEM (PKCS#1, BEGIN RSA PRIVATE KEY)', pkcs1Pem],
    ['private PEM with CRLF line ends', pem.replaceAll('\n', '\r\n')],
    ['a public KeyObject', publicKey],
    ['a private KeyObject', keyObject],
    ['a public CryptoKey', publicCryptoKey],
    ['an extractable private CryptoKey', extractable],
    ['a Buffer of PEM', Buffer.from(pem)]
  ]
  for (const [form, key] of forms) t.equal(await apiKeyOf(key), nodeApiKey, form)
  t.match(await rejection(() => apiKeyOf(cryptoKey)), { input: 'key', message: /non-extractable private CryptoKey.*keyPair\.publicKey/ },
    'a non-extractable private CryptoKey: its public half cannot be read, and the error says what to give')
  t.match(await rejection(() => apiKeyOf(generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ type: 'spki', format: 'pem' }))),
    { input: 'key', message: /is an EC P-384 key; keygate takes RSA, Ed25519 and EC P-256 keys/ }, 'an EC public key on another curve than P-256')
})

t.test('registration helpers agree with openssl', async (t) => {
  t.equal(await signKeyName('my laptop', pem), opensslSign(Buffer.from('my laptop')))
  t.equal(await signKeyName('Zoë', pem), opensslSign(Buffer.from('Zoë', 'utf8')), 'the name\'s UTF-8 bytes')
  const expected = { name: 'my laptop', publicKey: openssl(['pkey', '-in', keyFile, '-pubout']).toString(), signature: opensslSign(Buffer.from('my laptop')) }
  for (const [form, key] of [['PKCS#8 PEM', pem], ['PKCS#1 PEM', pkcs1Pem], ['a KeyObject', keyObject]] as const) {
    t.same(await keyRegistration('my laptop', key), expected, form)
  }
  t.same(await keyRegistration('my laptop', cryptoKey, publicKey), expected, 'a non-extractable CryptoKey, with its public half given')
  t.match(await rejection(() => keyRegistration('my laptop', cryptoKey)), { input: 'publicKey', message: /give publicKey too/ },
    'a non-extractable CryptoKey alone: its public half is asked for')
  const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey
  t.match(await rejection(() => keyRegistration('my laptop', pem, stranger)), { input: 'publicKey', message: /not the public half of privateKey/ },
    'another key\'s public half')
  t.match(await rejection(() => signKeyName('', pem)), { input: 'name' })
})

t.test('inputs are checked, each mistake named', async (t) => {
  const good: SignRequestInput = { method: 'GET', target: '/v1/clients/', apiKey, privateKey: pem, timestamp: TS }
  const ecKey = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey
  const ecCryptoKey = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, false, ['sign', 'verify'])).privateKey
  const pssCryptoKey = await webcrypto.subtle.importKey('pkcs8', keyObject.export({ type: 'pkcs8', format: 'der' }),
    { name: 'RSA-PSS', hash: 'SHA-256' }, false, ['sign'])
  const sha1CryptoKey = await webcrypto.subtle.importKey('pkcs8', keyObject.export({ type: 'pkcs8', format: 'der' }),
    { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-1' }, false, ['sign'])
  const encrypted = (type: 'pkcs8' | 'pkcs1'): string => keyObject.export({ type, format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }).toString()
  const brokenBase64 = pem.replace(/\n[A-Za-z0-9+/]{10}/, '\n!!!!!!!!!!')
  const cases: Array<[string, Partial<SignRequestInput> | Record<string, unknown>, string, RegExp]> = [
    ['an absolute URL as target', { target: 'http://127.0.0.1:8080/v1/clients/' }, 'target', /origin-form/],
    ['a target without its leading slash', { target: 'v1/clients/' }, 'target', /origin-form/],
    ['a space in the target', { target: '/v1/clients/?q=a b' }, 'target', /keygate would refuse it/],
    ['a fragment', { target: '/v1/clients/#top' }, 'target', /keygate would refuse it/],
    ['a dot segment', { target: '/v1/../admin' }, 'target', /"\.\."/],
    ['an encoded unreserved character', { target: '/v1/%63lients/42' }, 'target', /keygate would refuse it: .*encoded unreserved character %63 \('c'\): send it unencoded/],
    ['an encoded slash', { target: '/v1/clients%2F42' }, 'target', /keygate would refuse it: .*encoded "\/" \(%2F\)/],
    ['an empty segment', { target: '/v1//clients/42' }, 'target', /keygate would refuse it: .*empty segment/],
    ['a dot segment behind matrix parameters', { target: '/v1/.;x/clients/' }, 'target', /keygate would refuse it: .*"\." segment before matrix parameters/],
    ['a method with a space', { method: 'GET ' }, 'method', /HTTP method/],
    ['no method', { method: '' }, 'method', /HTTP method/],
    ['a body on a GET', { body: '{}' }, 'body', /carries no body/],
    ['an object as body', { method: 'POST', body: { a: 1 } }, 'body', /serialise objects yourself/],
    ['seconds as timestamp', { timestamp: 1790000000 }, 'timestamp', /looks like seconds/],
    ['seconds as a string', { timestamp: '1790000000' }, 'timestamp', /looks like seconds/],
    ['a fractional timestamp', { timestamp: 1790000000000.5 }, 'timestamp', /milliseconds/],
    ['an ISO date as timestamp', { timestamp: '2026-09-21T00:00:00Z' }, 'timestamp', /milliseconds/],
    ['an upper-case apiKey', { apiKey: apiKey.toUpperCase() }, 'apiKey', /64 lowercase hex/],
    ['a short apiKey', { apiKey: 'abc' }, 'apiKey', /64 lowercase hex/],
    ['not a PEM', { privateKey: 'hello' }, 'privateKey', /not a readable PEM private key/],
    ['a public key', { privateKey: publicKey }, 'privateKey', /is a public key/],
    ['a public PEM', { privateKey: publicKey.export({ type: 'spki', format: 'pem' }) }, 'privateKey', /is a public key/],
    ['a public CryptoKey', { privateKey: await webcrypto.subtle.importKey('spki', publicKey.export({ type: 'spki', format: 'der' }), RSA, true, ['verify']) },
      'privateKey', /is a public CryptoKey; signing needs the private key/],
    ['an EC P-384 KeyObject', { privateKey: ecKey }, 'privateKey', /is an EC P-384 key; keygate takes RSA, Ed25519 and EC P-256 keys: make one with keygate keygen/],
    ['an EC P-384 key as PKCS#8 PEM', { privateKey: ecKey.export({ type: 'pkcs8', format: 'pem' }) }, 'privateKey', /is an EC P-384 key; keygate takes RSA/],
    ['an EC P-384 key as SEC1 PEM (BEGIN EC PRIVATE KEY)', { privateKey: ecKey.export({ type: 'sec1', format: 'pem' }) }, 'privateKey', /is an EC P-384 key/],
    ['an Ed448 key', { privateKey: generateKeyPairSync('ed448').privateKey.export({ type: 'pkcs8', format: 'pem' }) }, 'privateKey',
      /is an Ed448 key; keygate takes RSA, Ed25519 and EC P-256 keys/],
    ['an ECDSA P-384 CryptoKey', { privateKey: ecCryptoKey }, 'privateKey', /is an ECDSA P-384 CryptoKey; keygate verifies RSASSA-PKCS1-v1_5 with SHA-256, Ed25519 and ECDSA P-256/],
    ['an RSA-PSS CryptoKey', { privateKey: pssCryptoKey }, 'privateKey', /is an RSA-PSS SHA-256 CryptoKey; .*name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256'/],
    ['an RSASSA CryptoKey with SHA-1', { privateKey: sha1CryptoKey }, 'privateKey', /is an RSASSA-PKCS1-v1_5 SHA-1 CryptoKey/],
    ['an encrypted PKCS#8 PEM', { privateKey: encrypted('pkcs8') }, 'privateKey',
      /is an encrypted private key \(BEGIN ENCRYPTED PRIVATE KEY\); decrypt it first \(openssl pkey .*passphrase/],
    ['an encrypted PKCS#1 PEM', { privateKey: encrypted('pkcs1') }, 'privateKey', /is an encrypted private key \(Proc-Type: 4,ENCRYPTED\); decrypt it first/],
    ['a PEM whose body is not base64', { privateKey: brokenBase64 }, 'privateKey', /not a readable PEM private key \(its "PRIVATE KEY" body is not base64\)/],
    ['a certificate', { privateKey: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' }, 'privateKey', /holds "CERTIFICATE", not a key/],
    ['DER bytes', { privateKey: keyObject.export({ type: 'pkcs8', format: 'der' }) }, 'privateKey', /DER\? convert it to PEM/],
    ['a secret KeyObject', { privateKey: (await import('node:crypto')).createSecretKey(Buffer.alloc(32)) }, 'privateKey', /is a secret \(symmetric\) key/],
    ['a number as key', { privateKey: 42 }, 'privateKey', /PEM text/]
  ]
  for (const [label, change, input, message] of cases) {
    const error = await rejection(() => signRequest({ ...good, ...change } as SignRequestInput))
    t.ok(error instanceof SigningInputError, `${label}: a SigningInputError`)
    t.match(error, { input, message }, label)
  }
  t.ok(await signRequest(good), 'the good input signs')
})

t.test('describeRequest and signatureMismatches compare with an INVALID_SIGNATURE answer', async (t) => {
  const mine = await describeRequest({ method: 'get', target: '/v1/clients/', timestamp: TS })
  t.same(mine, {
    timestamp: String(TS),
    method: 'GET',
    target: '/v1/clients/',
    bodyLength: 0,
    bodySha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    signingStringLength: 28,
    signingStringSha256: openssl(['dgst', '-sha256', '-r'], `${TS}GET/v1/clients/`).toString().split(' ')[0]
  })
  const theirs = { ...await describeRequest({ method: 'GET', target: '/v1/clients/?limit=10', timestamp: TS }), code: 'INVALID_SIGNATURE' }
  t.same(signatureMismatches(mine, theirs), ['target', 'signingStringLength', 'signingStringSha256'])
  t.same(signatureMismatches(mine, { ...mine }), [])
})

// URI characters the gateway accepts in a target, and some it refuses (filtered below).
const TARGET_CHARS = [...'abcXYZ019-._~!$&\'()*+,;=:@/%?', '%20', '%2F', '%7e', '..', '.']

t.test('property: whatever signRequest signs, the gateway\'s verification accepts; one changed body byte, it refuses', async (t) => {
  const target = fc.array(fc.constantFrom(...TARGET_CHARS), { maxLength: 30 })
    .map((parts) => `/${parts.join('')}`)
    .filter((candidate) => requestTargetProblem(candidate) === undefined)
  // bodies the seed scheme accepts: none, or one that starts with a byte no target holds (the others are refused, below)
  const body = fc.oneof(fc.uint8Array({ maxLength: 2000 }), fc.string({ unit: 'binary', maxLength: 500 }))
    .filter((candidate) => seedBodyProblem(typeof candidate === 'string' ? Buffer.from(candidate, 'utf8') : candidate) === undefined)
  let checked = 0
  await fc.assert(fc.asyncProperty(
    fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE', 'post', 'Patch'), target, body,
    fc.integer({ min: 1_000_000_000_000, max: 999_999_999_999_999 }),
    async (method, target, body, timestamp) => {
      // a body on DELETE, as a route with bodyOnMethods: [DELETE] takes it
      const headers = await signRequest({ method, target, body, timestamp, apiKey, privateKey: cryptoKey, bodyOnMethods: ['DELETE'] })
      const bytes = Buffer.from(typeof body === 'string' ? Buffer.from(body, 'utf8') : body)
      const request = { timestamp: headers['X-API-Timestamp'], method: method.toUpperCase(), target, body: bytes, signature: headers['X-API-Signature'] }
      if (verifyRequestSignature(publicKey, request) !== undefined) return false
      if (bytes.length > 0) {
        const changed = Buffer.from(bytes)
        changed[changed.length - 1] = (changed[changed.length - 1] ?? 0) ^ 1
        if (verifyRequestSignature(publicKey, { ...request, body: changed }) !== 'does-not-verify') return false
      }
      checked++
      return true
    }), { numRuns: 300 })
  t.equal(checked, 300, '300 generated requests verified by the gateway\'s function')
})

t.test('the seed body rule before signing: a body that starts with a byte a target may hold is refused, as keygate refuses it', async (t) => {
  const input = { target: '/v1/clients/', apiKey, privateKey: cryptoKey, timestamp: TS }
  for (const body of ['42', 'a=1', '=1', '&x', '/x', '%7B', '?a', 'e', '-1', '~', new Uint8Array([0x41, 0x7b])]) {
    const err = await signRequest({ ...input, method: 'POST', body }).then(() => undefined, (e: unknown) => e)
    t.ok(err instanceof SigningInputError, `${String(body)}: refused`)
    t.equal((err as SigningInputError).input, 'body')
    t.match((err as Error).message, /AMBIGUOUS_SIGNED_BODY/, 'named by the code keygate would answer')
    t.match((err as Error).message, /scheme: 'rfc9421'/, 'and RFC 9421 suggested')
  }
  for (const body of ['{"a":1}', '[1]', '"x"', ' a=1', '\n42', '#x', new Uint8Array([0xff, 0x41])]) {
    t.ok((await signRequest({ ...input, method: 'POST', body }))['X-API-Signature'], `${JSON.stringify(String(body))}: signed`)
  }
  t.ok((await signRequest({ ...input, method: 'POST', body: 'a=1', seedBodyBoundary: 'unchecked' }))['X-API-Signature'],
    'seedBodyBoundary: unchecked, for a route that opted out: signed')
  const form = { scheme: 'rfc9421', components: 'path', method: 'POST', body: 'a=1', contentType: 'application/x-www-form-urlencoded' } as const
  t.ok(await signRequest({ ...input, ...form }), 'the same body with RFC 9421: signed')
  const wrong = { seedBodyBoundary: 'off' as 'unchecked' }
  await t.rejects(signRequest({ ...input, method: 'POST', body: '{}', ...wrong }), { name: 'SigningInputError', input: 'seedBodyBoundary' })
})

t.test('a body on DELETE or OPTIONS is refused before signing, either scheme, unless bodyOnMethods takes it', async (t) => {
  const input = { target: '/v1/clients/7', apiKey, privateKey: cryptoKey, timestamp: TS, body: '{"reason":"x"}' }
  for (const method of ['DELETE', 'OPTIONS']) {
    await t.rejects(signRequest({ ...input, method }), { name: 'SigningInputError', input: 'body', message: /VALIDATION_FAILED.*bodyOnMethods/ }, method)
    const rfc = { scheme: 'rfc9421', components: 'path' } as const
    await t.rejects(signRequest({ ...input, method, ...rfc }), { name: 'SigningInputError', input: 'body' }, `${method}, RFC 9421`)
    t.ok(await signRequest({ ...input, method, bodyOnMethods: [method] }), `${method} with bodyOnMethods: [${method}]`)
  }
  t.ok(await signRequest({ ...input, method: 'DELETE', body: undefined }), 'a DELETE without a body')
  await t.rejects(signRequest({ ...input, method: 'DELETE', bodyOnMethods: ['GET'] }), { name: 'SigningInputError', input: 'bodyOnMethods' })
})
