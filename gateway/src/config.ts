// One schema for the gateway's environment; the config type comes from it. Every variable is
// documented in the README (a test checks that the README and docker-compose name the same ones).
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

export const DEFAULT_PORT = 8080
export const DEFAULT_UPSTREAM_PORT = 8081
export const DEFAULT_HOST = '127.0.0.1'
export const DEFAULT_BODY_LIMIT = 1024 * 1024
export const DEFAULT_TOKEN_TTL_SECONDS = 15 * 60
export const DEFAULT_REDIS_PREFIX = 'keygate:'
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500
export const DEFAULT_KEY_CACHE_SIZE = 10_000
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000
/** SPEC.md §8: the timestamp tolerance is fixed by the interface, not configurable. */
export const MAX_TIMESTAMP_SKEW_MS = 15 * 60 * 1000

const Port = Type.Integer({ minimum: 0, maximum: 65535 })

/** The environment, as strings become typed values. Names are the variables' own. */
export const EnvSchema = Type.Object({
  PORT: Type.Optional(Port),
  HOST: Type.Optional(Type.String({ minLength: 1 })),
  UPSTREAM_PORT: Type.Optional(Port),
  UPSTREAM_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
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
  LOG_LEVEL: Type.Optional(Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))))
})
export type Env = Static<typeof EnvSchema>
export const ENV_VARIABLES = Object.keys(EnvSchema.properties) as Array<keyof Env>

export type AuthTier = 'signed' | 'bearer' | 'public'

/** A business route: requests under `prefix` are authenticated per `auth` and forwarded. */
export interface RouteConfig {
  prefix: string
  upstream: string
  auth: AuthTier
  methods: string[]
  bodyLimit: number
  timeoutMs: number
}

export interface BootstrapUser {
  username: string
  password: string
}

export interface GatewayConfig {
  port: number
  host: string
  /** unset: the embedded in-memory store */
  redisUrl: string | undefined
  redisPrefix: string
  redisCommandTimeoutMs: number
  bootstrapUsers: BootstrapUser[]
  jwt: { keyFile: string | undefined; issuer: string; audience: string; ttlSeconds: number }
  bodyLimit: number
  keyCacheSize: number
  logLevel: string
  routes: RouteConfig[]
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

export const USERNAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/

/** `name:password,name2:password2`; a password may hold `:` but not `,`. */
export function parseBootstrapUsers (text: string | undefined): BootstrapUser[] {
  if (text === undefined || text.trim() === '') return []
  return text.split(',').map((entry, index) => {
    const colon = entry.indexOf(':')
    const username = colon === -1 ? entry.trim() : entry.slice(0, colon).trim()
    const password = colon === -1 ? '' : entry.slice(colon + 1)
    if (!USERNAME_PATTERN.test(username)) {
      throw new ConfigError(`KEYGATE_BOOTSTRAP_USERS: entry ${index + 1}: "${username}" is not a valid username (letters, digits, . _ @ -, at most 64, starting with a letter or digit)`)
    }
    if (password.length === 0) {
      throw new ConfigError(`KEYGATE_BOOTSTRAP_USERS: entry ${index + 1} (${username}): the password is empty; write name:password`)
    }
    return { username, password }
  })
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
    throw new ConfigError(`${name}: ${JSON.stringify(raw[name])} is not allowed: ${first.message}`)
  }
  const e = converted as Env
  const upstreamPort = e.UPSTREAM_PORT ?? DEFAULT_UPSTREAM_PORT
  const upstream = e.UPSTREAM_URL ?? `http://127.0.0.1:${upstreamPort}`
  const bodyLimit = e.KEYGATE_BODY_LIMIT ?? DEFAULT_BODY_LIMIT
  const timeoutMs = e.KEYGATE_UPSTREAM_TIMEOUT_MS ?? DEFAULT_UPSTREAM_TIMEOUT_MS
  return {
    port: e.PORT ?? DEFAULT_PORT,
    host: e.HOST ?? DEFAULT_HOST,
    redisUrl: e.REDIS_URL,
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
    routes: defaultRoutes({ upstream, bodyLimit, timeoutMs })
  }
}

/** The business routes of SPEC.md, forwarded to the example clients service. */
export function defaultRoutes (opts: { upstream: string; bodyLimit: number; timeoutMs: number }): RouteConfig[] {
  return [
    { prefix: '/v1/clients/', upstream: opts.upstream, auth: 'signed', methods: ['GET', 'POST'], bodyLimit: opts.bodyLimit, timeoutMs: opts.timeoutMs }
  ]
}
