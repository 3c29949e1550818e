// A login storm must not starve other traffic: at most `concurrency` password checks (scrypt) run
// at once, at most `queue` logins wait, and any beyond get 429 RATE_LIMITED (Retry-After: 1) at
// once. Meanwhile a cheap request on the same server keeps answering fast. Real sockets, real
// scrypt; time is compared as ratios within one run, with wide margins for a noisy machine.
import { SCRYPT_LOG_N } from '../../../../gateway/src/config/env.js'
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { median, postLogin, startLoginApp, timedGet } from '../../../helpers/login-fixtures.js'

const CONCURRENCY = 2
const QUEUE = 4
const STORM = 40

t.test('a storm of logins: bounded password checks, the excess refused at once, other requests unhurt', async (t) => {
  // Failure limits out of the way: this is about the concurrency bound alone.
  const gw = await startLoginApp(t, {
    store: 'memory',
    login: { concurrency: CONCURRENCY, queue: QUEUE, maxFailuresPerUser: 1000, maxFailuresPerAddress: 1000 },
    // the storm is of password checks at the production cost: what /healthz must not wait behind
    scryptLogN: SCRYPT_LOG_N
  })
  // Warm up: the dummy hash for unknown users is made on first use; the first requests are slow.
  await postLogin(gw.url, 'warm-up', 'not the password')
  for (let i = 0; i < 5; i++) await timedGet(gw.url, '/healthz')
  const before: number[] = []
  for (let i = 0; i < 20; i++) before.push((await timedGet(gw.url, '/healthz')).ms)
  const checkedBefore = gw.calls.count

  // Unknown usernames, each its own: every admitted one costs a full scrypt.
  const storm = Promise.all(Array.from({ length: STORM }, async (_, i) => await postLogin(gw.url, `storm-${i}`, 'not the password')))
  await sleep(50)
  const during: number[] = []
  let stillChecking = 0
  for (let i = 0; i < 20; i++) {
    if (gw.calls.active > 0) stillChecking++
    const res = await timedGet(gw.url, '/healthz')
    t.equal(res.status, 200)
    during.push(res.ms)
  }
  const answers = await storm

  const refused = answers.filter((a) => a.status === 429)
  const checked = answers.filter((a) => a.status === 401)
  t.equal(refused.length + checked.length, STORM, 'every login is either checked (401) or refused (429)')
  t.ok(checked.length >= CONCURRENCY && checked.length <= CONCURRENCY + QUEUE, `${checked.length} checked: at most ${CONCURRENCY} running + ${QUEUE} waiting`)
  t.equal(gw.calls.count - checkedBefore, checked.length, 'a refused login checked no password')
  t.ok(gw.calls.peak <= CONCURRENCY, `at most ${CONCURRENCY} password checks at once (peak ${gw.calls.peak})`)
  t.ok(refused.every((a) => a.code === 'RATE_LIMITED' && a.retryAfter === '1' && /^application\/problem\+json/.test(a.contentType ?? '')),
    'refused: RATE_LIMITED, Retry-After: 1, problem+json')
  const refusal = median(refused.map((a) => a.ms))
  const fastestCheck = Math.min(...checked.map((a) => a.ms))
  t.comment(`refused in ${refusal.toFixed(1)} ms (median); ` +
    `checked logins took ${fastestCheck.toFixed(0)}-${Math.max(...checked.map((a) => a.ms)).toFixed(0)} ms`)
  t.ok(refusal < fastestCheck / 4, 'refusals are immediate: no waiting behind scrypt')

  t.ok(stillChecking >= 10, `the storm was still running while /healthz was measured (${stillChecking} of 20)`)
  const ratio = median(during) / median(before)
  t.comment(`/healthz median ${median(before).toFixed(2)} ms before, ${median(during).toFixed(2)} ms during the storm (x${ratio.toFixed(1)})`)
  // Waiting behind even one scrypt (hundreds of ms) would be a ratio in the hundreds.
  t.ok(ratio < 25, `/healthz stays fast during the storm (x${ratio.toFixed(1)})`)
})
