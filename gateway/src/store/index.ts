import type { GatewayConfig } from '../config.js'
import { createMemoryStore } from './memory.js'
import { createRedisStore } from './redis.js'
import type { Store } from './types.js'

export type { KeyEvent, KeyEventListener, KeyRecord, RemoveUserResult, RevokeResult, Store, UserRecord } from './types.js'

/** The store the configuration asks for: Redis when REDIS_URL is set, else the embedded one. */
export async function createStore (config: Pick<GatewayConfig, 'redisUrl' | 'redisPrefix' | 'redisCommandTimeoutMs'>): Promise<Store> {
  if (config.redisUrl === undefined) return createMemoryStore()
  return await createRedisStore({ url: config.redisUrl, prefix: config.redisPrefix, commandTimeoutMs: config.redisCommandTimeoutMs })
}
