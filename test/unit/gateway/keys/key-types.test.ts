// Ed25519 and EC P-256 keys beside RSA: what registration accepts and refuses, the verification of
// each key type, the seed scheme's signature stage with them, and the replay identity of a P-256
// signature (ECDSA signatures are malleable). Signatures are made with node:crypto's sign, the
// DER of a malleated ECDSA signature by a hand-rolled encoder.
import { constants, createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import t from 'tap'
import { signingString } from '@keygate/client/protocol'
import { replayIdentity } from '../../../../gateway/src/auth/replay.js'
import { signatureStage } from '../../../../gateway/src/auth/signature.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { createKeyRegistry } from '../../../../gateway/src/keys/key-registry.js'
import {
  canonicalP256Signature, keyTypeOf, parsePublicKey, parseRsaPublicKey, verifyEd25519, verifyP256Sha256, verifyRsaPssSha512, verifyRsaSha256, verifyWithKey
} from '../../../../gateway/src/keys/public-key.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { captureGatewayError, describedRequest, rsaPair } from '../../../helpers/auth-fixtures.js'

const spkiPem = (key: KeyObject): string => key.export({ type: 'spki', format: 'pem' }).toString()
const spkiSha256 = (key: KeyObject): string => createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex')

const ed = generateKeyPairSync('ed25519')
const p256 = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
const rsa = rsaPair()

// --- P-256 signatures taken apart and put together by hand ----------------------------------------

const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n
const hexOf = (n: bigint): string => { const h = n.toString(16); return h.length % 2 === 1 ? '0' + h : h }
function derInteger (n: bigint): Buffer {
  let bytes = Buffer.from(hexOf(n), 'hex')
  if (((bytes[0] ?? 0) & 0x80) !== 0) bytes = Buffer.concat([Buffer.alloc(1), bytes])
  return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes])
}
const derSignature = (r: bigint, s: bigint): Buffer => {
  const content = Buffer.concat([derInteger(r), derInteger(s)])
  return Buffer.concat([Buffer.from([0x30, content.length]), content])
}
/** r and s of a P-256 signature in its raw form */
function scalarsOf (raw: Buffer): { r: bigint; s: bigint } {
  return { r: BigInt('0x' + raw.subarray(0, 32).toString('hex')), s: BigInt('0x' + raw.subarray(32).toString('hex')) }
}
const p256Sign = (data: string | Buffer, encoding: 'der' | 'ieee-p1363' = 'der'): Buffer =>
  sign('sha256', Buffer.from(data), { key: p256.privateKey, dsaEncoding: encoding })

// -------------------------------------------------------------------------------------------------

t.test('parsePublicKey accepts Ed25519 and P-256 SPKI keys, and RSA as parseRsaPublicKey does', async (t) => {
  for (const [label, key, type] of [['Ed25519', ed.publicKey, 'ed25519'], ['P-256', p256.publicKey, 'p256'], ['RSA', rsa.publicKey, 'rsa']] as const) {
    const parsed = parsePublicKey(spkiPem(key))
    t.equal(parsed.keyType, type, `${label}: keyType`)
    t.equal(parsed.apiKey, spkiSha256(key), `${label}: apiKey is the SHA-256 of the SPKI DER`)
    t.ok(parsed.keyObject.equals(key), `${label}: the same key`)
    t.equal(parsed.pem, spkiPem(key), `${label}: stored as SPKI PEM`)
    t.equal(keyTypeOf(parsed.keyObject), type)
  }
  t.equal(parsePublicKey(rsa.pkcs1Pem).apiKey, parseRsaPublicKey(rsa.pkcs1Pem).apiKey, 'RSA PKCS#1: the same apiKey')
  const crlf = parsePublicKey(spkiPem(p256.publicKey).replace(/\r?\n/g, '\r\n'))
  t.equal(crlf.apiKey, spkiSha256(p256.publicKey), 'CRLF line endings: the same apiKey')
})

