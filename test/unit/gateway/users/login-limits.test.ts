// Login brute force: failures per username and per client address, counted in the store (shared
// by gateways on one Redis); past the limit a login is answered 429 RATE_LIMITED with Retry-After
// before any password check. Real sockets, real stores, real scrypt (each failed login costs one,
// so the limits here are small, given to the token route as plugin options, and known users have
// cheaper hashes).
import t, { type Test } from 'tap'
import { SCRYPT_LOG_N } from '../../../../gateway/src/config/env.js'
import { DEFAULT_LOGIN_MAX_FAILURES_PER_USER, DEFAULT_LOGIN_WINDOW_SECONDS } from '../../../../gateway/src/users/login-guard.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { PASSWORD, STORE_KINDS, login, startStack } from '../../../helpers/stack.js'
import { median, postLogin, putCheapUser, startLoginApp, type LoginAnswer } from '../../../helpers/login-fixtures.js'

const WRONG = 'not the password'
const OTHER_ADDRESS = '127.0.0.2'

function assertRateLimited (t: Test, res: LoginAnswer, label: string, windowSeconds = DEFAULT_LOGIN_WINDOW_SECONDS): void {
  t.equal(res.status, 429, `${label}: 429`)
  t.equal(res.code, 'RATE_LIMITED', `${label}: RATE_LIMITED`)
  t.match(res.contentType, /^application\/problem\+json/, `${label}: problem+json`)
  const seconds = Number(res.retryAfter)
  t.ok(Number.isInteger(seconds) && seconds > 0 && seconds <= windowSeconds, `${label}: Retry-After ${res.retryAfter} is whole seconds within the window`)
}

function assertRefused (t: Test, res: LoginAnswer, label: string): void {
  t.equal(res.status, 401, `${label}: 401`)
  t.equal(res.code, 'INVALID_CREDENTIALS', `${label}: INVALID_CREDENTIALS`)
}

for (const kind of STORE_KINDS) {
  t.test(`${kind}: past the failures per username, 429 without a password check; other usernames unaffected`, async (t) => {
    // the time of a 429 is compared with a password check's: checks at the production cost
    const gw = await startLoginApp(t, { store: kind, login: { maxFailuresPerUser: 2 }, scryptLogN: SCRYPT_LOG_N })
    await putCheapUser(gw.store, 'alice', PASSWORD)
    await putCheapUser(gw.store, 'bob', PASSWORD)
    const failed: number[] = []
    // An unknown username is counted like a known one: the limiter tells nobody which exist.
    for (const username of ['alice', 'nobody']) {
      for (let i = 1; i <= 2; i++) {
        const res = await postLogin(gw.url, username, WRONG)
        assertRefused(t, res, `${username} failure ${i}`)
        failed.push(res.ms)
      }
    }
    const checked = gw.calls.count
    const locked = [
      await postLogin(gw.url, 'alice', WRONG),
      await postLogin(gw.url, 'alice', PASSWORD),
      await postLogin(gw.url, 'alice', PASSWORD, OTHER_ADDRESS),
      await postLogin(gw.url, 'nobody', WRONG)
    ]
    const labels = ['alice, wrong password', 'alice, right password', 'alice from another address', 'unknown user']
    locked.forEach((res, i) => { assertRateLimited(t, res, labels[i] ?? '') })
    t.equal(gw.calls.count, checked, 'no password was checked for a locked-out attempt')
    const ratio = Math.max(...locked.map((r) => r.ms)) / median(failed)
    t.comment(`failed login median ${median(failed).toFixed(1)} ms, slowest 429 ${Math.max(...locked.map((r) => r.ms)).toFixed(1)} ms`)
    t.ok(ratio < 0.25, `a 429 costs a fraction of a failed login (ratio ${ratio.toFixed(3)}): no scrypt`)

    t.equal((await postLogin(gw.url, 'bob', PASSWORD)).status, 200, 'another username still logs in')
  })

  t.test(`${kind}: a success resets the username's count`, async (t) => {
    const gw = await startLoginApp(t, { store: kind, login: { maxFailuresPerUser: 2 } })
    await putCheapUser(gw.store, 'alice', PASSWORD)
    assertRefused(t, await postLogin(gw.url, 'alice', WRONG), 'failure 1')
    t.equal((await postLogin(gw.url, 'alice', PASSWORD)).status, 200, 'success within the limit')
    // Without the reset, the second of these would be the fourth attempt: over the limit of 2.
    assertRefused(t, await postLogin(gw.url, 'alice', WRONG), 'failure 1 after the success')
    assertRefused(t, await postLogin(gw.url, 'alice', WRONG), 'failure 2 after the success')
    assertRateLimited(t, await postLogin(gw.url, 'alice', PASSWORD), 'then the limit applies again')
  })

  t.test(`${kind}: past the failures per address, 429 for any username from it; successes neither count nor reset`, async (t) => {
    const gw = await startLoginApp(t, { store: kind, login: { maxFailuresPerAddress: 2 } })
    await putCheapUser(gw.store, 'alice', PASSWORD)
    await putCheapUser(gw.store, 'bob', PASSWORD)
    t.equal((await postLogin(gw.url, 'alice', PASSWORD)).status, 200, 'success 1')
    assertRefused(t, await postLogin(gw.url, 'alice', WRONG), 'failure 1')
    t.equal((await postLogin(gw.url, 'alice', PASSWORD)).status, 200, 'success 2: successes are not failures')
    assertRefused(t, await postLogin(gw.url, 'bob', WRONG), 'failure 2 (another username): the success reset nothing')
    const checked = gw.calls.count
    assertRateLimited(t, await postLogin(gw.url, 'alice', PASSWORD), 'alice, right password, from the address')
    assertRateLimited(t, await postLogin(gw.url, 'dave', WRONG), 'a fresh username from the address')
    t.equal(gw.calls.count, checked, 'no password was checked')
    t.equal((await postLogin(gw.url, 'alice', PASSWORD, OTHER_ADDRESS)).status, 200, 'another address is not affected')
  })
}

