// The login guard on its own: store keys, address buckets, limits, and the counting over both real
// stores. The password check is a stand-in here (the HTTP tests, test/unit/gateway/users/login-*.test.ts,
// run the real one): it answers at once, so the counting can be exercised at volume.
import t, { type Test } from 'tap'
import { GatewayError } from '../../../../gateway/src/errors.js'
import type { Store } from '../../../../gateway/src/store/index.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createRedisStore } from '../../../../gateway/src/store/redis.js'
import {
  DEFAULT_LOGIN_CONCURRENCY, DEFAULT_LOGIN_MAX_FAILURES_PER_ADDRESS, DEFAULT_LOGIN_MAX_FAILURES_PER_USER, DEFAULT_LOGIN_QUEUE,
  DEFAULT_LOGIN_WINDOW_SECONDS, createLoginGuard, loginKeys, loginLimits
} from '../../../../gateway/src/users/login-guard.js'
import { addressBucket } from '../../../../gateway/src/lib/client-address.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { STORE_KINDS, type StoreKind } from '../../../helpers/stack.js'

t.test('defaults: 10 per username, 100 per address, 15 minutes, 2 at once, 32 waiting', async (t) => {
  t.same(loginLimits(), {
    maxFailuresPerUser: DEFAULT_LOGIN_MAX_FAILURES_PER_USER,
    maxFailuresPerAddress: DEFAULT_LOGIN_MAX_FAILURES_PER_ADDRESS,
    windowSeconds: DEFAULT_LOGIN_WINDOW_SECONDS,
    concurrency: DEFAULT_LOGIN_CONCURRENCY,
    queue: DEFAULT_LOGIN_QUEUE
  })
  t.same(
    [DEFAULT_LOGIN_MAX_FAILURES_PER_USER, DEFAULT_LOGIN_MAX_FAILURES_PER_ADDRESS, DEFAULT_LOGIN_WINDOW_SECONDS, DEFAULT_LOGIN_CONCURRENCY, DEFAULT_LOGIN_QUEUE],
    [10, 100, 900, 2, 32]
  )
  t.equal(loginLimits({ queue: 0 }).queue, 0, 'no queue at all is allowed')
  for (const bad of [
    { maxFailuresPerUser: 0 }, { maxFailuresPerAddress: -1 }, { windowSeconds: 0.5 }, { concurrency: 0 }, { queue: -1 }, { concurrency: Number.NaN }
  ]) {
    t.throws(() => loginLimits(bad), RangeError, JSON.stringify(bad))
  }
})

t.test('store keys: usernames hashed and bounded, apart from addresses', async (t) => {
  const long = 'a'.repeat(256)
  t.ok(loginKeys.user(long).length < 64, 'a 256-character username makes a short key')
  t.notOk(loginKeys.user(long).includes('aaaa'), 'the username is not in the key')
  t.equal(loginKeys.user('alice'), loginKeys.user('alice'))
  t.not(loginKeys.user('alice'), loginKeys.user('Alice'), 'usernames are case-sensitive, so are their counts')
  t.not(loginKeys.user('alice'), loginKeys.user('alice '))
  // A username that spells an address's key never lands on it.
  const bucket = addressBucket('10.0.0.1')
  const addressKeys = [loginKeys.addressAttempts(bucket, 1), loginKeys.addressChecks(bucket, 1)]
  for (const name of ['10.0.0.1', 'addr:10.0.0.1', 'addr:10.0.0.1:1', 'login:addr:10.0.0.1:1']) {
    t.notOk(addressKeys.includes(loginKeys.user(name)), `username ${name}`)
  }
  t.ok(loginKeys.user('x').startsWith('login:user:'))
  t.ok(addressKeys.every((k) => k.startsWith('login:addr')))
})

t.test('address buckets: IPv4 as is, IPv4-mapped as IPv4, IPv6 by /64', async (t) => {
  t.equal(addressBucket('203.0.113.7'), '203.0.113.7')
  t.equal(addressBucket('::ffff:203.0.113.7'), '203.0.113.7')
  t.equal(addressBucket('::FFFF:cb00:7107'), '203.0.113.7', 'mapped, in hex')
  t.equal(addressBucket('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64')
  t.equal(addressBucket('2001:db8:1:2::99'), '2001:db8:1:2::/64', 'the same /64, another host')
  t.equal(addressBucket('2001:0db8:0001:0002:ffff::1%eth0'), '2001:db8:1:2::/64', 'leading zeros and a zone')
  t.not(addressBucket('2001:db8:1:3::1'), addressBucket('2001:db8:1:2::1'), 'another /64')
  t.equal(addressBucket('::1'), '0:0:0:0::/64')
  t.equal(addressBucket('2001:db8::'), '2001:db8:0:0::/64')
  t.equal(addressBucket('64:ff9b::192.0.2.33'), '64:ff9b:0:0::/64', 'embedded IPv4')
  const odd = addressBucket('not an address')
  t.ok(odd.startsWith('other:') && !odd.includes(' '), 'anything else: hashed')
})

async function storeOf (t: Test, kind: StoreKind): Promise<Store> {
  if (kind === 'memory') return createMemoryStore()
  const url = await testRedisUrl()
  const prefix = uniquePrefix('login-guard')
  const store = await createRedisStore({ url, prefix, commandTimeoutMs: 2000 })
  t.teardown(async () => {
    await store.close()
    await deletePrefix(url, prefix)
  })
  return store
}

/** A stand-in password check: `alice` / `right`, anything else INVALID_CREDENTIALS; counts calls. */
function fakeUsers (delayMs = 0): { authenticate: (u: string, p: string) => Promise<string>; calls: number } {
  const users = {
    calls: 0,
    async authenticate (username: string, password: string): Promise<string> {
      users.calls++
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs))
      if (username === 'alice' && password === 'right') return username
      throw new GatewayError('INVALID_CREDENTIALS', 'wrong')
    }
  }
  return users
}

