// Times failed logins of the two kinds an attacker would compare: a wrong password for a real
// user, and an unknown user. Interleaved, two pairs at a time (two cores), so both kinds see the
// same load; compared by the ratio of their medians.
import { performance } from 'node:perf_hooks'
import { createMemoryStore } from '../../gateway/src/store/memory.js'
import { createUserService } from '../../gateway/src/users/user-service.js'

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

export interface LoginTimings { wrongMedianMs: number; unknownMedianMs: number; ratio: number; refusals: number }

/** `runs` of each kind (even); every attempt must fail with INVALID_CREDENTIALS or this throws. */
export async function timeFailedLogins (runs: number): Promise<LoginTimings> {
  const users = createUserService(createMemoryStore())
  await users.upsert('alice', 'the right password')
  let refusals = 0
  const timeOf = async (username: string): Promise<number> => {
    const started = performance.now()
    try {
      await users.authenticate(username, 'a wrong password')
    } catch (err) {
      if ((err as { code?: string }).code !== 'INVALID_CREDENTIALS') throw err
      refusals++
      return performance.now() - started
    }
    throw new Error(`a login as ${username} with a wrong password succeeded`)
  }
  await timeOf('nobody') // the dummy hash is made on first use
  refusals = 0
  const wrong: number[] = []
  const unknown: number[] = []
  for (let i = 0; i < runs / 2; i++) {
    const [w1, u1, w2, u2] = await Promise.all([timeOf('alice'), timeOf(`nobody-${i}`), timeOf('alice'), timeOf(`nobody-${i}-b`)])
    wrong.push(w1, w2)
    unknown.push(u1, u2)
  }
  const wrongMedianMs = median(wrong)
  const unknownMedianMs = median(unknown)
  return { wrongMedianMs, unknownMedianMs, ratio: unknownMedianMs / wrongMedianMs, refusals }
}
