// One schema for the gateway's environment; the config type comes from it. Every variable is
// documented in the README (a test checks that the README and docker-compose name the same ones).
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { availableParallelism } from 'node:os'

export const DEFAULT_PORT = 8080
export const DEFAULT_UPSTREAM_PORT = 8081
export const DEFAULT_HOST = '127.0.0.1'
export const DEFAULT_BODY_LIMIT = 1024 * 1024
export const DEFAULT_TOKEN_TTL_SECONDS = 15 * 60
export const DEFAULT_REDIS_PREFIX = 'keygate:'
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500
export const DEFAULT_REDIS_PORT = 6379
export const DEFAULT_REDIS_SENTINEL_PORT = 26379
export const DEFAULT_KEY_CACHE_SIZE = 10_000
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000
/** a client must send its headers within this (slowloris) */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000
/** and its whole request within this */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** an idle keep-alive connection is closed after this (longer than a load balancer's 60 s) */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 72_000
/** on SIGTERM, in-flight requests get this long to finish before the process exits anyway */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000
/** KEYGATE_WORKERS: more than this is a typo, not a machine */
export const MAX_WORKERS = 256
/** Node's own limit, stated here so the README and the 431 answer agree */
export const MAX_HEADER_BYTES = 16 * 1024
/** SPEC.md §8: the timestamp tolerance is fixed by the interface, not configurable. */
export const MAX_TIMESTAMP_SKEW_MS = 15 * 60 * 1000

const Port = Type.Integer({ minimum: 0, maximum: 65535 })

/** The environment, as strings become typed values. Names are the variables' own. */
export const EnvSchema = Type.Object({
  PORT: Type.Optional(Port),
  HOST: Type.Optional(Type.String({ minLength: 1 })),
  UPSTREAM_PORT: Type.Optional(Port),
  UPSTREAM_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^[Rr][Ee][Dd][Ii][Ss][Ss]?://' })),
  KEYGATE_REDIS_SENTINELS: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_SENTINEL_MASTER: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  KEYGATE_REDIS_SENTINEL_PASSWORD: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_CLUSTER_NODES: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_USERNAME: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_PASSWORD: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_PREFIX: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  KEYGATE_REDIS_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 10, maximum: 60_000 })),
  KEYGATE_BOOTSTRAP_USERS: Type.Optional(Type.String()),
  KEYGATE_JWT_KEY_FILE: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_JWT_ISSUER: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_JWT_AUDIENCE: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_TOKEN_TTL_SECONDS: Type.Optional(Type.Integer({ minimum: 30, maximum: 24 * 3600 })),
  KEYGATE_BODY_LIMIT: Type.Optional(Type.Integer({ minimum: 0, maximum: 1024 * 1024 * 1024 })),
  KEYGATE_KEY_CACHE_SIZE: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000_000 })),
  KEYGATE_UPSTREAM_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
  KEYGATE_HEADERS_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 100, maximum: 600_000 })),
  KEYGATE_REQUEST_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
  KEYGATE_KEEP_ALIVE_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
  KEYGATE_SHUTDOWN_GRACE_MS: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000 })),
  KEYGATE_LOGIN_MAX_FAILURES_PER_USER: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  KEYGATE_LOGIN_MAX_FAILURES_PER_ADDRESS: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  KEYGATE_LOGIN_WINDOW_SECONDS: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400 })),
  KEYGATE_LOGIN_CONCURRENCY: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
  KEYGATE_LOGIN_QUEUE: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000 })),
  KEYGATE_ROUTES: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_ROUTES_WATCH: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
  KEYGATE_DOCS: Type.Optional(Type.Union([Type.Literal('on'), Type.Literal('off')])),
  KEYGATE_METRICS_PORT: Type.Optional(Port),
  KEYGATE_METRICS_HOST: Type.Optional(Type.String({ minLength: 1 })),
  // a string, checked here and in resolveWorkers: a number schema would turn "1.5" into 1
  KEYGATE_WORKERS: Type.Optional(Type.String({ pattern: '^(auto|[1-9][0-9]*)$' })),
  LOG_LEVEL: Type.Optional(Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))))
})
export type Env = Static<typeof EnvSchema>
export const ENV_VARIABLES = Object.keys(EnvSchema.properties) as Array<keyof Env>

export type AuthTier = 'signed' | 'bearer' | 'public'
export const AUTH_TIERS: readonly AuthTier[] = ['signed', 'bearer', 'public']
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const

/** The names of the identity headers sent upstream (CONTRACT.md's by default). */
export interface IdentityHeaderNames {
  user: string
  key: string
  keyName: string
}
export const DEFAULT_IDENTITY_HEADERS: IdentityHeaderNames = { user: 'x-gateway-user', key: 'x-gateway-key', keyName: 'x-gateway-key-name' }

