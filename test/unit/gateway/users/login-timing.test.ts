// A quick check in every test run (the 200-of-each figure is test/chaos/login-enumeration.chaos.ts):
// an unknown user costs what a wrong password costs (both run one scrypt), so timing tells an
// attacker nothing about which usernames exist. Time is the behaviour here: a ratio of medians
// within one run, with a wide margin for a noisy machine.
import t from 'tap'
import { timeFailedLogins } from '../../../helpers/login-timing.js'

t.test('unknown user and wrong password take the same time (10 of each)', async (t) => {
  const { wrongMedianMs, unknownMedianMs, ratio, refusals } = await timeFailedLogins(10)
  t.equal(refusals, 20, 'every attempt refused with INVALID_CREDENTIALS')
  t.comment(`median wrong password ${wrongMedianMs.toFixed(1)} ms, unknown user ${unknownMedianMs.toFixed(1)} ms`)
  t.ok(ratio > 0.67 && ratio < 1.5, `ratio ${ratio.toFixed(2)} is within 0.67-1.5`)
})