t.test('parsePublicKey refuses other curves and key types, saying what is accepted and how to make one', async (t) => {
  const cases: Array<[string, KeyObject]> = [
    ['EC P-384', generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey],
    ['EC P-521', generateKeyPairSync('ec', { namedCurve: 'secp521r1' }).publicKey],
    ['EC secp256k1', generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey],
    ['Ed448', generateKeyPairSync('ed448').publicKey],
    ['X25519', generateKeyPairSync('x25519').publicKey],
    ['X448', generateKeyPairSync('x448').publicKey],
    ['DSA', generateKeyPairSync('dsa', { modulusLength: 1024, divisorLength: 160 }).publicKey],
    ['RSA-PSS (id-RSASSA-PSS SPKI)', generateKeyPairSync('rsa-pss', { modulusLength: 2048 }).publicKey]
  ]
  for (const [label, key] of cases) {
    const err = await captureGatewayError(() => parsePublicKey(spkiPem(key)))
    t.equal(err.code, 'INVALID_PUBLIC_KEY', label)
    t.equal(err.statusCode, 400, label)
    t.match(err.message, /openssl genpkey -algorithm ed25519/, `${label}: how to make an Ed25519 key`)
    t.match(err.message, /openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256/, `${label}: how to make a P-256 key`)
  }
  t.match((await captureGatewayError(() => parsePublicKey(spkiPem(cases[0]?.[1] as KeyObject)))).message, /on the curve secp384r1/, 'names the curve')
  t.match((await captureGatewayError(() => parsePublicKey(spkiPem(cases[3]?.[1] as KeyObject)))).message, /is a ed448 key/, 'names the type')
})

t.test('parsePublicKey keeps the RSA rules (sizes, exponent) and the PEM rules', async (t) => {
  const small = rsaPair(1024)
  const err = await captureGatewayError(() => parsePublicKey(small.spkiPem))
  t.equal(err.code, 'INVALID_PUBLIC_KEY')
  t.match(err.message, /RSA key of 1024 bits: keygate accepts 2048, 3072 or 4096 bits/)
  const exponent3 = generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 3 }).publicKey
  t.match((await captureGatewayError(() => parsePublicKey(spkiPem(exponent3)))).message, /public exponent 3: keygate accepts 65537 only/)
  for (const text of ['', 'not a key', `${spkiPem(ed.publicKey)}${spkiPem(ed.publicKey)}`, ed.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()]) {
    t.equal((await captureGatewayError(() => parsePublicKey(text))).code, 'INVALID_PUBLIC_KEY', JSON.stringify(text.slice(0, 30)))
  }
  t.equal((await captureGatewayError(() => parseRsaPublicKey(spkiPem(ed.publicKey)))).code, 'INVALID_PUBLIC_KEY', 'parseRsaPublicKey still takes RSA only')
})

