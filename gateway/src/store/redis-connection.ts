// Connecting to Redis in any of its three shapes: one node (REDIS_URL), a master found through
// Sentinel, or a Redis Cluster. The store, the CLI, the tests and the bench all connect here, so
// every client fails fast the same way and every key scan covers every master.
import { Cluster, Redis, type RedisOptions } from 'ioredis'
import type { RedisTopology } from '../config/redis.js'

/** A single node's `redis://` or `rediss://` URL, or Sentinel, or a Cluster. */
export type RedisConnection = string | RedisTopology
export type RedisClient = Redis | Cluster

export interface RedisClientOptions {
  /** no command waits longer than this on a slow or dead Redis */
  commandTimeoutMs: number
}

/** Where a connection goes, for messages and logs: never a password. */
export function describeRedis (connection: RedisConnection): string {
  if (typeof connection === 'string') return redactUrl(connection)
  const hosts = connection.mode === 'sentinel' ? connection.sentinels : connection.nodes
  const nodes = hosts.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(',')
  return connection.mode === 'sentinel' ? `master "${connection.masterName}" of sentinels ${nodes}` : `Redis Cluster ${nodes}`
}

/** A Redis URL without its password, for messages and logs. */
export function redactUrl (url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparseable REDIS_URL)'
  }
}

/**
 * A client that fails fast while Redis is away (no offline queue, no retries, a command timeout)
 * and reconnects in the background. Not yet connected: call `connect()`. `extra`: more options
 * for each connection (a subscriber's name, say).
 */
export function createRedisClient (connection: RedisConnection, options: RedisClientOptions, extra: RedisOptions = {}): RedisClient {
  const common: RedisOptions = {
    ...extra,
    lazyConnect: true,
    enableOfflineQueue: false,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: Math.max(options.commandTimeoutMs, 2000),
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000)
  }
  if (typeof connection === 'string') return new Redis(connection, common)
  const credentials = {
    ...(connection.username !== undefined && { username: connection.username }),
    ...(connection.password !== undefined && { password: connection.password })
  }
  if (connection.mode === 'sentinel') {
    return new Redis({
      ...common,
      ...credentials,
      sentinels: connection.sentinels,
      name: connection.masterName,
      ...(connection.sentinelPassword !== undefined && { sentinelPassword: connection.sentinelPassword }),
      // One pass over the sentinels per attempt: connect() fails at start when none answers (as
      // with one node), and retryStrategy above paces the later attempts.
      sentinelRetryStrategy: () => null,
      // Hear of a failover from the sentinels at once rather than at the next failed command,
      // and leave a master that was demoted under us (its writes answer READONLY).
      failoverDetector: true,
      reconnectOnError: (err) => err.message.startsWith('READONLY')
    })
  }
  return new Cluster(connection.nodes, {
    lazyConnect: true,
    enableOfflineQueue: false,
    // Node connections fail fast like a single node's; MOVED and ASK are followed by the client.
    redisOptions: { ...extra, ...credentials, commandTimeout: common.commandTimeout, connectTimeout: common.connectTimeout, maxRetriesPerRequest: 0 },
    clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 1000)
  })
}

/** createRedisClient, connected; the error says where it tried, without a password. */
export async function connectRedis (connection: RedisConnection, options: RedisClientOptions): Promise<RedisClient> {
  const client = createRedisClient(connection, options)
  // Without a listener ioredis prints every reconnection error; callers report failures themselves.
  client.on('error', () => {})
  try {
    await client.connect()
  } catch (err) {
    client.disconnect()
    throw new Error(`cannot reach Redis at ${describeRedis(connection)}: ${(err as Error).message}`, { cause: err })
  }
  return client
}

/** The clients that hold keys: the one node, or every master of a cluster. */
export function masters (client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client]
}

/**
 * Every key matching a SCAN pattern, in batches, on every master (a cluster's SCAN sees only the
 * node it is sent to). For operators and tests; nothing on a request's path scans.
 */
export async function * scanKeys (client: RedisClient, pattern: string): AsyncGenerator<string[]> {
  for (const node of masters(client)) {
    let cursor = '0'
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
      if (keys.length > 0) yield keys
      cursor = next
    } while (cursor !== '0')
  }
}

/** Deletes every key matching `pattern`; returns how many. Key by key in a cluster (no cross-slot DEL). */
export async function deleteKeys (client: RedisClient, pattern: string): Promise<number> {
  let deleted = 0
  for await (const keys of scanKeys(client, pattern)) {
    if (client instanceof Cluster) {
      deleted += (await Promise.all(keys.map(async (key) => await client.del(key)))).reduce((a, b) => a + b, 0)
    } else {
      deleted += await client.del(...keys)
    }
  }
  return deleted
}
