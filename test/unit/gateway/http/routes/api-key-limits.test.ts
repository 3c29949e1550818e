// What a user may register, over HTTP on both stores: RSA keys of 2048, 3072 or 4096 bits with
// the exponent 65537 (a key stored before that rule keeps verifying), and at most
// KEYGATE_MAX_KEYS_PER_USER active keys (403 KEY_LIMIT_REACHED beyond; a revoked or expired key
// frees its place), checked and added in one step: concurrent registrations, at one gateway or at
// two on one Redis prefix, never pass the limit together.
import { createHash, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto'
import t from 'tap'
import { send, type RawResponse } from '../../../../helpers/http.js'
import { rsaKeyPair, signBase64, type TestKeyPair } from '../../../../helpers/keys.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../../helpers/redis.js'
import { STORE_KINDS, addUser, login, registerKey, sendSigned, startStack, startTestGateway } from '../../../../helpers/stack.js'

const b64url = (value: bigint): string => {
  const hex = value.toString(16)
  return Buffer.from(hex.length % 2 === 1 ? `0${hex}` : hex, 'hex').toString('base64url')
}
/** An RSA public key (SPKI PEM) of any modulus and exponent, made from its JWK: no key generation. */
function publicPemOf (n: bigint, e: bigint): string {
  return createPublicKey({ key: { kty: 'RSA', n: b64url(n), e: b64url(e) }, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString()
}
function randomModulus (bits: number): bigint {
  const n = BigInt(`0x${randomBytes(Math.ceil(bits / 8)).toString('hex')}`)
  return (n & ((1n << BigInt(bits)) - 1n)) | (1n << BigInt(bits - 1)) | 1n
}
const modulusOf = (keys: TestKeyPair): bigint => BigInt(`0x${Buffer.from(keys.publicKey.export({ format: 'jwk' }).n ?? '', 'base64url').toString('hex')}`)

async function registerPem (url: string, token: string, publicKey: string, name = 'k'): Promise<RawResponse> {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    // refused before the proof is checked: any signature will do
    body: JSON.stringify({ name, publicKey, signature: 'AAAA' })
  })
}

async function registerExpiring (url: string, token: string, keys: TestKeyPair, name: string, expiresAt: string): Promise<RawResponse> {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name, publicKey: keys.publicPem, signature: signBase64(keys.privateKey, name), expiresAt })
  })
}

const statuses = (answers: RawResponse[]): Record<number, number> => {
  const counts: Record<number, number> = {}
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1
  return counts
}

// made once: 30 key pairs, shared by the tests (each registers them on a store of its own)
const pairs = Array.from({ length: 30 }, () => rsaKeyPair())

