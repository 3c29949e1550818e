import { constants, sign } from 'node:crypto'
import t from 'tap'
import { signingString } from '@keygate/client/protocol'
import { signatureStage } from '../../../../gateway/src/auth/signature.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { parseRsaPublicKey } from '../../../../gateway/src/keys/public-key.js'
import { captureGatewayError, describedRequest, rsaPair, signBase64, type RsaPair } from '../../../helpers/auth-fixtures.js'

const pair = rsaPair()
const other = rsaPair()
const stage = signatureStage()
const parsed = parseRsaPublicKey(pair.spkiPem)
const key = { apiKey: parsed.apiKey, owner: 'alice', name: 'laptop', keyObject: parsed.keyObject }

const TS = '1700000000000'
const PATH = '/v1/clients/'
const JSON_BODY = '{"name":"Ada","email":"ada@example.com","tax_id":"12345678"}'
const NON_UTF8 = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a, 0xe9])

interface Case {
  label: string
  /** the request as received */
  method: string
  url: string
  body?: Buffer | undefined
  /** the signing string the client signed (bytes or text) */
  signed: string | Buffer
  signer?: RsaPair
  /** rewrites the base64 signature text before it is sent */
  mangle?: (signature: string) => string
  /** the timestamp header, when other than TS */
  timestamp?: string
}

async function run (c: Case): Promise<void> {
  const signature = signBase64((c.signer ?? pair).privateKey, c.signed)
  const state: AuthState = {
    user: 'alice',
    signatureHeaders: { apiKey: key.apiKey, timestamp: c.timestamp ?? TS, signature: c.mangle === undefined ? signature : c.mangle(signature) },
    key
  }
  await stage.run(describedRequest({ method: c.method, url: c.url, body: c.body }), state)
}

const accepted: Case[] = [
  { label: 'POST with a JSON body', method: 'POST', url: PATH, body: Buffer.from(JSON_BODY), signed: TS + 'POST' + PATH + JSON_BODY },
  { label: 'GET without a body signs the empty string', method: 'GET', url: PATH, body: undefined, signed: TS + 'GET' + PATH },
  { label: 'GET with an empty buffered body', method: 'GET', url: PATH, body: Buffer.alloc(0), signed: TS + 'GET' + PATH },
  { label: 'query string signed and sent', method: 'GET', url: `${PATH}?cursor=abc&limit=10`, signed: `${TS}GET${PATH}?cursor=abc&limit=10` },
  { label: 'percent-encoded query signed as sent', method: 'GET', url: `${PATH}?q=a%20b%2Fc`, signed: `${TS}GET${PATH}?q=a%20b%2Fc` },
  {
    label: 'non-UTF-8 body signed over its exact bytes',
    method: 'POST',
    url: PATH,
    body: NON_UTF8,
    signed: Buffer.concat([Buffer.from(TS + 'POST' + PATH), NON_UTF8])
  },
  {
    label: 'multi-byte UTF-8 body signed over its UTF-8 bytes',
    method: 'POST',
    url: PATH,
    body: Buffer.from('{"name":"Zoë 名"}'),
    signed: TS + 'POST' + PATH + '{"name":"Zoë 名"}'
  },
  {
    label: 'body with a trailing newline, signed with it',
    method: 'POST',
    url: PATH,
    body: Buffer.from(JSON_BODY + '\n'),
    signed: TS + 'POST' + PATH + JSON_BODY + '\n'
  }
]

t.test('signatures over the exact signing string verify', async (t) => {
  for (const c of accepted) {
    t.test(c.label, async (t) => {
      await run(c)
      t.pass('verified')
    })
  }
})

const oneByteChanged = JSON_BODY.replace('Ada', 'Adb')
const wrapped = (s: string, eol: string): string => (s.match(/.{1,64}/g) ?? []).join(eol)

