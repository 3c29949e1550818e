// The token service's key ring on its own (no HTTP): how gateways on one store learn of a rotation
// (periodic re-read, re-read on an unknown kid, rate-limited), the retirement policy, key files,
// and a store that does not answer.
import { generateKeyPairSync, randomUUID } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SignJWT, decodeProtectedHeader } from 'jose'
import t from 'tap'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createRedisStore } from '../../../../gateway/src/store/redis.js'
import type { Store } from '../../../../gateway/src/store/types.js'
import { DEFAULT_RETIRE_MARGIN_MS } from '../../../../gateway/src/tokens/signing-key-ring.js'
import { createTokenService, type TokenServiceOptions, type TokenSettings } from '../../../../gateway/src/tokens/token-service.js'
import { countingStore } from '../../../helpers/auth-fixtures.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'

const settings: TokenSettings = { issuer: 'ring-test', audience: 'ring-test', ttlSeconds: 900, keyFile: undefined }
const kidOf = (token: string): string => String(decodeProtectedHeader(token).kid)

async function redisStore (t: { teardown: (fn: () => unknown) => void }, prefix: string): Promise<Store> {
  const url = await testRedisUrl()
  const store = await createRedisStore({ url, prefix, commandTimeoutMs: 500 })
  t.teardown(async () => {
    await store.close()
    await deletePrefix(url, prefix)
  })
  return store
}

async function service (t: { teardown: (fn: () => unknown) => void }, store: Store, options: TokenServiceOptions = {}, overrides: Partial<TokenSettings> = {}) {
  const tokens = await createTokenService({ ...settings, ...overrides }, store, options)
  t.teardown(() => { tokens.close() })
  return tokens
}

async function code (answer: unknown): Promise<string> {
  try {
    await answer
    return 'accepted'
  } catch (err) {
    return (err as { code?: string }).code ?? String(err)
  }
}

t.test('a gateway picks up a rotation by its periodic re-read and stops re-reading once closed', async (t) => {
  const prefix = uniquePrefix('ring')
  const one = await service(t, await redisStore(t, prefix))
  const counted = countingStore(await redisStore(t, prefix))
  const two = await service(t, counted.store, { refreshIntervalMs: 100 })
  t.equal(two.currentKid, one.currentKid, 'both start on the shared key')

  const { kid } = await one.rotate()
  const deadline = Date.now() + 2000
  while (two.currentKid !== kid && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(two.currentKid, kid, 'the other gateway signs with the new key without seeing a token of it')
  t.equal(kidOf((await two.issue('alice')).token), kid)
  t.same(two.jwks.keys.map((k) => k.kid), one.jwks.keys.map((k) => k.kid), 'and publishes the same ring')

  two.close()
  two.close()
  const reads = counted.calls.getSigningKeyRing
  await new Promise((resolve) => setTimeout(resolve, 350))
  t.equal(counted.calls.getSigningKeyRing, reads, 'no re-read after close()')
})

t.test('an unknown kid: one re-read per second at most, and a token of a rotation made just after a re-read still passes', async (t) => {
  const prefix = uniquePrefix('ring')
  const one = await service(t, await redisStore(t, prefix))
  const counted = countingStore(await redisStore(t, prefix))
  const two = await service(t, counted.store)
  const readsAtStart = counted.calls.getSigningKeyRing ?? 0

  // A flood of tokens with made-up kids: all refused, the store read once or twice, not 100 times.
  const stranger = generateKeyPairSync('ed25519').privateKey
  const forged = async (): Promise<string> => await new SignJWT({ sub: 'alice', jti: randomUUID() })
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: randomUUID() })
    .setIssuer(settings.issuer).setAudience(settings.audience).setIssuedAt().setExpirationTime('10m')
    .sign(stranger)
  const started = Date.now()
  const results = await Promise.all(Array.from({ length: 100 }, async () => await code(two.verify(await forged()))))
  t.same(new Set(results), new Set(['INVALID_TOKEN']), '100 unknown kids: 100 refused')
  const reads = (counted.calls.getSigningKeyRing ?? 0) - readsAtStart
  t.ok(reads >= 1 && reads <= 1 + Math.ceil((Date.now() - started) / 1000), `${reads} re-read(s) in ${Date.now() - started} ms`)

  // The rate limit holds right after a re-read; a rotation made then is still seen: the token
  // waits for the next allowed re-read instead of being refused.
  await two.refresh()
  const { kid } = await one.rotate()
  const fresh = (await one.issue('alice')).token
  t.equal(kidOf(fresh), kid)
  const before = Date.now()
  t.equal(await two.verify(fresh), 'alice', 'a token of the new key is accepted')
  t.ok(Date.now() - before <= 1500, `after ${Date.now() - before} ms`)
  t.equal(two.currentKid, kid, 'and the gateway now signs with the new key')
})

