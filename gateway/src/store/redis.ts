// The Redis store: the system of record, shared by every gateway on one Redis (one node, a
// Sentinel's master, or a Cluster). Each concern of the store (types.ts) is a file of its own in
// redis/, over what they all share (redis/context.ts: the connection, the names of the keys,
// STORE_UNAVAILABLE); this file connects and makes the Store of them. memory.ts and memory/ are
// the embedded store, concern for concern.
import { connectRedis, type RedisConnection } from './redis-connection.js'
import { redisStoreContext } from './redis/context.js'
import { redisKeyEvents } from './redis/key-events.js'
import { sameSlotKey } from './redis/key-names.js'
import { redisKeys } from './redis/keys.js'
import { redisLimits } from './redis/limits.js'
import { redisMcpSessions } from './redis/mcp-sessions.js'
import { redisOnce } from './redis/once.js'
import { redisSigningKeys } from './redis/signing-keys.js'
import { redisUsage } from './redis/usage.js'
import { redisUsers } from './redis/users.js'
import type { Store } from './types.js'

export type RedisStoreOptions = ({ url: string } | { connection: RedisConnection }) & {
  /** every key this store touches starts with it, so several deployments (or tests) can share a Redis */
  prefix: string
  /** no command waits longer than this on a slow or dead Redis */
  commandTimeoutMs: number
}

/**
 * Connects and returns the Redis store. Commands fail fast while Redis is away (no offline
 * queue, a command timeout) and the client reconnects in the background.
 */
export async function createRedisStore (options: RedisStoreOptions): Promise<Store> {
  const connection = 'url' in options ? options.url : options.connection
  const { prefix, commandTimeoutMs } = options
  const redis = await connectRedis(connection, { commandTimeoutMs })
  const context = redisStoreContext(redis, prefix)
  if (context.cluster) {
    // the replay marks' cancels live in the mark's slot: a prefix that rules it out fails here, not every signed write
    try {
      sameSlotKey(context.names.once('replay:'), ':cancelled:')
    } catch {
      redis.disconnect()
      throw new Error(`KEYGATE_REDIS_PREFIX ${JSON.stringify(prefix)} holds a } outside a {tag}: in a Redis Cluster keygate needs a prefix without one`)
    }
  }
  const { stop: stopKeyEvents, ...keyEvents } = redisKeyEvents({ connection, commandTimeoutMs, prefix, channel: context.names.keyEvents })
  const { stop: stopForgets, ...once } = redisOnce(context)

  return {
    kind: 'redis',
    get errors () { return context.errors },
    ...redisUsers(context),
    ...redisKeys(context),
    ...keyEvents,
    ...redisSigningKeys(context),
    ...once,
    ...redisLimits(context),
    ...redisUsage(context),
    ...redisMcpSessions(context),
    ping: async () => { await context.guarded(async () => await redis.ping()) },
    close: async () => {
      stopForgets()
      await stopKeyEvents()
      try {
        await redis.quit()
      } catch {}
      // Also after a clean QUIT: it alone leaves Sentinel's failover-detector connections open.
      redis.disconnect()
    }
  }
}