t.test('redis: two gateways on one prefix share the counts', async (t) => {
  const url = await testRedisUrl()
  const redisPrefix = uniquePrefix('login-shared')
  t.teardown(async () => { await deletePrefix(url, redisPrefix) })
  const a = await startLoginApp(t, { store: 'redis', redisPrefix, login: { maxFailuresPerUser: 2 } })
  const b = await startLoginApp(t, { store: 'redis', redisPrefix, login: { maxFailuresPerUser: 2 } })
  await putCheapUser(a.store, 'alice', PASSWORD)
  assertRefused(t, await postLogin(a.url, 'alice', WRONG), 'failure 1 at gateway A')
  assertRefused(t, await postLogin(b.url, 'alice', WRONG), 'failure 2 at gateway B')
  const checked = [a.calls.count, b.calls.count]
  assertRateLimited(t, await postLogin(a.url, 'alice', PASSWORD), 'gateway A')
  assertRateLimited(t, await postLogin(b.url, 'alice', PASSWORD), 'gateway B')
  t.same([a.calls.count, b.calls.count], checked, 'neither checked a password')
})

t.test('the gateway as built: the 11th failure for a username is refused with the default limits', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await putCheapUser(gw.store, 'alice', PASSWORD)
  await putCheapUser(gw.store, 'bob', PASSWORD)
  // At once: the login concurrency bound (2 at a time) queues them, none is refused for that.
  const failures = await Promise.all(Array.from({ length: DEFAULT_LOGIN_MAX_FAILURES_PER_USER }, async () => await postLogin(gw.url, 'alice', WRONG)))
  failures.forEach((res, i) => { assertRefused(t, res, `failure ${i + 1}`) })
  const eleventh = await postLogin(gw.url, 'alice', PASSWORD)
  assertRateLimited(t, eleventh, `failure ${DEFAULT_LOGIN_MAX_FAILURES_PER_USER + 1}`)
  t.ok(Number(eleventh.retryAfter) > DEFAULT_LOGIN_WINDOW_SECONDS - 60, `Retry-After ${eleventh.retryAfter}: the window just began`)
  t.ok(eleventh.ms < median(failures.map((r) => r.ms)) / 4, 'answered without a password check')
  t.type(await login(gw.url, 'bob'), 'string', 'bob still logs in')
})