t.test('retirement: the default is the longest token lifetime signed plus a margin; a retired key verifies nothing', async (t) => {
  const store = createMemoryStore()
  t.teardown(async () => { await store.close() })
  const tokens = await service(t, store)
  const first = tokens.currentKid
  const oldToken = (await tokens.issue('alice')).token

  let before = Date.now()
  const r1 = await tokens.rotate()
  t.equal(r1.replaced?.kid, first)
  const expected1 = settings.ttlSeconds * 1000 + DEFAULT_RETIRE_MARGIN_MS
  t.ok((r1.replaced?.retiresAt ?? 0) >= before + expected1 && (r1.replaced?.retiresAt ?? 0) <= Date.now() + expected1, 'bearer TTL + margin')
  t.equal(await tokens.verify(oldToken), 'alice', 'a token of the replaced key still verifies')
  t.same(tokens.jwks.keys.map((k) => k.kid), [r1.kid, first], 'the JWKS lists the current key first, then the previous one')

  // An identity token that lives longer than a bearer token extends the next retirement.
  await tokens.issueIdentity({ subject: 'alice', audience: 'svc', apiKey: undefined, ttlSeconds: 3000 })
  before = Date.now()
  const r2 = await tokens.rotate()
  t.ok((r2.replaced?.retiresAt ?? 0) >= before + 3000 * 1000 + DEFAULT_RETIRE_MARGIN_MS, 'the longest identity-token TTL + margin')
  const r3 = await tokens.rotate({ marginMs: 5000 })
  t.ok((r3.replaced?.retiresAt ?? 0) <= Date.now() + 3000 * 1000 + 5000, 'a margin of one\'s own')

  // Retire quickly: the key leaves the JWKS and its tokens, even cached ones, are refused.
  const short = (await tokens.issue('bob')).token
  t.equal(await tokens.verify(short), 'bob', 'verified (and cached)')
  const r4 = await tokens.rotate({ retireAfterMs: 150 })
  t.equal(await tokens.verify(short), 'bob', 'still verifies before it retires')
  t.ok(tokens.jwks.keys.some((k) => k.kid === r4.replaced?.kid))
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.notOk(tokens.jwks.keys.some((k) => k.kid === r4.replaced?.kid), 'the retired key left the JWKS')
  t.equal(await code(tokens.verify(short)), 'INVALID_TOKEN', 'its cached token is refused')
  t.equal(await code(tokens.verify(oldToken)), 'accepted', 'a key not yet retired still verifies')
})

t.test('a key file is a ring of one key that rotate() does not touch', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'keygate-ring-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  const keyFile = join(dir, 'key.pem')
  await writeFile(keyFile, generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }))
  const counted = countingStore()
  const tokens = await service(t, counted.store, { refreshIntervalMs: 20 }, { keyFile })
  t.equal(tokens.algorithm, 'ES256')
  t.equal(tokens.jwks.keys.length, 1)
  await t.rejects(tokens.rotate(), /KEYGATE_JWT_KEY_FILE/)
  await tokens.refresh()
  await new Promise((resolve) => setTimeout(resolve, 80))
  t.equal(counted.calls.getSigningKeyRing, 0, 'the store\'s ring is never read')
  t.equal(counted.calls.rotateSigningKey, 0)
  t.equal(await tokens.verify((await tokens.issue('alice')).token), 'alice')

  await writeFile(join(dir, 'rsa.pem'), generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }))
  await t.rejects(createTokenService({ ...settings, keyFile: join(dir, 'rsa.pem') }, counted.store), /Ed25519 or P-256/)
  await t.rejects(createTokenService({ ...settings, keyFile: join(dir, 'missing.pem') }, counted.store), /KEYGATE_JWT_KEY_FILE: cannot read/)
})

t.test('a store that stops answering: the ring in hand keeps working, unknown kids are refused', async (t) => {
  const inner = createMemoryStore()
  t.teardown(async () => { await inner.close() })
  let down = false
  const store: Store = {
    ...inner,
    getSigningKeyRing: async () => {
      if (down) throw Object.assign(new Error('down'), { code: 'STORE_UNAVAILABLE' })
      return await inner.getSigningKeyRing()
    }
  }
  const tokens = await service(t, store, { unknownKidRefreshMs: 0, refreshIntervalMs: 20 })
  const token = (await tokens.issue('alice')).token
  down = true
  await new Promise((resolve) => setTimeout(resolve, 60))
  t.equal(await tokens.verify(token), 'alice', 'a known key still verifies')
  const [header, payload, signature] = token.split('.') as [string, string, string]
  const renamed = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(header, 'base64url').toString()), kid: 'no-such-key' })).toString('base64url')
  t.equal(await code(tokens.verify(`${renamed}.${payload}.${signature}`)), 'INVALID_TOKEN', 'an unknown kid is INVALID_TOKEN')
  t.equal(kidOf((await tokens.issue('bob')).token), tokens.currentKid, 'and tokens are still issued')
})
