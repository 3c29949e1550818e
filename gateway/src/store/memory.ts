// The embedded store: one process's memory, lost at exit, used when no Redis is configured. Same
// contract as the Redis store (one test suite runs on both), and the same concerns, each a file
// of its own in memory/ named as its Redis counterpart in redis/; this file makes the Store of them.
import { memoryKeyEvents } from './memory/key-events.js'
import { memoryKeys } from './memory/keys.js'
import { memoryLimits } from './memory/limits.js'
import { memoryMcpSessions } from './memory/mcp-sessions.js'
import { memoryOnce } from './memory/once.js'
import { memorySigningKeys } from './memory/signing-keys.js'
import { memoryUsage } from './memory/usage.js'
import { memoryUsers } from './memory/users.js'
import type { Store } from './types.js'

/** `now`: the store's clock (expiries, rate counters, record times). */
export function createMemoryStore (now: () => number = Date.now): Store {
  const { announce, ...keyEvents } = memoryKeyEvents()
  const { revokeOwnerKeys, ...keys } = memoryKeys(now, announce)
  const { sweep: sweepOnce, ...once } = memoryOnce(now)
  const { sweep: sweepLimits, ...limits } = memoryLimits(now)
  const { sweep: sweepUsage, ...usage } = memoryUsage(now)
  const { sweep: sweepSessions, ...mcpSessions } = memoryMcpSessions(now)
  // Expiring entries are swept lazily on access and by a timer that never keeps the process alive.
  const sweep = setInterval(() => {
    const t = now()
    sweepOnce(t)
    sweepLimits(t)
    sweepUsage(t)
    sweepSessions(t)
  }, 10_000)
  sweep.unref()

  return {
    kind: 'memory',
    // nothing here can fail to answer
    errors: 0,
    ...memoryUsers({ now, announce, revokeOwnerKeys }),
    ...keys,
    ...keyEvents,
    ...memorySigningKeys(now),
    ...once,
    ...limits,
    ...usage,
    ...mcpSessions,
    async ping () {},
    async close () { clearInterval(sweep) }
  }
}
