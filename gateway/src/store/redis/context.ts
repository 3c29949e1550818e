// What every part of the Redis store shares: the connection, the names of its keys, and the one
// way a Redis failure becomes STORE_UNAVAILABLE (counted for keygate_store_errors_total).
import { Cluster } from 'ioredis'
import { GatewayError } from '../../errors.js'
import type { RedisClient } from '../redis-connection.js'
import { redisKeyNames, type RedisKeyNames } from './key-names.js'

const RETRY_AFTER_SECONDS = '1'

export interface RedisStoreContext {
  readonly redis: RedisClient
  readonly names: RedisKeyNames
  /** a Redis Cluster: a script, MULTI or pipeline stays within one hash slot */
  readonly cluster: boolean
  /** Runs one store operation, turning any Redis failure into STORE_UNAVAILABLE (and counting it). */
  readonly guarded: <T>(operation: () => Promise<T>) => Promise<T>
  /** failed operations, for the metrics (keygate_store_errors_total) */
  readonly errors: number
}

export function redisStoreContext (redis: RedisClient, prefix: string): RedisStoreContext {
  const cluster = redis instanceof Cluster
  let errors = 0
  return {
    redis,
    names: redisKeyNames(prefix, cluster),
    cluster,
    guarded: async <T>(operation: () => Promise<T>): Promise<T> => {
      try {
        return await operation()
      } catch (err) {
        errors++
        throw err instanceof GatewayError ? err : unavailable(err)
      }
    },
    get errors () { return errors }
  }
}

function unavailable (err: unknown): GatewayError {
  return new GatewayError('STORE_UNAVAILABLE', 'The key and user store did not answer; try again shortly', {
    headers: { 'retry-after': RETRY_AFTER_SECONDS },
    cause: err
  })
}

/** MULTI (or pipeline) results, or STORE_UNAVAILABLE when any command failed */
export function results (result: Array<[Error | null, unknown]> | null): unknown[] {
  const failed = result?.find(([err]) => err !== null)
  if (result === null || failed !== undefined) throw unavailable(failed?.[0])
  return result.map(([, value]) => value)
}
