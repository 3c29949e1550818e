// One key pair, one apiKey, ever (issue #20, point 3), over HTTP on both stores: a key is compared
// by its value (RFC 7638 thumbprint), not its encoding. The same P-256 key as a compressed point,
// the same RSA key as PKCS#1 or as DER with a long-form length, the same Ed25519 key re-wrapped:
// 409 DUPLICATE_KEY, before and after the first is revoked. Keys stored before fingerprints (no
// index entry) are indexed once, before the first registration; and two apiKeys of one key pair
// that already exist share their replay marks: one signed POST is executed once, not once per apiKey.
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import t from 'tap'
import { keyFingerprint } from '../../../../../gateway/src/keys/public-key.js'
import { send, type RawResponse } from '../../../../helpers/http.js'
import { signedHeaders, type TestKeyPair } from '../../../../helpers/keys.js'
import { startRecorder } from '../../../../helpers/recorder.js'
import { STORE_KINDS, addUser, login, startStack, startTestGateway } from '../../../../helpers/stack.js'
import { calculateJwkThumbprint, type JWK } from 'jose'

const pem = (der: Buffer, label = 'PUBLIC KEY'): string => `-----BEGIN ${label}-----\n${der.toString('base64').match(/.{1,64}/g)?.join('\n') ?? ''}\n-----END ${label}-----\n`
const apiKeyOf = (der: Buffer): string => createHash('sha256').update(der).digest('hex')

/** The proof of possession registration asks: RSA and P-256 sign SHA-256 (P-256 in DER), Ed25519 signs the bytes. */
const proof = (privateKey: KeyObject, name: string): string =>
  sign(privateKey.asymmetricKeyType === 'ed25519' ? null : 'sha256', Buffer.from(name), privateKey).toString('base64')

/** A P-256 public key's SPKI DER with its point compressed (02/03 || X), as `openssl ec -conv_form compressed` writes it. */
function compressedP256 (publicKey: KeyObject): Buffer {
  const der = publicKey.export({ type: 'spki', format: 'der' })
  const point = der.subarray(der.length - 65)
  if (point[0] !== 0x04) throw new Error('not an uncompressed point')
  const x = point.subarray(1, 33)
  const yOdd = ((point[64] ?? 0) & 1) === 1
  // SEQUENCE { AlgorithmIdentifier (id-ecPublicKey, prime256v1), BIT STRING (0 unused bits, 33 bytes) }
  const algorithm = Buffer.from('301306072a8648ce3d020106082a8648ce3d030107', 'hex')
  const bits = Buffer.concat([Buffer.from([0x03, 34, 0x00, yOdd ? 0x03 : 0x02]), x])
  return Buffer.concat([Buffer.from([0x30, algorithm.length + bits.length]), algorithm, bits])
}

/** The same SPKI DER with the outer SEQUENCE's length in a longer form than DER allows (BER), which OpenSSL still reads. */
function longFormLength (der: Buffer): Buffer {
  if (der[0] !== 0x30 || der[1] !== 0x82) throw new Error('expected a two-byte long-form length')
  return Buffer.concat([Buffer.from([0x30, 0x83, 0x00]), der.subarray(2)])
}

async function register (url: string, token: string, publicKey: string, privateKey: KeyObject, name: string): Promise<RawResponse> {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name, publicKey, signature: proof(privateKey, name) })
  })
}

