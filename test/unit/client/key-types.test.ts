// @keygate/client with Ed25519 and EC P-256 keys in the seed scheme (X-API-*) and in the
// registration proof: every key form the client takes, each signature verified with node:crypto
// (P-256: the DER signature, as openssl dgst -sha256 -sign makes it) and the apiKey compared with
// the SHA-256 of the SPKI DER that node:crypto exports.
import { execFileSync } from 'node:child_process'
import { createHash, createPublicKey, generateKeyPairSync, type KeyObject, verify, webcrypto } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { apiKeyOf, keyRegistration, keyTypeOf, signKeyName, signRequest, SigningInputError } from '../../../client/src/index.js'
import { derOfRawEcdsa } from '../../../client/src/der.js'
import { rejection } from '../../helpers/rejection.js'

const TS = 1790000000000
const BODY = '{"name":"Zoë Ada","email":"ada@example.com","tax_id":"12345678"}'

interface Case { type: 'ed25519' | 'p256'; privateKey: KeyObject; publicKey: KeyObject }
const cases: Case[] = [
  { type: 'ed25519', ...generateKeyPairSync('ed25519') },
  { type: 'p256', ...generateKeyPairSync('ec', { namedCurve: 'P-256' }) }
]

const nodeApiKey = (publicKey: KeyObject): string => createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex')
/** node:crypto's verification of a seed-scheme signature: Ed25519 raw, P-256 DER over SHA-256 */
const nodeVerifies = (type: Case['type'], publicKey: KeyObject, data: Buffer, signature: string): boolean =>
  verify(type === 'ed25519' ? null : 'sha256', data, { key: publicKey, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'))

async function webCryptoKey (type: Case['type'], privateKey: KeyObject): Promise<webcrypto.CryptoKey> {
  const algorithm = type === 'ed25519' ? { name: 'Ed25519' } : { name: 'ECDSA', namedCurve: 'P-256' }
  return await webcrypto.subtle.importKey('pkcs8', privateKey.export({ type: 'pkcs8', format: 'der' }), algorithm, true, ['sign'])
}

for (const { type, privateKey, publicKey } of cases) {
  t.test(`${type}: every key form gives the apiKey node:crypto computes`, async (t) => {
    const expected = nodeApiKey(publicKey)
    const forms: Array<[string, unknown]> = [
      ['PKCS#8 PEM', privateKey.export({ type: 'pkcs8', format: 'pem' })],
      ['PKCS#8 PEM bytes', Buffer.from(privateKey.export({ type: 'pkcs8', format: 'pem' }) as string)],
      ['SPKI PEM', publicKey.export({ type: 'spki', format: 'pem' })],
      ['private KeyObject', privateKey],
      ['public KeyObject', publicKey],
      ['extractable private CryptoKey', await webCryptoKey(type, privateKey)],
      ...(type === 'p256' ? [['SEC1 PEM (BEGIN EC PRIVATE KEY)', privateKey.export({ type: 'sec1', format: 'pem' })] as [string, unknown]] : [])
    ]
    for (const [form, key] of forms) {
      t.equal(await apiKeyOf(key as string), expected, form)
      t.equal(keyTypeOf(key as string), type, `${form}: keyTypeOf`)
    }
  })

  t.test(`${type}: the seed scheme's signature verifies with node:crypto over timestamp + METHOD + target + body`, async (t) => {
    const apiKey = nodeApiKey(publicKey)
    const forms: Array<[string, unknown]> = [
      ['PKCS#8 PEM', privateKey.export({ type: 'pkcs8', format: 'pem' })],
      ['KeyObject', privateKey],
      ['CryptoKey', await webCryptoKey(type, privateKey)],
      ...(type === 'p256' ? [['SEC1 PEM', privateKey.export({ type: 'sec1', format: 'pem' })] as [string, unknown]] : [])
    ]
    for (const [form, key] of forms) {
      for (const [method, target, body] of [['POST', '/v1/clients/?x=1', BODY], ['GET', '/v1/clients/', undefined]] as const) {
        const headers = await signRequest({ method, target, body, apiKey, privateKey: key as string, timestamp: TS })
        t.equal(headers['X-API-Key'], apiKey)
        t.equal(headers['X-API-Timestamp'], String(TS))
        const data = Buffer.concat([Buffer.from(`${TS}${method}${target}`), Buffer.from(body ?? '')])
        t.ok(nodeVerifies(type, publicKey, data, headers['X-API-Signature']), `${form} ${method}: verifies`)
        t.notOk(nodeVerifies(type, publicKey, Buffer.concat([data, Buffer.from('x')]), headers['X-API-Signature']), `${form} ${method}: not over other bytes`)
      }
    }
  })

  t.test(`${type}: the registration proof over the name verifies, and keyRegistration's publicKey is the SPKI`, async (t) => {
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
    const name = 'laptop ключ'
    t.ok(nodeVerifies(type, publicKey, Buffer.from(name, 'utf8'), await signKeyName(name, pem)), 'signKeyName')
    const body = await keyRegistration(name, pem)
    t.ok(nodeVerifies(type, publicKey, Buffer.from(name, 'utf8'), body.signature), 'keyRegistration signature')
    t.equal(nodeApiKey(createPublicKey(body.publicKey)), nodeApiKey(publicKey), 'keyRegistration publicKey')
    const algorithm = type === 'ed25519' ? { name: 'Ed25519' } : { name: 'ECDSA', namedCurve: 'P-256' }
    const cryptoPair = await webcrypto.subtle.generateKey(algorithm, false, ['sign', 'verify']) as webcrypto.CryptoKeyPair
    const withPublic = await keyRegistration(name, cryptoPair.privateKey, cryptoPair.publicKey)
    t.ok(nodeVerifies(type, createPublicKey(withPublic.publicKey), Buffer.from(name), withPublic.signature), 'non-extractable CryptoKey with its public half')
    const other = type === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' })
    t.match(await rejection(() => keyRegistration(name, pem, other.publicKey)), { input: 'publicKey', message: /is not the public half of privateKey/ })
  })
}

t.test('a P-256 signature is DER as openssl makes it: openssl verifies it, minimal INTEGERs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-keytypes-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  writeFileSync(join(dir, 'pub.pem'), publicKey.export({ type: 'spki', format: 'pem' }))
  for (let i = 0; i < 5; i++) {
    const data = `${i}`
    writeFileSync(join(dir, 'data'), data)
    writeFileSync(join(dir, 'sig'), Buffer.from(await signKeyName(data, privateKey), 'base64'))
    const out = execFileSync('openssl', ['dgst', '-sha256', '-verify', join(dir, 'pub.pem'), '-signature', join(dir, 'sig'), join(dir, 'data')]).toString()
    t.match(out, /Verified OK/, `signature ${i}`)
  }
  const raw = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex, 'hex'))
  const r = '00'.repeat(31) + '7f'
  const s = '80' + '01'.repeat(31)
  t.equal(Buffer.from(derOfRawEcdsa(raw(r + s))).toString('hex'), `302602017f022100${s}`, 'leading zeros dropped, a 0x00 before a high bit')
})

t.test('keys keygate does not take are named', async (t) => {
  const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey
  t.match(await rejection(() => signKeyName('x', p384.export({ type: 'sec1', format: 'pem' }) as string)),
    { input: 'privateKey', message: /is an EC P-384 key; keygate takes RSA, Ed25519 and EC P-256 keys/ })
  t.match(await rejection(() => signKeyName('x', generateKeyPairSync('ed448').privateKey)), { input: 'privateKey', message: /is an Ed448 key/ })
  const err = await rejection(() => signRequest({
    scheme: 'rfc9421',
    method: 'GET',
    target: '/',
    apiKey: 'a'.repeat(64),
    privateKey: cases[0]?.privateKey as KeyObject,
    algorithm: 'rsa-pss-sha512',
    components: 'path'
  }))
  t.ok(err instanceof SigningInputError)
  t.match(err, { input: 'algorithm', message: /rsa-pss-sha512 needs another type of key: this ed25519 key signs with ed25519/ })
})