export interface IdentityTokenConfig {
  /** the header that carries the token upstream */
  header: string
  ttlSeconds: number
  /** the token's `aud`: by default the upstream's origin */
  audience: string
}

/** A business route: requests it matches are authenticated per `auth` and forwarded to `upstream`. */
export interface RouteConfig {
  /** how errors and logs name it: its `name`, or `routes[i]` */
  name: string
  /** a prefix ("/v1/clients/") or, when `exact`, one exact path */
  prefix: string
  exact: boolean
  upstream: string
  auth: AuthTier
  methods: string[]
  /** replaces the matched prefix (or the exact path) in the forwarded target */
  rewrite: string | undefined
  bodyLimit: number
  timeoutMs: number
  identityHeaders: IdentityHeaderNames
  /** set on the forwarded request (after removals; the identity headers are written last) */
  addHeaders: Record<string, string>
  /** removed from the forwarded request (lower-case names) */
  removeHeaders: string[]
  identityToken: IdentityTokenConfig | undefined
  /** signed routes: refuse (default) or allow a repeat of an accepted signed POST, PUT, PATCH, DELETE */
  replay: 'reject' | 'allow'
}

export interface BootstrapUser {
  username: string
  password: string
}

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

export interface GatewayConfig {
  port: number
  host: string
  /** one Redis node; unset (and no redisTopology): the embedded in-memory store */
  redisUrl: string | undefined
  /** Redis through Sentinel or a Redis Cluster; set only when redisUrl is not */
  redisTopology: RedisTopology | undefined
  redisPrefix: string
  redisCommandTimeoutMs: number
  bootstrapUsers: BootstrapUser[]
  jwt: { keyFile: string | undefined; issuer: string; audience: string; ttlSeconds: number }
  bodyLimit: number
  keyCacheSize: number
  logLevel: string
  server: ServerLimits
  /** login brute-force limits and concurrency; unset fields take users/login-guard.ts's defaults */
  login: {
    maxFailuresPerUser?: number
    maxFailuresPerAddress?: number
    windowSeconds?: number
    concurrency?: number
    queue?: number
  }
  /** route defaults from the environment, for route files */
  routeDefaults: RouteDefaults
  /** KEYGATE_ROUTES: the route file; unset: `routes` are the built-in default */
  routesFile: string | undefined
  /** reload the route file when it changes (SIGHUP always reloads) */
  watchRoutes: boolean
  routes: RouteConfig[]
  /** KEYGATE_DOCS: serve the OpenAPI document at /docs/json and its page at /docs */
  docs: boolean
  /** the Prometheus listener: none unless KEYGATE_METRICS_PORT is set; on 127.0.0.1 by default */
  metrics: { port: number | undefined; host: string }
  /** KEYGATE_WORKERS: how many gateway processes serve the port (1: this process alone) */
  workers: WorkerCount
}

export interface WorkerCount {
  /** gateway processes to run; 1 means no cluster at all */
  count: number
  /** what was asked for: a number, or `auto` (given, or the NODE_ENV=production default) */
  requested: number | 'auto'
}

export interface ServerLimits {
  headersTimeoutMs: number
  requestTimeoutMs: number
  keepAliveTimeoutMs: number
  shutdownGraceMs: number
}

