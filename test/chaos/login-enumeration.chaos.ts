// User enumeration by timing: 200 wrong passwords and 200 unknown users, medians within 10%
// (issue #4's figure). Run by `npm run test:chaos` (and .ci/run): about 2 minutes of scrypt.
import t from 'tap'
import { timeFailedLogins } from '../helpers/login-timing.js'

const RUNS = 200

t.test(`unknown user and wrong password take the same time (${RUNS} of each)`, async (t) => {
  const { wrongMedianMs, unknownMedianMs, ratio, refusals } = await timeFailedLogins(RUNS)
  t.equal(refusals, 2 * RUNS, 'every attempt refused with INVALID_CREDENTIALS')
  t.comment(`${RUNS} of each: median wrong password ${wrongMedianMs.toFixed(1)} ms, unknown user ${unknownMedianMs.toFixed(1)} ms, ratio ${ratio.toFixed(3)}`)
  t.ok(ratio > 0.9 && ratio < 1.1, `${RUNS} wrong passwords and ${RUNS} unknown users: medians within 10% (ratio ${ratio.toFixed(3)})`)
})