t.test('verifyWithKey: each key type with its algorithm', async (t) => {
  const data = Buffer.from('1700000000000POST/v1/clients/{"a":1}')
  const edSig = sign(null, data, ed.privateKey)
  const derSig = p256Sign(data)
  const rawSig = p256Sign(data, 'ieee-p1363')
  const rsaSig = sign('sha256', data, rsa.privateKey)
  const parsedEd = parsePublicKey(spkiPem(ed.publicKey))
  const parsedP256 = parsePublicKey(spkiPem(p256.publicKey))
  t.equal(verifyWithKey(parsedEd.keyObject, 'ed25519', data, edSig), true, 'Ed25519')
  t.equal(verifyWithKey(parsedP256.keyObject, 'p256', data, derSig), true, 'P-256, DER (the default)')
  t.equal(verifyWithKey(parsedP256.keyObject, 'p256', data, rawSig, { encoding: 'ieee-p1363' }), true, 'P-256, raw r||s')
  t.equal(verifyWithKey(parsedP256.keyObject, 'p256', data, rawSig), false, 'P-256: a raw signature where DER is expected')
  t.equal(verifyWithKey(parsedP256.keyObject, 'p256', data, derSig, { encoding: 'ieee-p1363' }), false, 'P-256: DER where raw is expected')
  t.equal(verifyWithKey(rsa.publicKey, 'rsa', data, rsaSig), true, 'RSA PKCS#1 v1.5 SHA-256')
  t.equal(verifyWithKey(parsedEd.keyObject, 'ed25519', [data.subarray(0, 5), data.subarray(5)], edSig), true, 'Ed25519 over parts')
  t.equal(verifyWithKey(parsedP256.keyObject, 'p256', [data.subarray(0, 5), data.subarray(5)], derSig), true, 'P-256 over parts')

  const tampered = Buffer.from(data.toString().replace('"a"', '"b"'))
  t.equal(verifyEd25519(ed.publicKey, tampered, edSig), false, 'Ed25519: tampered data')
  t.equal(verifyP256Sha256(p256.publicKey, tampered, derSig), false, 'P-256: tampered data')
  t.equal(verifyEd25519(ed.publicKey, data, edSig.subarray(0, 63)), false, 'Ed25519: 63 bytes')
  t.equal(verifyEd25519(ed.publicKey, data, Buffer.concat([edSig, Buffer.alloc(1)])), false, 'Ed25519: 65 bytes')
  t.equal(verifyP256Sha256(p256.publicKey, data, Buffer.concat([derSig, Buffer.alloc(1)])), false, 'P-256: DER with a trailing byte')
  t.equal(verifyP256Sha256(p256.publicKey, data, Buffer.alloc(7, 0x30)), false, 'P-256: too short for DER')
  t.equal(verifyP256Sha256(p256.publicKey, data, Buffer.alloc(73, 0x30)), false, 'P-256: too long for DER')
  t.equal(verifyP256Sha256(p256.publicKey, data, rawSig.subarray(0, 63), 'ieee-p1363'), false, 'P-256 raw: 63 bytes')
  const otherEd = generateKeyPairSync('ed25519')
  t.equal(verifyEd25519(otherEd.publicKey, data, edSig), false, 'Ed25519: another key')

  // a body over the one-shot size: P-256 hashes it part by part, Ed25519 joins it
  const big = [Buffer.from('1700000000000POST/v1/clients/'), Buffer.alloc(200_000, 0x61)]
  const whole = Buffer.concat(big)
  t.equal(verifyP256Sha256(p256.publicKey, big, p256Sign(whole)), true, 'P-256: a 200 kB body, streamed')
  t.equal(verifyEd25519(ed.publicKey, big, sign(null, whole, ed.privateKey)), true, 'Ed25519: a 200 kB body')
  t.equal(verifyRsaSha256(rsa.publicKey, big, sign('sha256', whole, rsa.privateKey)), true, 'RSA: a 200 kB body, streamed')
})

t.test('verifyRsaPssSha512: RSASSA-PSS, SHA-512, MGF1 SHA-512, RFC 9421\'s 64-byte salt or any other', async (t) => {
  const data = Buffer.from('"@method": POST')
  const pss = (saltLength: number, key = rsa.privateKey): Buffer => sign('sha512', data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength })
  t.equal(verifyRsaPssSha512(rsa.publicKey, data, pss(64)), true, 'a 64-byte salt verifies')
  t.equal(verifyRsaPssSha512(rsa.publicKey, data, pss(32)), true, 'another salt length too (signers that use the longest salt interoperate)')
  t.equal(verifyRsaPssSha512(rsa.publicKey, Buffer.from('other'), pss(64)), false, 'other data does not')
  t.equal(verifyRsaPssSha512(rsa.publicKey, data, sign('sha512', data, rsa.privateKey)), false, 'PKCS#1 v1.5 does not')
  t.equal(verifyRsaPssSha512(rsa.publicKey, Buffer.from('"@method": GET'), pss(64)), false, 'other data does not')
  t.equal(verifyRsaPssSha512(rsa.publicKey, data, pss(64).subarray(1)), false, 'a short signature does not')
})

