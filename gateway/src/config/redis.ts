// Which Redis holds users and keys: one node (REDIS_URL), a master found through Sentinel, or a
// Redis Cluster. Exactly one may be configured; errors name variables, never their values.
import { ConfigError } from './config-error.js'

export const DEFAULT_REDIS_PORT = 6379
export const DEFAULT_REDIS_SENTINEL_PORT = 26379

/** One Redis server (a sentinel, a cluster's seed node). */
export interface RedisNode {
  host: string
  port: number
}

/** Credentials of the Redis servers that hold the data (never of the sentinels). */
export interface RedisCredentials {
  username: string | undefined
  password: string | undefined
}

/** KEYGATE_REDIS_SENTINELS: the master the sentinels name, found through them after each failover. */
export interface RedisSentinelConfig extends RedisCredentials {
  mode: 'sentinel'
  sentinels: RedisNode[]
  masterName: string
  sentinelPassword: string | undefined
}

/** KEYGATE_REDIS_CLUSTER_NODES: a Redis Cluster, found through any of these seed nodes. */
export interface RedisClusterConfig extends RedisCredentials {
  mode: 'cluster'
  nodes: RedisNode[]
}

/** Redis other than one node named by REDIS_URL. */
export type RedisTopology = RedisSentinelConfig | RedisClusterConfig

const HOST_NAME = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,253})$/
const IPV6_ADDRESS = /^[0-9A-Fa-f:.]{2,45}$/

/**
 * `host:port,host2:port` (an IPv6 address in brackets: `[::1]:6379`); a missing port is
 * `defaultPort`. Errors name an entry by its number: a URL pasted here by mistake may hold a password.
 */
export function parseRedisNodes (variable: string, text: string, defaultPort: number): RedisNode[] {
  return text.split(',').map((raw, index) => {
    const entry = raw.trim()
    const match = /^(?:\[([^\]]*)\]|([^:[\]]*))(?::([0-9]{1,5}))?$/.exec(entry)
    const host = match?.[1] ?? match?.[2] ?? ''
    const port = match?.[3] === undefined ? defaultPort : Number(match[3])
    const validHost = match?.[1] !== undefined ? IPV6_ADDRESS.test(host) : HOST_NAME.test(host)
    if (match === null || !validHost || port < 1 || port > 65535) {
      throw new ConfigError(`${variable}: entry ${index + 1} is not host or host:port (comma-separated, IPv6 as [addr]:port, no scheme; ` +
        'credentials go in KEYGATE_REDIS_USERNAME and KEYGATE_REDIS_PASSWORD)')
    }
    return { host, port }
  })
}

/** The variables that choose and reach Redis, as read from the environment. */
export type RedisEnv = Partial<Record<'REDIS_URL' | 'KEYGATE_REDIS_SENTINELS' | 'KEYGATE_REDIS_SENTINEL_MASTER' | 'KEYGATE_REDIS_SENTINEL_PASSWORD' |
  'KEYGATE_REDIS_CLUSTER_NODES' | 'KEYGATE_REDIS_USERNAME' | 'KEYGATE_REDIS_PASSWORD' | 'KEYGATE_REDIS_PREFIX', string>>

/**
 * Which Redis, if any: REDIS_URL (one node), KEYGATE_REDIS_SENTINELS (with its master name) or
 * KEYGATE_REDIS_CLUSTER_NODES, exactly one of them. Errors name variables, never their values.
 */
export function redisTopologyFrom (e: RedisEnv): RedisTopology | undefined {
  const modes = (['REDIS_URL', 'KEYGATE_REDIS_SENTINELS', 'KEYGATE_REDIS_CLUSTER_NODES'] as const).filter((name) => e[name] !== undefined)
  if (modes.length > 1) {
    throw new ConfigError(`${modes.join(' and ')} are set: set exactly one of REDIS_URL (one Redis), KEYGATE_REDIS_SENTINELS (Redis Sentinel) ` +
      'or KEYGATE_REDIS_CLUSTER_NODES (Redis Cluster)')
  }
  const mode = modes[0]
  const needs = (name: keyof RedisEnv, what: string): void => {
    if (e[name] !== undefined) throw new ConfigError(`${name}: set, but ${what}`)
  }
  if (mode !== 'KEYGATE_REDIS_SENTINELS') {
    needs('KEYGATE_REDIS_SENTINEL_MASTER', 'KEYGATE_REDIS_SENTINELS is not: it names the master those sentinels watch')
    needs('KEYGATE_REDIS_SENTINEL_PASSWORD', 'KEYGATE_REDIS_SENTINELS is not: it is the sentinels\' own password')
  }
  if (mode === 'REDIS_URL') {
    const inUrl = 'it is for Sentinel and Cluster; with REDIS_URL, write credentials in the URL (redis://user:password@host:port)'
    needs('KEYGATE_REDIS_USERNAME', inUrl)
    needs('KEYGATE_REDIS_PASSWORD', inUrl)
  }
  if (mode === undefined) {
    const none = 'no Redis is configured (REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES)'
    needs('KEYGATE_REDIS_USERNAME', none)
    needs('KEYGATE_REDIS_PASSWORD', none)
  }
  const credentials: RedisCredentials = { username: e.KEYGATE_REDIS_USERNAME, password: e.KEYGATE_REDIS_PASSWORD }
  if (mode === 'KEYGATE_REDIS_SENTINELS') {
    if (e.KEYGATE_REDIS_SENTINEL_MASTER === undefined) {
      throw new ConfigError('KEYGATE_REDIS_SENTINEL_MASTER: required with KEYGATE_REDIS_SENTINELS: ' +
        'the master name the sentinels monitor (`sentinel monitor NAME ...`)')
    }
    return {
      mode: 'sentinel',
      sentinels: parseRedisNodes('KEYGATE_REDIS_SENTINELS', e.KEYGATE_REDIS_SENTINELS as string, DEFAULT_REDIS_SENTINEL_PORT),
      masterName: e.KEYGATE_REDIS_SENTINEL_MASTER,
      sentinelPassword: e.KEYGATE_REDIS_SENTINEL_PASSWORD,
      ...credentials
    }
  }
  if (mode === 'KEYGATE_REDIS_CLUSTER_NODES') {
    // keygate writes its own hash tags (store/redis/key-names.ts); a brace in the prefix would move them.
    if (e.KEYGATE_REDIS_PREFIX !== undefined && /[{}]/.test(e.KEYGATE_REDIS_PREFIX)) {
      throw new ConfigError('KEYGATE_REDIS_PREFIX: must not contain { or } with KEYGATE_REDIS_CLUSTER_NODES: keygate places its own hash tags in Redis Cluster')
    }
    return {
      mode: 'cluster',
      nodes: parseRedisNodes('KEYGATE_REDIS_CLUSTER_NODES', e.KEYGATE_REDIS_CLUSTER_NODES as string, DEFAULT_REDIS_PORT),
      ...credentials
    }
  }
  return undefined
}
