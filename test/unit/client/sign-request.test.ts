// keygate/client's signing, checked against the openssl command line on the same inputs (RSA
// PKCS#1 v1.5 is deterministic: the same key and bytes give the same signature), and against the
// gateway's own verification function for arbitrary bodies and targets.
import { execFileSync } from 'node:child_process'
import { createPrivateKey, createPublicKey } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import t from 'tap'
import { verifyRequestSignature } from '../../../gateway/src/auth/signature.js'
import { requestTargetProblem } from '@keygate/client/protocol'
import {
  apiKeyOf, describeRequest, keyRegistration, signatureMismatches, signKeyName, signRequest, SigningInputError, type SignRequestInput
} from '../../../client/src/index.js'

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
      ['a KeyObject', keyObject]
    ] as const) {
      const headers = signRequest({ ...input, timestamp: TS, apiKey, privateKey })
      t.same(headers, { 'X-API-Key': apiKey, 'X-API-Timestamp': String(TS), 'X-API-Signature': expected }, `${label}, key as ${form}`)
    }
  }
  t.equal(
    signRequest({ method: 'GET', target: '/', apiKey, privateKey: pem, timestamp: String(TS) })['X-API-Signature'],
    opensslSign(Buffer.from(`${TS}GET/`)),
    'a timestamp given as a string'
  )
  const before = Date.now()
  const stamped = Number(signRequest({ method: 'GET', target: '/', apiKey, privateKey: pem })['X-API-Timestamp'])
  t.ok(stamped >= before && stamped <= Date.now(), 'the timestamp defaults to now, in milliseconds')
})

t.test('registration helpers agree with openssl', async (t) => {
  t.equal(apiKeyOf(keyObject), apiKey, 'apiKeyOf(private key) is the SHA-256 of the DER SPKI of its public half')
  t.equal(apiKeyOf(publicKey), apiKey, 'and of the public key itself')
  t.equal(signKeyName('my laptop', pem), opensslSign(Buffer.from('my laptop')))
  t.equal(signKeyName('Zoë', pem), opensslSign(Buffer.from('Zoë', 'utf8')), 'the name\'s UTF-8 bytes')
  const body = keyRegistration('my laptop', pem)
  t.same(body, { name: 'my laptop', publicKey: openssl(['pkey', '-in', keyFile, '-pubout']).toString(), signature: opensslSign(Buffer.from('my laptop')) })
})

t.test('inputs are checked, each mistake named', async (t) => {
  const good: SignRequestInput = { method: 'GET', target: '/v1/clients/', apiKey, privateKey: pem, timestamp: TS }
  const ecKey = (await import('node:crypto')).generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
  const cases: Array<[string, Partial<SignRequestInput> | Record<string, unknown>, string, RegExp]> = [
    ['an absolute URL as target', { target: 'http://127.0.0.1:8080/v1/clients/' }, 'target', /origin-form/],
    ['a target without its leading slash', { target: 'v1/clients/' }, 'target', /origin-form/],
    ['a space in the target', { target: '/v1/clients/?q=a b' }, 'target', /keygate would refuse it/],
    ['a fragment', { target: '/v1/clients/#top' }, 'target', /keygate would refuse it/],
    ['a dot segment', { target: '/v1/../admin' }, 'target', /"\.\."/],
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
    ['an EC key', { privateKey: ecKey }, 'privateKey', /is a ec key; keygate verifies RSA/],
    ['a number as key', { privateKey: 42 }, 'privateKey', /PEM text/]
  ]
  for (const [label, change, input, message] of cases) {
    let error: unknown
    try {
      signRequest({ ...good, ...change } as SignRequestInput)
    } catch (err) {
      error = err
    }
    t.ok(error instanceof SigningInputError, `${label}: a SigningInputError`)
    t.match(error, { input, message }, label)
  }
  t.ok(signRequest(good), 'the good input signs')
})

t.test('describeRequest and signatureMismatches compare with an INVALID_SIGNATURE answer', async (t) => {
  const mine = describeRequest({ method: 'get', target: '/v1/clients/', timestamp: TS })
  t.same(mine, {
    timestamp: String(TS),
    method: 'GET',
    target: '/v1/clients/',
    bodyLength: 0,
    bodySha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    signingStringLength: 28,
    signingStringSha256: openssl(['dgst', '-sha256', '-r'], `${TS}GET/v1/clients/`).toString().split(' ')[0]
  })
  const theirs = { ...describeRequest({ method: 'GET', target: '/v1/clients/?limit=10', timestamp: TS }), code: 'INVALID_SIGNATURE' }
  t.same(signatureMismatches(mine, theirs), ['target', 'signingStringLength', 'signingStringSha256'])
  t.same(signatureMismatches(mine, { ...mine }), [])
})

// URI characters the gateway accepts in a target, and some it refuses (filtered below).
const TARGET_CHARS = [...'abcXYZ019-._~!$&\'()*+,;=:@/%?', '%20', '%2F', '%7e', '..', '.']

t.test('property: whatever signRequest signs, the gateway\'s verification accepts; one changed body byte, it refuses', async (t) => {
  const target = fc.array(fc.constantFrom(...TARGET_CHARS), { maxLength: 30 })
    .map((parts) => `/${parts.join('')}`)
    .filter((candidate) => requestTargetProblem(candidate) === undefined)
  const body = fc.oneof(fc.uint8Array({ maxLength: 2000 }), fc.string({ unit: 'binary', maxLength: 500 }))
  let checked = 0
  fc.assert(fc.property(
    fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE', 'post', 'Patch'), target, body,
    fc.integer({ min: 1_000_000_000_000, max: 999_999_999_999_999 }),
    (method, target, body, timestamp) => {
      const headers = signRequest({ method, target, body, timestamp, apiKey, privateKey: keyObject })
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
