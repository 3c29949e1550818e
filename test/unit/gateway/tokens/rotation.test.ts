// Signing-key rotation with zero errors: two gateways on one Redis, continuous signed traffic with
// tokens of the old and of the new key at both while one of them rotates, then the old key retires
// and leaves the JWKS, and whatever it signed is refused from then on.
import { createPrivateKey, randomUUID } from 'node:crypto'
import { SignJWT, decodeJwt, decodeProtectedHeader } from 'jose'
import t from 'tap'
import { send } from '../../../helpers/http.js'
import { rsaKeyPair } from '../../../helpers/keys.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, startUpstreamStub, testConfig, type GatewayHandle } from '../../../helpers/stack.js'

// Short enough that the old key retires within seconds (TTL + margin). The traffic phase stops
// 2 s before the tokens issued just before the rotation expire, or at REQUESTS: on a loaded machine
// 500 signed requests can take longer than the TTL, and an expired token is no rotation error.
const TTL_SECONDS = 10
const RETIRE_MARGIN_MS = 1000
const REQUESTS = 500
/** the traffic phase must still cover the rotation with this many requests */
const MIN_REQUESTS = 100
const CONCURRENCY = 10

const kidOf = (token: string): string => String(decodeProtectedHeader(token).kid)

async function jwksKids (url: string): Promise<string[]> {
  const res = await send(url, '/.well-known/jwks.json')
  if (res.status !== 200) throw new Error(`JWKS: ${res.status}`)
  return res.json<{ keys: Array<{ kid: string }> }>().keys.map((k) => k.kid)
}