t.test('canonicalP256Signature: one identity for (r, s), (r, n - s), DER and raw', async (t) => {
  const data = 'the signing string'
  for (let i = 0; i < 8; i++) {
    const raw = p256Sign(data, 'ieee-p1363')
    const { r, s } = scalarsOf(raw)
    const malleated = derSignature(r, P256_N - s)
    t.equal(verifyP256Sha256(p256.publicKey, Buffer.from(data), malleated), true, 'the malleated signature verifies too (the reason for all this)')
    const canonical = Buffer.from(canonicalP256Signature(derSignature(r, s))).toString('hex')
    t.equal(Buffer.from(canonicalP256Signature(malleated)).toString('hex'), canonical, '(r, n - s) has the same identity')
    t.equal(Buffer.from(canonicalP256Signature(raw, 'ieee-p1363')).toString('hex'), canonical, 'the raw form too')
    t.equal(canonical.length, 128, '64 bytes')
    t.ok(BigInt('0x' + canonical.slice(64)) <= P256_N / 2n, 'low s')
  }
  const junk = Buffer.from('3003020101', 'hex')
  t.equal(canonicalP256Signature(junk), junk, 'unparseable DER is given back as it is')
  const nonMinimal = Buffer.from('3008020200010202 0001'.replace(/ /g, ''), 'hex')
  t.equal(canonicalP256Signature(nonMinimal), nonMinimal, 'non-minimal INTEGERs are not read')
})

t.test('replayIdentity: P-256 by its low-s form; RSA and Ed25519 by the signature text, as before', async (t) => {
  const apiKey = 'a'.repeat(64)
  const { r, s } = scalarsOf(p256Sign('x', 'ieee-p1363'))
  const one = derSignature(r, s).toString('base64')
  const two = derSignature(r, P256_N - s).toString('base64')
  t.equal(replayIdentity(apiKey, 'p256', one), replayIdentity(apiKey, 'p256', two))
  t.not(replayIdentity(apiKey, 'rsa', one), replayIdentity(apiKey, 'rsa', two))
  t.equal(replayIdentity(apiKey, 'rsa', one), createHash('sha256').update(apiKey).update('\n').update(one).digest('hex'), 'RSA: the identity of before')
  t.not(replayIdentity(apiKey, 'p256', one), replayIdentity('b'.repeat(64), 'p256', one), 'per apiKey')
  // RFC 9421's raw r||s: the same identity for (r, s) and (r, n - s), and as the DER of the same signature
  const raw = (r: bigint, s: bigint): string => Buffer.from(r.toString(16).padStart(64, '0') + s.toString(16).padStart(64, '0'), 'hex').toString('base64')
  t.equal(replayIdentity(apiKey, 'p256', raw(r, s)), replayIdentity(apiKey, 'p256', raw(r, P256_N - s)), 'raw r||s: malleated, the same identity')
  t.equal(replayIdentity(apiKey, 'p256', raw(r, s)), replayIdentity(apiKey, 'p256', one), 'raw and DER of one signature: the same identity')
})

t.test('the seed scheme with Ed25519 and P-256 keys: accepted, and refused with advice for the key type', async (t) => {
  const stage = signatureStage()
  const TS = '1700000000000'
  const body = Buffer.from('{"name":"Ada"}')
  const signed = signingString(TS, 'POST', '/v1/clients/', body)
  const run = async (key: KeyObject, signature: string): Promise<void> => {
    const parsed = parsePublicKey(spkiPem(key))
    const state: AuthState = {
      user: 'alice',
      signatureHeaders: { apiKey: parsed.apiKey, timestamp: TS, signature },
      key: { apiKey: parsed.apiKey, owner: 'alice', name: 'k', keyObject: parsed.keyObject, keyType: parsed.keyType }
    }
    await stage.run(describedRequest({ method: 'POST', url: '/v1/clients/', body }), state)
  }
  const joined = Buffer.concat(signed)
  await t.resolves(run(ed.publicKey, sign(null, joined, ed.privateKey).toString('base64')), 'Ed25519')
  await t.resolves(run(p256.publicKey, p256Sign(joined).toString('base64')), 'P-256, DER')

  const edShort = await captureGatewayError(() => run(ed.publicKey, Buffer.alloc(32, 1).toString('base64')))
  t.equal(edShort.code, 'INVALID_SIGNATURE')
  t.equal(edShort.statusCode, 401)
  t.match(edShort.message, /holds 32 bytes, but a signature by the key of X-API-Key \(Ed25519\) holds 64/)
  t.notMatch(edShort.message, /RSA/, 'no RSA in the advice for an Ed25519 key')

  const edWrong = await captureGatewayError(() => run(ed.publicKey, sign(null, Buffer.from('other'), ed.privateKey).toString('base64')))
  t.match(edWrong.message, /does not verify with the key of X-API-Key/)
  t.match(edWrong.extra, { signingStringSha256: String, timestamp: TS })

  // a raw r||s signature (its first byte set apart from 0x30, which a DER one always has)
  const rawSignature = Buffer.concat([Buffer.from([0x31]), p256Sign(joined, 'ieee-p1363').subarray(1)])
  const raw = await captureGatewayError(() => run(p256.publicKey, rawSignature.toString('base64')))
  t.match(raw.message, /holds 64 bytes, but a signature by the key of X-API-Key \(EC P-256\) is DER/)
  t.match(raw.message, /raw r\|\|s form/, 'the raw r||s form is named')
  t.notMatch(raw.message, /RSA/)

  const p256Wrong = await captureGatewayError(() => run(p256.publicKey, p256Sign('other').toString('base64')))
  t.match(p256Wrong.message, /does not verify with the key of X-API-Key/)

  const edForP256 = await captureGatewayError(() => run(p256.publicKey, sign(null, joined, ed.privateKey).toString('base64')))
  t.equal(edForP256.code, 'INVALID_SIGNATURE', 'an Ed25519 signature for a P-256 key')
})