export interface RouteDefaults {
  upstream: string
  bodyLimit: number
  timeoutMs: number
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

export const USERNAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/

/**
 * `name:password,name2:password2`; a password may hold `:` but not `,`. Errors name an entry by
 * its number only: a mistyped entry may well hold a password, which must not reach a log.
 */
export function parseBootstrapUsers (text: string | undefined): BootstrapUser[] {
  if (text === undefined || text.trim() === '') return []
  return text.split(',').map((entry, index) => {
    const colon = entry.indexOf(':')
    const username = colon === -1 ? '' : entry.slice(0, colon).trim()
    const password = colon === -1 ? '' : entry.slice(colon + 1)
    if (colon === -1 || password.length === 0) {
      throw new ConfigError(`KEYGATE_BOOTSTRAP_USERS: entry ${index + 1} is not name:password (a password may not contain ",")`)
    }
    if (!USERNAME_PATTERN.test(username)) {
      throw new ConfigError(`KEYGATE_BOOTSTRAP_USERS: entry ${index + 1} has no valid username (letters, digits, . _ @ -, at most 64, starting with a letter or digit)`)
    }
    return { username, password }
  })
}

/** Values that may hold secrets are never quoted back in an error. */
const SECRET_VARIABLES = new Set(['REDIS_URL', 'KEYGATE_BOOTSTRAP_USERS', 'KEYGATE_REDIS_PASSWORD', 'KEYGATE_REDIS_SENTINEL_PASSWORD',
  'KEYGATE_REDIS_SENTINELS', 'KEYGATE_REDIS_CLUSTER_NODES'])

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

/**
 * Which Redis, if any: REDIS_URL (one node), KEYGATE_REDIS_SENTINELS (with its master name) or
 * KEYGATE_REDIS_CLUSTER_NODES, exactly one of them. Errors name variables, never their values.
 */
function redisTopologyFrom (e: Env): RedisTopology | undefined {
  const modes = (['REDIS_URL', 'KEYGATE_REDIS_SENTINELS', 'KEYGATE_REDIS_CLUSTER_NODES'] as const).filter((name) => e[name] !== undefined)
  if (modes.length > 1) {
    throw new ConfigError(`${modes.join(' and ')} are set: set exactly one of REDIS_URL (one Redis), KEYGATE_REDIS_SENTINELS (Redis Sentinel) ` +
      'or KEYGATE_REDIS_CLUSTER_NODES (Redis Cluster)')
  }
  const mode = modes[0]
  const needs = (name: keyof Env, what: string): void => {
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
      throw new ConfigError('KEYGATE_REDIS_SENTINEL_MASTER: required with KEYGATE_REDIS_SENTINELS: the master name the sentinels monitor (`sentinel monitor NAME ...`)')
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
    // keygate writes its own hash tags (store/redis.ts); a brace in the prefix would move them.
    if (e.KEYGATE_REDIS_PREFIX !== undefined && /[{}]/.test(e.KEYGATE_REDIS_PREFIX)) {
      throw new ConfigError('KEYGATE_REDIS_PREFIX: must not contain { or } with KEYGATE_REDIS_CLUSTER_NODES: keygate places its own hash tags in Redis Cluster')
    }
    return { mode: 'cluster', nodes: parseRedisNodes('KEYGATE_REDIS_CLUSTER_NODES', e.KEYGATE_REDIS_CLUSTER_NODES as string, DEFAULT_REDIS_PORT), ...credentials }
  }
  return undefined
}

/** Reads and checks the environment; throws a ConfigError naming the variable and what is allowed. */
export function loadConfig (env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const raw: Record<string, unknown> = {}
  for (const name of ENV_VARIABLES) {
    const value = env[name]
    if (value !== undefined && value !== '') raw[name] = value
  }
  const converted = Value.Convert(EnvSchema, { ...raw })
  const first = Value.Errors(EnvSchema, converted).First()
  if (first !== undefined) {
    const name = first.path.replace(/^\//, '')
    const shown = SECRET_VARIABLES.has(name) ? 'the value given' : JSON.stringify(raw[name])
    throw new ConfigError(`${name}: ${shown} is not allowed: ${first.message}`)
  }
  const e = converted as Env
  const upstreamPort = e.UPSTREAM_PORT ?? DEFAULT_UPSTREAM_PORT
  const upstream = e.UPSTREAM_URL ?? `http://127.0.0.1:${upstreamPort}`
  const bodyLimit = e.KEYGATE_BODY_LIMIT ?? DEFAULT_BODY_LIMIT
  const timeoutMs = e.KEYGATE_UPSTREAM_TIMEOUT_MS ?? DEFAULT_UPSTREAM_TIMEOUT_MS
  const redisTopology = redisTopologyFrom(e)
  const workers = resolveWorkers(e.KEYGATE_WORKERS, env.NODE_ENV, e.REDIS_URL !== undefined || redisTopology !== undefined)
  // Every worker would open its own listener on the one metrics port, and a scrape would reach
  // whichever worker node:cluster hands it to: counters would jump between scrapes.
  if (workers.count > 1 && e.KEYGATE_METRICS_PORT !== undefined) {
    throw new ConfigError(`KEYGATE_METRICS_PORT: metrics are per process and ${workers.count} workers would share one port; run with KEYGATE_WORKERS=1 (several gateways behind a balancer, each scraped), or without KEYGATE_METRICS_PORT`)
  }
  return {
    port: e.PORT ?? DEFAULT_PORT,
    host: e.HOST ?? DEFAULT_HOST,
    redisUrl: e.REDIS_URL,
    redisTopology,
    redisPrefix: e.KEYGATE_REDIS_PREFIX ?? DEFAULT_REDIS_PREFIX,
    redisCommandTimeoutMs: e.KEYGATE_REDIS_TIMEOUT_MS ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
    bootstrapUsers: parseBootstrapUsers(e.KEYGATE_BOOTSTRAP_USERS),
    jwt: {
      keyFile: e.KEYGATE_JWT_KEY_FILE,
      issuer: e.KEYGATE_JWT_ISSUER ?? 'keygate',
      audience: e.KEYGATE_JWT_AUDIENCE ?? 'keygate',
      ttlSeconds: e.KEYGATE_TOKEN_TTL_SECONDS ?? DEFAULT_TOKEN_TTL_SECONDS
    },
    bodyLimit,
    keyCacheSize: e.KEYGATE_KEY_CACHE_SIZE ?? DEFAULT_KEY_CACHE_SIZE,
    logLevel: e.LOG_LEVEL ?? 'info',
    login: {
      ...(e.KEYGATE_LOGIN_MAX_FAILURES_PER_USER !== undefined && { maxFailuresPerUser: e.KEYGATE_LOGIN_MAX_FAILURES_PER_USER }),
      ...(e.KEYGATE_LOGIN_MAX_FAILURES_PER_ADDRESS !== undefined && { maxFailuresPerAddress: e.KEYGATE_LOGIN_MAX_FAILURES_PER_ADDRESS }),
      ...(e.KEYGATE_LOGIN_WINDOW_SECONDS !== undefined && { windowSeconds: e.KEYGATE_LOGIN_WINDOW_SECONDS }),
      ...(e.KEYGATE_LOGIN_CONCURRENCY !== undefined && { concurrency: e.KEYGATE_LOGIN_CONCURRENCY }),
      ...(e.KEYGATE_LOGIN_QUEUE !== undefined && { queue: e.KEYGATE_LOGIN_QUEUE })
    },
    server: {
      headersTimeoutMs: e.KEYGATE_HEADERS_TIMEOUT_MS ?? DEFAULT_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: Math.max(e.KEYGATE_REQUEST_TIMEOUT_MS ?? DEFAULT_REQUEST_TIMEOUT_MS, e.KEYGATE_HEADERS_TIMEOUT_MS ?? DEFAULT_HEADERS_TIMEOUT_MS),
      keepAliveTimeoutMs: e.KEYGATE_KEEP_ALIVE_TIMEOUT_MS ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
      shutdownGraceMs: e.KEYGATE_SHUTDOWN_GRACE_MS ?? DEFAULT_SHUTDOWN_GRACE_MS
    },
    routeDefaults: { upstream, bodyLimit, timeoutMs },
    routesFile: e.KEYGATE_ROUTES,
    watchRoutes: e.KEYGATE_ROUTES_WATCH === 'true',
    routes: defaultRoutes({ upstream, bodyLimit, timeoutMs }),
    docs: e.KEYGATE_DOCS !== 'off',
    metrics: { port: e.KEYGATE_METRICS_PORT, host: e.KEYGATE_METRICS_HOST ?? DEFAULT_HOST },
    workers
  }
}

/**
 * KEYGATE_WORKERS: a number of processes, or `auto`, one per core (os.availableParallelism()).
 * Unset: `auto` when NODE_ENV=production (the Docker image sets it), else 1, so `npm start`, the
 * tests and a gateway started by hand stay one process. The embedded store lives inside one
 * process and cannot be shared: with it, `auto` means 1 (server.ts says so in a warning) and an
 * explicit number above 1 is refused, since the workers would each hold different users and keys.
 */
export function resolveWorkers (value: string | undefined, nodeEnv: string | undefined, onRedis: boolean, cores = availableParallelism()): WorkerCount {
  const requested = value === undefined ? (nodeEnv === 'production' ? 'auto' : 1) : value === 'auto' ? 'auto' : Number(value)
  if (requested === 'auto') return { count: onRedis ? Math.min(cores, MAX_WORKERS) : 1, requested }
  if (requested > MAX_WORKERS) throw new ConfigError(`KEYGATE_WORKERS: "${requested}" is not allowed: at most ${MAX_WORKERS}`)
  if (requested > 1 && !onRedis) {
    throw new ConfigError(`KEYGATE_WORKERS: ${requested} workers need Redis (REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES): the embedded in-memory store lives inside one process and cannot be shared between workers; set one, or KEYGATE_WORKERS=1`)
  }
  return { count: requested, requested }
}

/** A route with every optional setting at its default. */
export function route (fields: Pick<RouteConfig, 'prefix' | 'upstream' | 'auth'> & Partial<RouteConfig>, defaults: Omit<RouteDefaults, 'upstream'>): RouteConfig {
  return {
    name: fields.prefix,
    exact: false,
    methods: [...HTTP_METHODS],
    rewrite: undefined,
    bodyLimit: defaults.bodyLimit,
    timeoutMs: defaults.timeoutMs,
    identityHeaders: DEFAULT_IDENTITY_HEADERS,
    addHeaders: {},
    removeHeaders: [],
    identityToken: undefined,
    replay: 'reject',
    ...fields
  }
}

/** Without a route file: the business routes of SPEC.md, signed, to the example service. */
export function defaultRoutes (defaults: RouteDefaults): RouteConfig[] {
  return [
    route({ prefix: '/v1/clients/', upstream: defaults.upstream, auth: 'signed', methods: ['GET', 'POST'] }, defaults),
    route({ prefix: '/v1/transactions/', upstream: defaults.upstream, auth: 'signed', methods: ['GET', 'POST'] }, defaults)
  ]
}