/** Polls `check` every 50 ms until it holds, for at most `withinMs`. */
async function until (withinMs: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + withinMs
  for (;;) {
    if (await check()) return true
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

t.test('signing-key rotation across two gateways on one Redis', async (t) => {
  const redisPrefix = uniquePrefix('rotation')
  const redisUrl = await testRedisUrl()
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const upstreamUrl = await startUpstreamStub(t)
  // only the jwt settings: the rest (Redis URL and prefix) is startTestGateway's
  const config = { jwt: { ...testConfig().jwt, ttlSeconds: TTL_SECONDS } }
  const start = async (): Promise<GatewayHandle> => await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl, config })
  const a = await start()
  const b = await start()
  t.teardown(() => { a.app.keygate.tokens.close(); b.app.keygate.tokens.close() })

  await addUser(a, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(a.url, await login(a.url, 'alice'), keys)).status, 201)
  const [oldKid] = await jwksKids(a.url)
  t.same(await jwksKids(b.url), [oldKid], 'before: both publish the one shared key')

  // Tokens of the old key, from either gateway, issued just before the rotation.
  const oldFromA = await login(a.url, 'alice')
  const oldFromB = await login(b.url, 'alice')
  t.equal(kidOf(oldFromA), oldKid)
  t.equal(kidOf(oldFromB), oldKid)

  // Continuous traffic: every token in the pool, at both gateways, until REQUESTS were sent.
  const pool = [oldFromA, oldFromB]
  const failures: string[] = []
  let sent = 0
  const stopAt = Math.min(...[oldFromA, oldFromB].map((token) => (decodeJwt(token).exp ?? 0) * 1000)) - 2000
  const worker = async (n: number): Promise<void> => {
    while (sent < REQUESTS && Date.now() < stopAt) {
      const i = sent++
      const url = (i + n) % 2 === 0 ? a.url : b.url
      const token = pool[i % pool.length] as string
      const res = await sendSigned(url, { keys, token, method: 'GET', target: '/v1/clients/' })
      if (res.status !== 200) failures.push(`request ${i} at ${url === a.url ? 'A' : 'B'} with kid ${kidOf(token).slice(0, 8)}: ${res.status} ${res.text}`)
    }
  }
  const traffic = Promise.all(Array.from({ length: CONCURRENCY }, async (_, n) => await worker(n)))

  await new Promise((resolve) => setTimeout(resolve, 100))
  const rotation = await a.app.keygate.tokens.rotate({ marginMs: RETIRE_MARGIN_MS })
  const rotatedAt = Date.now()
  t.not(rotation.kid, oldKid, 'rotate() answers the new kid')
  t.equal(rotation.replaced?.kid, oldKid, 'and the key it replaced')
  const retiresAt = rotation.replaced?.retiresAt ?? 0
  t.ok(retiresAt >= rotatedAt - 1000 + TTL_SECONDS * 1000 + RETIRE_MARGIN_MS && retiresAt <= rotatedAt + TTL_SECONDS * 1000 + RETIRE_MARGIN_MS,
    'the old key retires after the token TTL plus the margin')
  t.equal(a.app.keygate.tokens.currentKid, rotation.kid, 'A signs with the new key at once')

  // A token of the new key from A works at B: B does not know the kid yet, re-reads the ring.
  const newFromA = await login(a.url, 'alice')
  t.equal(kidOf(newFromA), rotation.kid)
  pool.push(newFromA)
  const atB = await sendSigned(b.url, { keys, token: newFromA, method: 'GET', target: '/v1/clients/' })
  t.equal(atB.status, 200, "A's new token is accepted at B")
  // ... and from then on B signs with the new key too, and its tokens work at A.
  const newFromB = await login(b.url, 'alice')
  t.equal(kidOf(newFromB), rotation.kid, 'B signs with the new key after seeing it')
  pool.push(newFromB)
  t.equal((await sendSigned(a.url, { keys, token: newFromB, method: 'GET', target: '/v1/clients/' })).status, 200, "B's new token is accepted at A")
  // Token issuance in the traffic, without a password hash per token.
  for (const gw of [a, b]) for (let i = 0; i < 5; i++) pool.push((await gw.app.keygate.tokens.issue('alice')).token)

  await traffic
  t.same(failures, [], `${sent} requests during the rotation: 0 errors`)
  t.ok(sent >= MIN_REQUESTS, `at least ${MIN_REQUESTS} requests around the rotation (${sent})`)

  t.same(await jwksKids(a.url), [rotation.kid, oldKid], 'A publishes both keys, the new one first')
  t.same(await jwksKids(b.url), [rotation.kid, oldKid], 'B publishes both keys, the new one first')
  for (const token of [oldFromA, oldFromB]) {
    for (const gw of [a, b]) {
      t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200, 'an old token still works after the rotation')
    }
  }

  // A gateway started after the rotation knows the old key too.
  const c = await start()
  t.teardown(() => { c.app.keygate.tokens.close() })
  t.same(await jwksKids(c.url), [rotation.kid, oldKid], 'a gateway started later publishes both keys')
  t.equal((await sendSigned(c.url, { keys, token: oldFromB, method: 'GET', target: '/v1/clients/' })).status, 200, 'and accepts an old token')
  t.equal(kidOf((await c.app.keygate.tokens.issue('alice')).token), rotation.kid, 'and signs with the new key')

  // A token signed with the old key that would outlive its retirement (the ring's PEM, taken
  // from Redis): accepted (and cached) now, refused once the old key retires.
  const ring = await a.store.getSigningKeyRing()
  const oldPem = ring?.previous.find((p) => p.retiresAt === retiresAt)?.pem
  if (oldPem === undefined) throw new Error('the old key is not in the ring')
  const now = Math.floor(Date.now() / 1000)
  const longLived = await new SignJWT({})
    .setProtectedHeader({ alg: 'EdDSA', kid: oldKid as string, typ: 'JWT' })
    .setIssuer(config.jwt.issuer).setAudience(config.jwt.audience).setSubject('alice')
    .setIssuedAt(now).setExpirationTime(now + 3600).setJti(randomUUID())
    .sign(createPrivateKey(oldPem))
  for (const gw of [a, b, c]) {
    t.equal(
      (await sendSigned(gw.url, { keys, token: longLived, method: 'GET', target: '/v1/clients/' })).status,
      200,
      'a long-lived old-key token works before retirement'
    )
  }

  // Retirement: the old key leaves every JWKS at retiresAt, without any re-read.
  const gone = await until(retiresAt - Date.now() + 2000, async () => {
    const lists = await Promise.all([a, b, c].map(async (gw) => await jwksKids(gw.url)))
    return lists.every((kids) => kids.length === 1 && kids[0] === rotation.kid)
  })
  t.ok(gone, 'the old key leaves the JWKS of every gateway')
  t.ok(Date.now() >= retiresAt, 'not before it retires')
  for (const gw of [a, b, c]) {
    for (const token of [longLived, oldFromA, oldFromB]) {
      const res = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
      t.equal(res.status, 401, 'an old-key token is refused after retirement')
      t.equal(res.json().code, 'INVALID_TOKEN')
      t.match(res.headers['content-type'], /^application\/problem\+json/)
    }
  }
  // The new key's tokens live on: fresh ones from both gateways.
  for (const gw of [a, b]) {
    const fresh = await login(gw.url, 'alice')
    t.equal(kidOf(fresh), rotation.kid)
    for (const other of [a, b]) {
      t.equal((await sendSigned(other.url, { keys, token: fresh, method: 'GET', target: '/v1/clients/' })).status, 200, 'new tokens keep working')
    }
  }
})