t.test('registration: the proof over name by the key\'s own algorithm; the cached and stored key know their type', async (t) => {
  const store = createMemoryStore()
  t.teardown(() => store.close())
  const registry = createKeyRegistry(store, { cacheSize: 10 })
  t.teardown(() => registry.close())
  const name = 'laptop'

  const edProof = sign(null, Buffer.from(name), ed.privateKey).toString('base64')
  const edRecord = await registry.register({ owner: 'alice', name, publicKey: spkiPem(ed.publicKey), signature: edProof })
  t.equal(edRecord.apiKey, spkiSha256(ed.publicKey))
  const p256Record = await registry.register({ owner: 'alice', name, publicKey: spkiPem(p256.publicKey), signature: p256Sign(name).toString('base64') })
  t.equal(p256Record.apiKey, spkiSha256(p256.publicKey))
  t.equal((await registry.lookup(edRecord.apiKey))?.keyType, 'ed25519', 'cached at registration with its type')
  t.equal((await registry.lookup(p256Record.apiKey))?.keyType, 'p256')

  const fresh = createKeyRegistry(store, { cacheSize: 10 })
  t.teardown(() => fresh.close())
  t.equal((await fresh.lookup(edRecord.apiKey))?.keyType, 'ed25519', 'read from the stored PEM')
  t.equal((await fresh.lookup(p256Record.apiKey))?.keyType, 'p256', 'read from the stored PEM')

  const other = generateKeyPairSync('ed25519')
  const refusals: Array<[string, string, string, RegExp]> = [
    ['Ed25519, proof by another key', spkiPem(other.publicKey), sign(null, Buffer.from(name), ed.privateKey).toString('base64'), /Ed25519 signature/],
    ['Ed25519, proof over other bytes', spkiPem(other.publicKey), sign(null, Buffer.from(name + '\n'), other.privateKey).toString('base64'), /Ed25519 signature/],
    ['P-256, raw r||s proof', spkiPem(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey), p256Sign(name, 'ieee-p1363').toString('base64'),
      /ECDSA P-256 SHA-256 signature in DER/],
    ['P-256, proof by another key', spkiPem(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey), p256Sign(name).toString('base64'), /ECDSA P-256/],
    ['Ed25519, base64url proof', spkiPem(other.publicKey), sign(null, Buffer.from(name), other.privateKey).toString('base64url'), /Ed25519 signature/]
  ]
  for (const [label, publicKey, signature, detail] of refusals) {
    const err = await captureGatewayError(() => registry.register({ owner: 'alice', name, publicKey, signature }))
    t.equal(err.code, 'INVALID_SIGNATURE', label)
    t.equal(err.statusCode, 400, label)
    t.match(err.message, detail, label)
  }
  const duplicate = await captureGatewayError(() => registry.register({
    owner: 'bob', name: 'again', publicKey: spkiPem(ed.publicKey), signature: sign(null, Buffer.from('again'), ed.privateKey).toString('base64')
  }))
  t.equal(duplicate.code, 'DUPLICATE_KEY', 'one Ed25519 key, one registration')
})
