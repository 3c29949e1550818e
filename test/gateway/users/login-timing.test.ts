// A quick check in every test run (the 200-of-each figure is test/chaos/login-enumeration.chaos.ts):
// an unknown user costs what a wrong password costs (both run one scrypt), so timing tells an
// attacker nothing about which usernames exist. Time is the behaviour here: compared as a ratio
// of medians within one run, interleaved, with a wide margin for a noisy machine.
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { createMemoryStore } from '../../../gateway/src/store/memory.js'
import { createUserService } from '../../../gateway/src/users/user-service.js'

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

t.test('unknown user and wrong password take the same time', async (t) => {
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
  for (let i = 0; i < 7; i++) {
    wrong.push(await timeOf('alice'))
    unknown.push(await timeOf(`nobody-${i}`))
  }
  const ratio = median(unknown) / median(wrong)
  t.comment(`median wrong password ${median(wrong).toFixed(1)} ms, unknown user ${median(unknown).toFixed(1)} ms, ratio ${ratio.toFixed(2)}`)
  t.ok(ratio > 0.67 && ratio < 1.5, `ratio ${ratio.toFixed(2)} is within 0.67-1.5`)
})