async function revoke (url: string, token: string, apiKey: string): Promise<number> {
  return (await send(url, `/v1/api-keys/${apiKey}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status
}

t.test('the fingerprint is the RFC 7638 JWK thumbprint (as jose computes it), one per key in any encoding', async (t) => {
  for (const type of ['rsa', 'ec', 'ed25519'] as const) {
    const { publicKey } = type === 'rsa'
      ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519')
    t.equal(keyFingerprint(publicKey), await calculateJwkThumbprint(publicKey.export({ format: 'jwk' }) as JWK, 'sha256'), type)
  }
})

for (const kind of STORE_KINDS) {
  t.test(`${kind} store: the same key in another encoding is 409 DUPLICATE_KEY, before and after revocation`, async (t) => {
    const gw = await startStack(t, { store: kind })
    await addUser(gw, 'alice')
    await addUser(gw, 'bob')
    const alice = await login(gw.url, 'alice')
    const bob = await login(gw.url, 'bob')

    const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const uncompressed = p256.publicKey.export({ type: 'spki', format: 'der' })
    const compressed = compressedP256(p256.publicKey)
    t.not(apiKeyOf(compressed), apiKeyOf(uncompressed), 'two encodings, two SPKI hashes')
    const first = await register(gw.url, alice, pem(uncompressed), p256.privateKey, 'p256')
    t.equal(first.status, 201)
    const again = await register(gw.url, bob, pem(compressed), p256.privateKey, 'p256 compressed')
    t.equal(again.status, 409, 'P-256 compressed after uncompressed: 409')
    t.equal(again.json().code, 'DUPLICATE_KEY')
    t.equal(await revoke(gw.url, alice, first.json<{ apiKey: string }>().apiKey), 204)
    t.equal((await register(gw.url, bob, pem(compressed), p256.privateKey, 'after revocation')).json().code, 'DUPLICATE_KEY',
      'and after the first was revoked')
    t.equal((await register(gw.url, alice, pem(uncompressed), p256.privateKey, 'itself')).json().code, 'DUPLICATE_KEY', 'the revoked key itself too')

    // compressed first: the uncompressed form is the duplicate
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const compressedFirst = await register(gw.url, alice, pem(compressedP256(other.publicKey)), other.privateKey, 'compressed first')
    t.equal(compressedFirst.status, 201)
    t.equal(compressedFirst.json<{ apiKey: string }>().apiKey, apiKeyOf(compressedP256(other.publicKey)), 'its apiKey is the hash of the SPKI as sent')
    t.equal((await register(gw.url, bob, pem(other.publicKey.export({ type: 'spki', format: 'der' })), other.privateKey, 'u')).json().code,
      'DUPLICATE_KEY', 'P-256 uncompressed after compressed: 409')

    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 })
    const rsaDer = rsa.publicKey.export({ type: 'spki', format: 'der' })
    const registered = await register(gw.url, alice, pem(rsaDer), rsa.privateKey, 'rsa')
    t.equal(registered.status, 201)
    t.equal(await revoke(gw.url, alice, registered.json<{ apiKey: string }>().apiKey), 204)
    for (const [label, text] of [
      ['PKCS#1 RSA PUBLIC KEY', rsa.publicKey.export({ type: 'pkcs1', format: 'pem' }).toString()],
      ['SPKI DER with a long-form length', pem(longFormLength(rsaDer))]
    ] as const) {
      const res = await register(gw.url, bob, text, rsa.privateKey, 'rsa again')
      t.equal(res.status, 409, `RSA as ${label}, after revocation: 409`)
      t.equal(res.json().code, 'DUPLICATE_KEY')
    }

    const ed = generateKeyPairSync('ed25519')
    const edDer = ed.publicKey.export({ type: 'spki', format: 'der' })
    const edFirst = await register(gw.url, alice, pem(edDer), ed.privateKey, 'ed')
    t.equal(edFirst.status, 201)
    t.equal(await revoke(gw.url, alice, edFirst.json<{ apiKey: string }>().apiKey), 204)
    const crlf = pem(edDer).replace(/\n/g, '\r\n')
    t.equal((await register(gw.url, bob, crlf, ed.privateKey, 'ed again')).json().code, 'DUPLICATE_KEY', 'Ed25519 re-wrapped, after revocation: 409')

    const listed = (await send(gw.url, '/v1/api-keys', { headers: { authorization: `Bearer ${bob}` } })).json<{ items: unknown[] }>().items
    t.equal(listed.length, 0, 'nothing refused was stored')
  })

  t.test(`${kind} store: keys stored before fingerprints are indexed before the first registration; two apiKeys of one key pair execute a signed POST once`,
    async (t) => {
      const recorder = await startRecorder(t)
      const gw = await startTestGateway(t, { store: kind, upstreamUrl: recorder.url })
      await addUser(gw, 'alice')
      const token = await login(gw.url, 'alice')
      const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      const uncompressed = p256.publicKey.export({ type: 'spki', format: 'der' })
      const compressed = compressedP256(p256.publicKey)
      // as a keygate without fingerprints stored them: one key pair registered twice, straight into the store
      const createdAt = new Date().toISOString()
      for (const der of [uncompressed, compressed]) {
        t.equal(await gw.store.createKey({ apiKey: apiKeyOf(der), owner: 'alice', name: 'old', publicKey: pem(der), createdAt }), 'created')
      }
      const pair = (der: Buffer): TestKeyPair =>
        ({ privateKey: p256.privateKey, publicKey: p256.publicKey, publicPem: pem(der), pkcs1Pem: '', apiKey: apiKeyOf(der) })
      const body = '{"name":"Ada","email":"ada@example.com","tax_id":"123"}'
      const signed = signedHeaders({ keys: pair(uncompressed), token, method: 'POST', target: '/v1/clients/', body })
      const post = async (apiKey: string): Promise<RawResponse> => await send(gw.url, '/v1/clients/', {
        method: 'POST', headers: { 'content-type': 'application/json', ...signed, 'x-api-key': apiKey }, body
      })
      t.equal((await post(apiKeyOf(uncompressed))).status, 200, 'the signed POST under the first apiKey is forwarded')
      // the same signature: the seed's signing string names no key, so it verifies under the other apiKey too
      const replayed = await post(apiKeyOf(compressed))
      t.equal(replayed.status, 401, 'the same signed POST under the second apiKey of the key pair')
      t.equal(replayed.json().code, 'REPLAYED_REQUEST')
      t.equal(recorder.requests.length, 1, 'the upstream executed it once')

      // a third encoding-equivalent registration of the key pair is refused: the backfill indexed both
      const third = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      t.equal((await register(gw.url, token, pem(third.publicKey.export({ type: 'spki', format: 'der' })), third.privateKey, 'new')).status, 201,
        'a new key registers (after the one-time backfill)')
      for (const der of [uncompressed, compressed]) {
        t.equal((await register(gw.url, token, pem(der), p256.privateKey, 'again')).json().code, 'DUPLICATE_KEY', 'an older key is a duplicate')
      }
      t.equal((await gw.store.getKey(apiKeyOf(compressed)))?.fingerprint, keyFingerprint(p256.publicKey), 'the older records hold their fingerprint')
    })
}