const refused: Case[] = [
  { label: 'body changed by one byte', method: 'POST', url: PATH, body: Buffer.from(oneByteChanged), signed: TS + 'POST' + PATH + JSON_BODY },
  {
    label: 'trailing newline added to the body after signing',
    method: 'POST',
    url: PATH,
    body: Buffer.from(JSON_BODY + '\n'),
    signed: TS + 'POST' + PATH + JSON_BODY
  },
  {
    label: 'trailing newline added to the signing string',
    method: 'POST',
    url: PATH,
    body: Buffer.from(JSON_BODY),
    signed: TS + 'POST' + PATH + JSON_BODY + '\n'
  },
  { label: 'trailing newline on a GET signing string', method: 'GET', url: PATH, signed: TS + 'GET' + PATH + '\n' },
  { label: 'separators between the parts', method: 'GET', url: PATH, signed: `${TS}\nGET\n${PATH}\n` },
  { label: 'method lowercase in the signing string', method: 'POST', url: PATH, body: Buffer.from(JSON_BODY), signed: TS + 'post' + PATH + JSON_BODY },
  { label: 'another method signed (GET for POST)', method: 'POST', url: PATH, body: Buffer.from(JSON_BODY), signed: TS + 'GET' + PATH + JSON_BODY },
  { label: 'path without its trailing slash', method: 'GET', url: PATH, signed: TS + 'GET' + '/v1/clients' },
  { label: 'query string left out of the signed target', method: 'GET', url: `${PATH}?cursor=abc`, signed: TS + 'GET' + PATH },
  { label: 'query string signed in another order', method: 'GET', url: `${PATH}?a=1&b=2`, signed: `${TS}GET${PATH}?b=2&a=1` },
  { label: 'query string signed decoded', method: 'GET', url: `${PATH}?q=a%20b`, signed: `${TS}GET${PATH}?q=a b` },
  { label: 'query signed but not sent', method: 'GET', url: PATH, signed: `${TS}GET${PATH}?cursor=abc` },
  { label: 'another timestamp signed than sent', method: 'GET', url: PATH, signed: '1700000000001GET' + PATH },
  { label: 'timestamp in seconds signed, milliseconds sent', method: 'GET', url: PATH, signed: '1700000000GET' + PATH },
  {
    label: 'non-UTF-8 body signed over its lossy UTF-8 decoding',
    method: 'POST',
    url: PATH,
    body: NON_UTF8,
    signed: TS + 'POST' + PATH + NON_UTF8.toString('utf8')
  },
  { label: 'body signed but not sent (GET)', method: 'GET', url: PATH, signed: TS + 'GET' + PATH + '{}' },
  { label: 'empty body signed, body sent', method: 'POST', url: PATH, body: Buffer.from(JSON_BODY), signed: TS + 'POST' + PATH },
  { label: 'signed with a different key pair', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, signer: other },
  { label: 'signature not base64', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: () => 'not base64 at all!' },
  {
    label: 'signature as base64url',
    method: 'GET',
    url: PATH,
    signed: TS + 'GET' + PATH,
    mangle: (s) => Buffer.from(s, 'base64').toString('base64url') + '-_'
  },
  { label: 'signature with a space inside', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => `${s.slice(0, 100)} ${s.slice(100)}` },
  { label: 'signature with a leading space', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => ` ${s}` },
  { label: 'signature with a trailing newline', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => `${s}\n` },
  { label: 'signature wrapped at 64 columns (LF)', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => wrapped(s, '\n') },
  { label: 'signature wrapped at 64 columns (CRLF)', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => wrapped(s, '\r\n') },
  { label: 'empty signature', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: () => '' },
  { label: 'signature truncated by 4 characters', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => s.slice(0, -4) },
  { label: 'signature truncated to half', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => s.slice(0, 172) },
  {
    label: 'signature with a zero byte prepended',
    method: 'GET',
    url: PATH,
    signed: TS + 'GET' + PATH,
    mangle: (s) => Buffer.concat([Buffer.alloc(1), Buffer.from(s, 'base64')]).toString('base64')
  },
  { label: 'signature hex-encoded', method: 'GET', url: PATH, signed: TS + 'GET' + PATH, mangle: (s) => Buffer.from(s, 'base64').toString('hex') },
  {
    label: 'signature with one bit flipped',
    method: 'GET',
    url: PATH,
    signed: TS + 'GET' + PATH,
    mangle: (s) => {
      const b = Buffer.from(s, 'base64')
      b[10] = (b[10] ?? 0) ^ 1
      return b.toString('base64')
    }
  }
]

t.test('anything else is INVALID_SIGNATURE', async (t) => {
  for (const c of refused) {
    t.test(c.label, async (t) => {
      const err = await captureGatewayError(() => run(c))
      t.equal(err.code, 'INVALID_SIGNATURE')
      t.equal(err.statusCode, 401)
    })
  }
})

t.test('an RSA-PSS signature over the right string is refused (PKCS#1 v1.5 only)', async (t) => {
  const data = Buffer.from(TS + 'GET' + PATH)
  const pss = sign('sha256', data, { key: pair.privateKey, padding: constants.RSA_PKCS1_PSS_PADDING }).toString('base64')
  const state: AuthState = { user: 'alice', signatureHeaders: { apiKey: key.apiKey, timestamp: TS, signature: pss }, key }
  const err = await captureGatewayError(() => stage.run(describedRequest({ method: 'GET', url: PATH }), state))
  t.equal(err.code, 'INVALID_SIGNATURE')
})

t.test('signingString()', async (t) => {
  const cases: Array<[string, [string, string, string, Buffer | undefined], Buffer]> = [
    ['GET, no body', [TS, 'GET', PATH, undefined], Buffer.from(`${TS}GET${PATH}`)],
    ['GET, empty body', [TS, 'GET', PATH, Buffer.alloc(0)], Buffer.from(`${TS}GET${PATH}`)],
    ['POST with JSON, no separators', [TS, 'POST', PATH, Buffer.from(JSON_BODY)], Buffer.from(`${TS}POST${PATH}${JSON_BODY}`)],
    ['query kept verbatim', [TS, 'GET', `${PATH}?b=2&a=%20`, undefined], Buffer.from(`${TS}GET${PATH}?b=2&a=%20`)],
    ['method as given', [TS, 'post', PATH, undefined], Buffer.from(`${TS}post${PATH}`)],
    ['body bytes appended unchanged (non-UTF-8)', [TS, 'POST', PATH, NON_UTF8], Buffer.concat([Buffer.from(`${TS}POST${PATH}`), NON_UTF8])],
    [
      'UTF-8 body stays UTF-8 (not latin1)',
      [TS, 'POST', PATH, Buffer.from('é', 'utf8')],
      Buffer.concat([Buffer.from(`${TS}POST${PATH}`), Buffer.from([0xc3, 0xa9])])
    ],
    ['trailing whitespace of the body kept', [TS, 'POST', PATH, Buffer.from('{} \r\n')], Buffer.from(`${TS}POST${PATH}{} \r\n`)]
  ]
  for (const [label, args, expected] of cases) {
    const parts = signingString(...args)
    t.ok(parts.every((part) => part instanceof Uint8Array), `${label}: bytes (Uint8Array, in any runtime)`)
    t.equal(Buffer.concat(parts).toString('hex'), expected.toString('hex'), label)
  }
})
