// The bench's few Redis operations: is it there, how much CPU has it used, and removing every key
// a run wrote under its own prefix.
import { Redis } from 'ioredis'
import { deleteKeys } from '../gateway/src/store/redis-connection.js'

export function redisClient (url: string): Redis {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 1, retryStrategy: () => null })
  client.on('error', () => {})
  return client
}

/** Throws when `url` does not answer PING. */
export async function pingRedis (url: string): Promise<void> {
  const client = redisClient(url)
  try {
    await client.connect()
    await client.ping()
  } finally {
    client.disconnect()
  }
}

/** Redis's own CPU time so far (INFO cpu), µs. */
export async function redisCpuMicros (client: Redis): Promise<number> {
  const info = await client.info('cpu')
  const field = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? 0)
  return Math.round((field('used_cpu_sys') + field('used_cpu_user')) * 1e6)
}

/** Deletes every key under `prefix`; returns how many. */
export async function deletePrefix (url: string, prefix: string): Promise<number> {
  if (!prefix.startsWith('keygate-bench:')) throw new Error(`refusing to delete under "${prefix}": not a bench prefix`)
  const client = redisClient(url)
  try {
    await client.connect()
    return await deleteKeys(client, `${prefix}*`)
  } finally {
    client.disconnect()
  }
}