for (const kind of STORE_KINDS) {
  t.test(`${kind} store: registration takes 2048, 3072 and 4096 bits with e = 65537, and refuses the rest naming the rule`, async (t) => {
    const gw = await startStack(t, { store: kind })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const refused: Array<[string, string, RegExp]> = [
      ['an 8192-bit key', publicPemOf(randomModulus(8192), 65537n), /RSA key of 8192 bits: keygate accepts 2048, 3072 or 4096 bits/],
      ['a 1024-bit key', publicPemOf(randomModulus(1024), 65537n), /RSA key of 1024 bits: keygate accepts 2048, 3072 or 4096 bits/],
      ['e = 2^32 + 1', publicPemOf(modulusOf(pairs[0] as TestKeyPair), 2n ** 32n + 1n), /public exponent 4294967297: keygate accepts 65537 only/],
      ['e = 3', publicPemOf(modulusOf(pairs[0] as TestKeyPair), 3n), /public exponent 3: keygate accepts 65537 only/]
    ]
    for (const [label, pem, detail] of refused) {
      const res = await registerPem(gw.url, token, pem)
      t.equal(res.status, 400, `${label}: 400`)
      t.equal(res.json().code, 'INVALID_PUBLIC_KEY', `${label}: INVALID_PUBLIC_KEY`)
      t.match(res.json().detail, detail, `${label}: the detail names the rule`)
    }
    for (const bits of [3072, 4096]) {
      const keys = rsaKeyPair(bits)
      t.equal((await registerKey(gw.url, token, keys, `rsa-${bits}`)).status, 201, `a ${bits}-bit key is registered`)
      t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200, `and signs (${bits} bits)`)
    }
    t.same((await send(gw.url, '/v1/api-keys', { headers: { authorization: `Bearer ${token}` } })).json<{ items: unknown[] }>().items.length, 2,
      'nothing refused was stored')
  })

  t.test(`${kind} store: a key stored before the rule (1024 bits, e = 3) keeps verifying`, async (t) => {
    const gw = await startStack(t, { store: kind })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const small = rsaKeyPair(1024)
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 3 })
    const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString()
    const lowExponent: TestKeyPair = {
      privateKey,
      publicKey,
      publicPem,
      pkcs1Pem: publicKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
      apiKey: createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex')
    }
    for (const [label, keys] of [['1024 bits', small], ['2048 bits, e = 3', lowExponent]] as const) {
      // as an earlier keygate stored it: straight into the store
      const stored = { apiKey: keys.apiKey, owner: 'alice', name: label, publicKey: keys.publicPem, createdAt: new Date().toISOString() }
      t.equal(await gw.store.createKey(stored), 'created')
      t.equal((await registerKey(gw.url, token, rsaKeyPair(1024), 'new small key')).status, 400, 'while a new one of that kind is refused')
      const res = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
      t.equal(res.status, 200, `${label}: a signed request with the stored key is served`)
      const headers = { authorization: `Bearer ${token}`, 'x-api-key': keys.apiKey, 'x-api-timestamp': String(Date.now()) }
      const bad = await send(gw.url, '/v1/clients/', { headers: { ...headers, 'x-api-signature': signBase64(keys.privateKey, 'other') } })
      t.equal(bad.json().code, 'INVALID_SIGNATURE', `${label}: and still checked`)
    }
  })

  t.test(`${kind} store: 30 concurrent registrations with the default limit of 20: exactly 20 pass, the rest 403 KEY_LIMIT_REACHED`, async (t) => {
    const gw = await startStack(t, { store: kind })
    t.equal(gw.config.maxKeysPerUser, 20, 'the default')
    await addUser(gw, 'alice')
    await addUser(gw, 'bob')
    const alice = await login(gw.url, 'alice')
    const answers = await Promise.all(pairs.map(async (keys, i) => await registerKey(gw.url, alice, keys, `key-${i}`)))
    t.same(statuses(answers), { 201: 20, 403: 10 })
    const refusal = answers.find((a) => a.status === 403) as RawResponse
    t.match(refusal.headers['content-type'], /^application\/problem\+json/)
    t.match(refusal.json(), { code: 'KEY_LIMIT_REACHED', status: 403, maxKeys: 20, detail: /You have 20 active API keys.*revoke one/ })
    const listed = (await send(gw.url, '/v1/api-keys', { headers: { authorization: `Bearer ${alice}` } })).json<{ items: Array<{ apiKey: string }> }>().items
    t.equal(listed.length, 20, 'exactly 20 stored')
    // a refused key was not stored: another user may register it
    const refusedKey = pairs[answers.findIndex((a) => a.status === 403)] as TestKeyPair
    t.equal((await registerKey(gw.url, await login(gw.url, 'bob'), refusedKey, 'bobs')).status, 201, 'the count is per user')
  })

  t.test(`${kind} store: a revoked or expired key frees its place`, async (t) => {
    const gw = await startStack(t, { store: kind, config: { maxKeysPerUser: 3 } })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const [a, b, c, d, e, f] = pairs.slice(0, 6) as [TestKeyPair, TestKeyPair, TestKeyPair, TestKeyPair, TestKeyPair, TestKeyPair]
    t.equal((await registerKey(gw.url, token, a, 'a')).status, 201)
    t.equal((await registerKey(gw.url, token, b, 'b')).status, 201)
    const expiresAt = new Date(Date.now() + 1500).toISOString()
    t.equal((await registerExpiring(gw.url, token, c, 'c', expiresAt)).status, 201)
    t.equal((await registerKey(gw.url, token, d, 'd')).json().code, 'KEY_LIMIT_REACHED', 'three active keys: the fourth is refused')

    t.equal((await send(gw.url, `/v1/api-keys/${a.apiKey}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status, 204)
    t.equal((await registerKey(gw.url, token, d, 'd')).status, 201, 'revoking one frees a place')
    t.equal((await registerKey(gw.url, token, e, 'e')).status, 403, 'one place only')

    await new Promise((resolve) => setTimeout(resolve, Date.parse(expiresAt) - Date.now() + 100))
    t.equal((await registerKey(gw.url, token, e, 'e')).status, 201, 'a key that expired frees its place')
    t.equal((await registerKey(gw.url, token, f, 'f')).status, 403)
  })
}

t.test('redis: two gateways on one prefix share the count', async (t) => {
  const url = await testRedisUrl()
  const redisPrefix = uniquePrefix('key-limit')
  t.teardown(async () => { await deletePrefix(url, redisPrefix) })
  const a = await startStack(t, { store: 'redis', redisPrefix, config: { maxKeysPerUser: 3 } })
  const b = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: a.upstreamUrl, config: { maxKeysPerUser: 3 } })
  await addUser(a, 'alice')
  const token = await login(a.url, 'alice')
  const answers = await Promise.all(pairs.slice(0, 10).map(async (keys, i) => await registerKey(i % 2 === 0 ? a.url : b.url, token, keys, `key-${i}`)))
  t.same(statuses(answers), { 201: 3, 403: 7 }, 'of 10 concurrent registrations at two gateways with a limit of 3, exactly 3 pass')
  const listed = await send(b.url, '/v1/api-keys', { headers: { authorization: `Bearer ${token}` } })
  t.equal(listed.json<{ items: unknown[] }>().items.length, 3)
})