async function codeOf (promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'OK'
  } catch (err) {
    return err instanceof GatewayError ? err.code : `not a GatewayError: ${String(err)}`
  }
}

for (const kind of STORE_KINDS) {
  t.test(`${kind}: concurrent attempts at the limit: exactly the limit reach the password check`, async (t) => {
    const users = fakeUsers(20)
    const guard = createLoginGuard(await storeOf(t, kind), users, { maxFailuresPerUser: 3, concurrency: 50, queue: 0 })
    const codes = await Promise.all(Array.from({ length: 20 }, async () => await codeOf(guard.login('alice', 'wrong', '10.0.0.1'))))
    t.equal(users.calls, 3)
    t.equal(codes.filter((c) => c === 'INVALID_CREDENTIALS').length, 3)
    t.equal(codes.filter((c) => c === 'RATE_LIMITED').length, 17)
  })

  t.test(`${kind}: many successes from one address are not failures`, async (t) => {
    const users = fakeUsers()
    const guard = createLoginGuard(await storeOf(t, kind), users, { maxFailuresPerAddress: 3 })
    for (let i = 0; i < 30; i++) t.equal(await codeOf(guard.login('alice', 'right', '10.0.0.1')), 'OK', `success ${i + 1}`)
    for (let i = 0; i < 3; i++) t.equal(await codeOf(guard.login(`user-${i}`, 'wrong', '10.0.0.1')), 'INVALID_CREDENTIALS', `failure ${i + 1}`)
    t.equal(await codeOf(guard.login('alice', 'right', '10.0.0.1')), 'RATE_LIMITED', 'the fourth failure would be over the limit')
    t.equal(await codeOf(guard.login('alice', 'right', '10.0.0.2')), 'OK', 'another address')
    t.equal(await codeOf(guard.login('alice', 'right', '2001:db8:1:2::1')), 'OK', 'an IPv6 address')
  })

  t.test(`${kind}: an IPv6 client cannot escape the address limit by changing addresses in its /64`, async (t) => {
    const users = fakeUsers()
    const guard = createLoginGuard(await storeOf(t, kind), users, { maxFailuresPerAddress: 2 })
    t.equal(await codeOf(guard.login('u1', 'wrong', '2001:db8:1:2::1')), 'INVALID_CREDENTIALS')
    t.equal(await codeOf(guard.login('u2', 'wrong', '2001:db8:1:2::2')), 'INVALID_CREDENTIALS')
    t.equal(await codeOf(guard.login('u3', 'wrong', '2001:db8:1:2:aaaa::3')), 'RATE_LIMITED')
    t.equal(await codeOf(guard.login('u3', 'wrong', '2001:db8:1:3::1')), 'INVALID_CREDENTIALS', 'another /64 is another address')
  })

  t.test(`${kind}: refused at the address, an attempt does not count against the username`, async (t) => {
    const users = fakeUsers()
    const guard = createLoginGuard(await storeOf(t, kind), users, { maxFailuresPerAddress: 1, maxFailuresPerUser: 2 })
    t.equal(await codeOf(guard.login('mallory', 'wrong', '10.6.6.6')), 'INVALID_CREDENTIALS')
    for (let i = 0; i < 5; i++) t.equal(await codeOf(guard.login('alice', 'guess', '10.6.6.6')), 'RATE_LIMITED')
    t.equal(await codeOf(guard.login('alice', 'right', '10.0.0.1')), 'OK', 'alice, from elsewhere, is not locked out')
  })
}

t.test('the window ends: counting starts again (1-second window)', async (t) => {
  const users = fakeUsers()
  const store = createMemoryStore()
  const guard = createLoginGuard(store, users, { maxFailuresPerUser: 1, maxFailuresPerAddress: 1, windowSeconds: 1 })
  t.equal(await codeOf(guard.login('alice', 'wrong', '10.0.0.1')), 'INVALID_CREDENTIALS')
  t.equal(await codeOf(guard.login('alice', 'right', '10.0.0.1')), 'RATE_LIMITED')
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal(await codeOf(guard.login('alice', 'right', '10.0.0.1')), 'OK')
  await store.close()
})

t.test('queue full: RATE_LIMITED with Retry-After 1, before any store access', async (t) => {
  const users = fakeUsers(100)
  let hits = 0
  const inner = createMemoryStore()
  const store: Store = { ...inner, hit: async (key, windowMs) => { hits++; return await inner.hit(key, windowMs) } }
  const guard = createLoginGuard(store, users, { concurrency: 1, queue: 1 })
  const running = [guard.login('alice', 'right', '10.0.0.1'), guard.login('alice', 'right', '10.0.0.1')]
  const hitsBefore = hits
  let refused: unknown
  try { await guard.login('alice', 'right', '10.0.0.1') } catch (err) { refused = err }
  t.ok(refused instanceof GatewayError && refused.code === 'RATE_LIMITED' && refused.headers?.['retry-after'] === '1')
  t.equal(hits, hitsBefore, 'no store access for it')
  t.same(await Promise.all(running), ['alice', 'alice'], 'the admitted ones complete')
  await inner.close()
})
