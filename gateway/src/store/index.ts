import type { GatewayConfig } from '../config/env.js'
import { createMemoryStore } from './memory.js'
import { createRedisStore } from './redis.js'
import type { RedisConnection } from './redis-connection.js'
import type { Store } from './types.js'
export { newestFirst } from './types.js'

export type {
  CreateKeyOutcome, KeyEvent, KeyEventListener, KeyRecord, RateCounter, RateOutcome, RememberedMark, RemoveUserResult, RevokeResult, Store,
  UsageBucketWrite, UserRecord
} from './types.js'

type StoreConfig = Pick<GatewayConfig, 'redisUrl' | 'redisTopology' | 'redisPrefix' | 'redisCommandTimeoutMs'>

/** The Redis the configuration names (REDIS_URL, Sentinel or Cluster), if any. */
export function redisConnection (config: Pick<GatewayConfig, 'redisUrl' | 'redisTopology'>): RedisConnection | undefined {
  return config.redisUrl ?? config.redisTopology
}

/** The store the configuration asks for: Redis when one is configured, else the embedded one. */
export async function createStore (config: StoreConfig): Promise<Store> {
  const connection = redisConnection(config)
  if (connection === undefined) return createMemoryStore()
  return await createRedisStore({ connection, prefix: config.redisPrefix, commandTimeoutMs: config.redisCommandTimeoutMs })
}
