// An unknown user costs what a wrong password costs (both run one scrypt), so timing tells an
// attacker nothing about which usernames exist. Time is the behaviour here: compared as a ratio
// of medians within one run, interleaved, with a wide margin for a noisy machine.
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { createMemoryStore } from '../../gateway/src/store/memory.js'
import { createUserService } from '../../gateway/src/users/user-service.js'

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

const RUNS = 200

t.test(`unknown user and wrong password take the same time (${RUNS} of each)`, async (t) => {
  const users = createUserService(createMemoryStore())
  await users.upsert('alice', 'the right password')
  const timeOf = async (username: string): Promise<number> => {
    const started = performance.now()
    await t.rejects(users.authenticate(username, 'a wrong password'), { code: 'INVALID_CREDENTIALS' })
    return performance.now() - started
  }
  await timeOf('nobody') // the dummy hash is made on first use
  const wrong: number[] = []
  const unknown: number[] = []
  // Two pairs at a time (two cores), each pair one of each kind, so both kinds see the same load.
  for (let i = 0; i < RUNS / 2; i++) {
    const [w1, u1, w2, u2] = await Promise.all([timeOf('alice'), timeOf(`nobody-${i}`), timeOf('alice'), timeOf(`nobody-${i}-b`)])
    wrong.push(w1, w2)
    unknown.push(u1, u2)
  }
  const ratio = median(unknown) / median(wrong)
  t.comment(`${RUNS} of each: median wrong password ${median(wrong).toFixed(1)} ms, unknown user ${median(unknown).toFixed(1)} ms, ratio ${ratio.toFixed(3)}`)
  t.ok(ratio > 0.9 && ratio < 1.1, `${RUNS} wrong passwords and ${RUNS} unknown users: medians within 10% (ratio ${ratio.toFixed(3)})`)
})
