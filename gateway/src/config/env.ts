// One schema for the gateway's environment; the config type comes from it. Every variable is
// documented in docs/configuration.md (a test checks that the page and docker-compose name the same ones).
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { CLIENT_ADDRESS_HEADERS } from '../lib/client-address.js'
import { LOG_FORMATS } from '../lib/log-format.js'
import { parseBootstrapUsers } from './bootstrap-users.js'
import { ConfigError } from './config-error.js'
import type { GatewayConfig } from './gateway-config.js'
import { adminConfigFrom, decisionConfigFrom, DEFAULT_HOST, MAX_ADMIN_TOKEN_LENGTH, MIN_ADMIN_TOKEN_LENGTH } from './listeners.js'
import { redisTopologyFrom } from './redis.js'
import { TRACE_PARENT_POLICIES, tracingSettingsFrom } from './tracing.js'
import { clientAddressFrom } from './trusted-proxies.js'
import { MAX_WORKERS, resolveWorkers } from './workers.js'

// what the rest of keygate imports from here: the configuration's types and its error
export { ConfigError } from './config-error.js'
export type { GatewayConfig, RouteDefaults, ServerLimits, UpstreamLimits } from './gateway-config.js'
export type { AdminConfig, DecisionConfig } from './listeners.js'

export const DEFAULT_PORT = 8080
export const DEFAULT_UPSTREAM_PORT = 8081
export const DEFAULT_BODY_LIMIT = 1024 * 1024
/**
 * request bodies buffered at once, all requests of a process together: by default this many
 * bodies of KEYGATE_BODY_LIMIT, and never less than DEFAULT_BODY_MEMORY_FLOOR
 */
export const DEFAULT_BODY_MEMORY_BODIES = 64
export const DEFAULT_BODY_MEMORY_FLOOR = 16 * 1024 * 1024
export const DEFAULT_TOKEN_TTL_SECONDS = 15 * 60
export const DEFAULT_REDIS_PREFIX = 'keygate:'
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500
export const DEFAULT_KEY_CACHE_SIZE = 10_000
/** usage analytics: a flush every 5 s, at most 50,000 distinct (key, user, route, outcome) per flush interval */
export const DEFAULT_USAGE_FLUSH_MS = 5000
export const DEFAULT_USAGE_MAX_SERIES = 50_000
/** active API keys per user: a person or service has a handful (a few devices, a rotation under way) */
export const DEFAULT_MAX_KEYS_PER_USER = 20
/**
 * key registrations per user (GCRA: a burst of this many, then one every 60 s): far above what a
 * person or a rotating service does, far below a loop that registers and revokes to fill the store
 */
export const DEFAULT_KEY_REGISTRATIONS_PER_HOUR = 60
/** and per day: what the store can grow by per user, at most (revoked keys shrink to tombstones, which stay) */
export const DEFAULT_KEY_REGISTRATIONS_PER_DAY = 200
/** a revoked key is kept whole this long (for the owner's list and the operator), then as a tombstone */
export const DEFAULT_REVOKED_KEY_RETENTION_DAYS = 30
/**
 * Password hashes: scrypt with N = 2^logN, r = 8, p = 1. 17 is OWASP's recommended cost (128 MiB and
 * ~0.3 s of a core per hash); each step down halves what a guess costs an attacker who has the
 * hashes. Every hash carries its own cost, so hashes written at any cost in this range verify.
 */
export const SCRYPT_LOG_N = 17
export const SCRYPT_LOG_N_MIN = 14
export const SCRYPT_LOG_N_MAX = 20
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000
/** keep-alive connections per upstream origin: at most this many requests are sent to it at once */
export const DEFAULT_UPSTREAM_CONNECTIONS = 128
/**
 * requests waiting for one of those connections, per origin: one more round of the upstream's work
 * (a waiting request waits about one upstream answer), and each holds its buffered body, so the
 * worst case is this times the body limit (128 MiB at 1 MiB); past it, 503 UPSTREAM_BUSY at once
 */
export const DEFAULT_UPSTREAM_MAX_PENDING = 128
/** an upstream that accepts no connection within this: 502 UPSTREAM_UNAVAILABLE, nothing sent */
export const DEFAULT_UPSTREAM_CONNECT_TIMEOUT_MS = 5_000
/** a client must send its headers within this (slowloris) */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000
/** and its whole request within this */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** an idle keep-alive connection is closed after this (longer than a load balancer's 60 s) */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 72_000
/** on SIGTERM, in-flight requests get this long to finish before the process exits anyway */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000
/** Node's own limit, stated here so docs/errors.md and the 431 answer agree */
export const MAX_HEADER_BYTES = 16 * 1024
/** the largest body limit a route (or KEYGATE_BODY_LIMIT) may set: 1 GiB */
export const MAX_BODY_LIMIT = 1024 * 1024 * 1024

const Port = Type.Integer({ minimum: 0, maximum: 65535 })

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
/** The spellings of every on/off variable: one set, so that no variable takes a word another refuses. */
export const SWITCH_VALUES = ['true', 'false', 'on', 'off'] as const
const Switch = Type.Union(SWITCH_VALUES.map((value) => Type.Literal(value)))
const isOn = (value: typeof SWITCH_VALUES[number] | undefined, byDefault: boolean): boolean =>
  value === undefined ? byDefault : value === 'true' || value === 'on'

/** The environment, as strings become typed values. Names are the variables' own. */
/**
 * A trusted issuer's name (KEYGATE_OIDC_NAME, an issuers file's `name`): it prefixes its users'
 * names in keygate (`corp:<subject>`, users/idp-users.ts), so it never holds ":"
 */
export const ISSUER_NAME = '[a-z0-9][a-z0-9-]{0,31}'
export const ISSUER_NAME_RULE = 'lower-case letters, digits and "-", at most 32, starting with a letter or digit'

export const EnvSchema = Type.Object({
  PORT: Type.Optional(Port),
  HOST: Type.Optional(Type.String({ minLength: 1 })),
  // checked entry by entry in config/trusted-proxies.ts, which names the entry it refuses
  KEYGATE_TRUSTED_PROXIES: Type.Optional(Type.String()),
  KEYGATE_TRUSTED_PROXY_HEADER: Type.Optional(Type.Union(CLIENT_ADDRESS_HEADERS.map((name) => Type.Literal(name)))),
  UPSTREAM_PORT: Type.Optional(Port),
  UPSTREAM_URL: Type.Optional(Type.String({ pattern: '^https?://', allowed: 'an http:// or https:// URL' })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^[Rr][Ee][Dd][Ii][Ss][Ss]?://', allowed: 'a redis:// or rediss:// URL' })),
  KEYGATE_REDIS_SENTINELS: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_SENTINEL_MASTER: Type.Optional(Type.String({ minLength: 1, maxLength: 200, allowed: 'a name of at most 200 characters' })),
  KEYGATE_REDIS_SENTINEL_PASSWORD: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_CLUSTER_NODES: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_USERNAME: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_PASSWORD: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_REDIS_PREFIX: Type.Optional(Type.String({ minLength: 1, maxLength: 100, allowed: 'a prefix of at most 100 characters' })),
  KEYGATE_REDIS_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 10, maximum: 60_000 })),
  KEYGATE_BOOTSTRAP_USERS: Type.Optional(Type.String()),
  KEYGATE_JWT_KEY_FILE: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_JWT_ISSUER: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_JWT_AUDIENCE: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_TOKEN_TTL_SECONDS: Type.Optional(Type.Integer({ minimum: 30, maximum: 24 * 3600 })),
  KEYGATE_BODY_LIMIT: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_BODY_LIMIT })),
  KEYGATE_BODY_MEMORY_LIMIT: Type.Optional(Type.Integer({ minimum: 1024, maximum: 64 * 1024 * 1024 * 1024 })),
  KEYGATE_KEY_CACHE_SIZE: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000_000 })),
  KEYGATE_MAX_KEYS_PER_USER: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
  KEYGATE_KEY_REGISTRATIONS_PER_HOUR: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  KEYGATE_KEY_REGISTRATIONS_PER_DAY: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000 })),
  KEYGATE_REVOKED_KEY_RETENTION_DAYS: Type.Optional(Type.Integer({ minimum: 0, maximum: 36_500 })),
  KEYGATE_UPSTREAM_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
  KEYGATE_UPSTREAM_CONNECTIONS: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
  KEYGATE_UPSTREAM_MAX_PENDING: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000 })),
  KEYGATE_UPSTREAM_CONNECT_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 1, maximum: 600_000 })),
  KEYGATE_HEADERS_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 100, maximum: 600_000 })),
  KEYGATE_REQUEST_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
  KEYGATE_KEEP_ALIVE_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
  KEYGATE_SHUTDOWN_GRACE_MS: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000 })),
  KEYGATE_PID_FILE: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_LOGIN_MAX_FAILURES_PER_USER: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  KEYGATE_LOGIN_MAX_FAILURES_PER_ADDRESS: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  KEYGATE_LOGIN_WINDOW_SECONDS: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400 })),
  KEYGATE_LOGIN_CONCURRENCY: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
  KEYGATE_PASSWORD_SCRYPT_LOG_N: Type.Optional(Type.Integer({ minimum: SCRYPT_LOG_N_MIN, maximum: SCRYPT_LOG_N_MAX })),
  KEYGATE_LOGIN_QUEUE: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000 })),
  KEYGATE_SIGNATURE_FAILURE_LIMIT: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000 })),
  KEYGATE_SIGNATURE_FAILURE_WINDOW_SECONDS: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400 })),
  KEYGATE_SIGNATURE_FAILURE_DELAY_MS: Type.Optional(Type.Integer({ minimum: 0, maximum: 60_000 })),
  KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000 })),
  // at most auth/signature-budget.ts's MAX_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES (config does not import the auth layer)
  KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  KEYGATE_ROUTES: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_ISSUERS: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_AGENT_DIRECTORIES: Type.Optional(Type.String({ minLength: 1 })),
  // DPoP (RFC 9449; docs/dpop.md): the algorithm names are checked where proofs are (dpop/proof.ts), which config does not import
  KEYGATE_DPOP_ALGORITHMS: Type.Optional(Type.String({ minLength: 1, maxLength: 200, allowed: 'JWS algorithm names, comma-separated' })),
  KEYGATE_DPOP_IAT_WINDOW_SECONDS: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
  KEYGATE_DPOP_NONCE_SECONDS: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400 })),
  KEYGATE_OIDC_ISSUER: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, allowed: 'the issuer\'s URL, at most 2048 characters' })),
  KEYGATE_OIDC_AUDIENCE: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, allowed: 'audiences, comma-separated, at most 4096 characters' })),
  KEYGATE_OIDC_NAME: Type.Optional(Type.String({ pattern: `^${ISSUER_NAME}$`, allowed: ISSUER_NAME_RULE })),
  KEYGATE_OIDC_JWKS_URI: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, allowed: 'a URL of at most 2048 characters' })),
  KEYGATE_OIDC_PORTAL_CLIENT_ID: Type.Optional(Type.String({ minLength: 1, maxLength: 256, allowed: 'a client id of 1 to 256 characters' })),
  KEYGATE_OIDC_PORTAL_CLIENT_SECRET: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, allowed: 'a client secret of 1 to 1024 characters' })),
  KEYGATE_ROUTES_WATCH: Type.Optional(Switch),
  KEYGATE_DOCS: Type.Optional(Switch),
  KEYGATE_USAGE_ANALYTICS: Type.Optional(Switch),
  KEYGATE_USAGE_FLUSH_MS: Type.Optional(Type.Integer({ minimum: 100, maximum: 60_000 })),
  KEYGATE_USAGE_MAX_SERIES: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  // "off", or a path: checked by portalPrefixFrom, whose error says what it takes
  KEYGATE_PORTAL_PREFIX: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_STRICT_REQUEST_LINE: Type.Optional(Switch),
  KEYGATE_METRICS_PORT: Type.Optional(Port),
  KEYGATE_METRICS_HOST: Type.Optional(Type.String({ minLength: 1 })),
  KEYGATE_DECISION_PORT: Type.Optional(Port),
  KEYGATE_DECISION_HOST: Type.Optional(Type.String({ minLength: 1 })),
  // checked entry by entry in config/trusted-proxies.ts, which names the entry it refuses
  KEYGATE_DECISION_TRUSTED_PROXIES: Type.Optional(Type.String()),
  KEYGATE_ADMIN_PORT: Type.Optional(Port),
  KEYGATE_ADMIN_HOST: Type.Optional(Type.String({ minLength: 1 })),
  // visible ASCII only: it travels in an Authorization header, and a space or a line break in it is a copy slip
  KEYGATE_ADMIN_TOKEN: Type.Optional(Type.String({
    minLength: MIN_ADMIN_TOKEN_LENGTH,
    maxLength: MAX_ADMIN_TOKEN_LENGTH,
    pattern: '^[\\x21-\\x7E]+$',
    allowed: `${MIN_ADMIN_TOKEN_LENGTH} to ${MAX_ADMIN_TOKEN_LENGTH} visible ASCII characters, no spaces (e.g. openssl rand -hex 32)`
  })),
  // a string, checked here and in resolveWorkers: a number schema would turn "1.5" into 1
  KEYGATE_WORKERS: Type.Optional(Type.String({ pattern: '^(auto|[1-9][0-9]*)$', allowed: `auto, or a number of processes from 1 to ${MAX_WORKERS}` })),
  LOG_LEVEL: Type.Optional(Type.Union(LOG_LEVELS.map((level) => Type.Literal(level)))),
  LOG_FORMAT: Type.Optional(Type.Union(LOG_FORMATS.map((format) => Type.Literal(format)))),
  KEYGATE_TRACE_PARENT: Type.Optional(Type.Union(TRACE_PARENT_POLICIES.map((policy) => Type.Literal(policy))))
})
export type Env = Static<typeof EnvSchema>
export const ENV_VARIABLES = Object.keys(EnvSchema.properties) as Array<keyof Env>

export const DEFAULT_PORTAL_PREFIX = '/portal'
/** A path of plain segments: no dots alone, no encoded characters, no trailing slash */
const PORTAL_PREFIX = /^(?:\/[a-z0-9][a-z0-9_-]*)+$/
/** the paths of keygate's own that the portal may not sit in or over */
const OWN_PATHS = ['/v1', '/docs', '/.well-known', '/healthz', '/readyz']

/** KEYGATE_PORTAL_PREFIX: "off", or where the developer portal lives (default /portal). */
export function portalPrefixFrom (value: string | undefined): string | undefined {
  if (value === undefined) return DEFAULT_PORTAL_PREFIX
  if (value === 'off') return undefined
  const clash = OWN_PATHS.find((own) => value === own || value.startsWith(`${own}/`) || own.startsWith(`${value}/`))
  if (!PORTAL_PREFIX.test(value) || clash !== undefined) {
    throw new ConfigError(`KEYGATE_PORTAL_PREFIX: ${JSON.stringify(value)} is not allowed: ` +
      (clash === undefined ? '' : `it overlaps keygate's own ${clash}; `) +
      'use "off" or a path of lower-case segments (a-z, 0-9, - and _) without a trailing slash, such as /portal or /developers')
  }
  return value
}

/** Values that may hold secrets are never quoted back in an error. */
const SECRET_VARIABLES = new Set(['REDIS_URL', 'KEYGATE_BOOTSTRAP_USERS', 'KEYGATE_REDIS_PASSWORD', 'KEYGATE_REDIS_SENTINEL_PASSWORD',
  'KEYGATE_REDIS_SENTINELS', 'KEYGATE_REDIS_CLUSTER_NODES', 'KEYGATE_ADMIN_TOKEN'])

/**
 * What a variable takes, in words, for the error that refuses a value: the values of a list, the
 * range of a number, or the schema's own `allowed`. TypeBox's messages ("Expected union value")
 * name none of that.
 */
export function allowedValues (schema: TSchema): string | undefined {
  if (typeof schema.allowed === 'string') return schema.allowed
  const values = Array.isArray(schema.anyOf) ? (schema.anyOf as TSchema[]).map((member) => member.const as unknown) : []
  if (values.length > 0 && values.every((value) => typeof value === 'string')) {
    return `one of ${values.slice(0, -1).join(', ')} or ${String(values.at(-1))}`
  }
  if (schema.type === 'integer' && typeof schema.minimum === 'number' && typeof schema.maximum === 'number') {
    return `a whole number from ${schema.minimum} to ${schema.maximum}`
  }
  return undefined
}

/** Reads and checks the environment; throws a ConfigError naming the variable and what is allowed. */
/** KEYGATE_ISSUERS, or the KEYGATE_OIDC_* of one issuer (the issuer and its audience both), not both. */
function identityProvidersFrom (e: Env): GatewayConfig['identityProviders'] {
  const oidc = [
    e.KEYGATE_OIDC_ISSUER, e.KEYGATE_OIDC_AUDIENCE, e.KEYGATE_OIDC_NAME, e.KEYGATE_OIDC_JWKS_URI,
    e.KEYGATE_OIDC_PORTAL_CLIENT_ID, e.KEYGATE_OIDC_PORTAL_CLIENT_SECRET
  ].some((v) => v !== undefined)
  if (e.KEYGATE_ISSUERS !== undefined && oidc) {
    throw new ConfigError('KEYGATE_ISSUERS and KEYGATE_OIDC_* both name trusted issuers: put every issuer in the issuers file, ' +
      'or use the KEYGATE_OIDC_* variables for one')
  }
  if (!oidc) return { file: e.KEYGATE_ISSUERS, oidc: undefined }
  if (e.KEYGATE_OIDC_ISSUER === undefined || e.KEYGATE_OIDC_AUDIENCE === undefined) {
    throw new ConfigError(`${e.KEYGATE_OIDC_ISSUER === undefined ? 'KEYGATE_OIDC_ISSUER' : 'KEYGATE_OIDC_AUDIENCE'} is not set: a trusted issuer needs ` +
      'both its issuer URL (the iss of its tokens) and the audience its tokens carry for keygate')
  }
  if (e.KEYGATE_OIDC_PORTAL_CLIENT_SECRET !== undefined && e.KEYGATE_OIDC_PORTAL_CLIENT_ID === undefined) {
    throw new ConfigError('KEYGATE_OIDC_PORTAL_CLIENT_SECRET is set without KEYGATE_OIDC_PORTAL_CLIENT_ID: the secret is of the portal\'s client at the issuer')
  }
  const secret = e.KEYGATE_OIDC_PORTAL_CLIENT_SECRET
  const oidcIssuer = {
    issuer: e.KEYGATE_OIDC_ISSUER,
    audience: e.KEYGATE_OIDC_AUDIENCE,
    name: e.KEYGATE_OIDC_NAME,
    jwksUri: e.KEYGATE_OIDC_JWKS_URI,
    ...(e.KEYGATE_OIDC_PORTAL_CLIENT_ID !== undefined && { portalClientId: e.KEYGATE_OIDC_PORTAL_CLIENT_ID }),
    ...(secret !== undefined && { portalClientSecret: () => secret })
  }
  return { file: undefined, oidc: oidcIssuer }
}

export function loadConfig (env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const raw: Record<string, unknown> = {}
  for (const name of ENV_VARIABLES) {
    const value = env[name]
    if (value !== undefined && value !== '') raw[name] = value
  }
  const refuse = (name: string, schema: TSchema, message: string): ConfigError => {
    const shown = SECRET_VARIABLES.has(name) ? 'the value given' : JSON.stringify(raw[name])
    const allowed = allowedValues(schema)
    return new ConfigError(`${name}: ${shown} is not allowed: ${allowed === undefined ? message : `use ${allowed}`}`)
  }
  // TypeBox's conversion cuts "1.5" (or "1e3") down to a whole number: a whole number is digits only
  for (const [name, value] of Object.entries(raw)) {
    const schema = EnvSchema.properties[name as keyof Env] as TSchema
    if (schema.type === 'integer' && !/^[0-9]{1,16}$/.test(String(value))) throw refuse(name, schema, 'a whole number')
  }
  const converted = Value.Convert(EnvSchema, { ...raw })
  const first = Value.Errors(EnvSchema, converted).First()
  if (first !== undefined) throw refuse(first.path.replace(/^\//, ''), first.schema, first.message)
  const e = converted as Env
  const upstreamPort = e.UPSTREAM_PORT ?? DEFAULT_UPSTREAM_PORT
  const upstream = e.UPSTREAM_URL ?? `http://127.0.0.1:${upstreamPort}`
  const bodyLimit = e.KEYGATE_BODY_LIMIT ?? DEFAULT_BODY_LIMIT
  const portalPrefix = portalPrefixFrom(e.KEYGATE_PORTAL_PREFIX)
  const timeoutMs = e.KEYGATE_UPSTREAM_TIMEOUT_MS ?? DEFAULT_UPSTREAM_TIMEOUT_MS
  const redisTopology = redisTopologyFrom(e)
  const workers = resolveWorkers(e.KEYGATE_WORKERS, env.NODE_ENV, e.REDIS_URL !== undefined || redisTopology !== undefined)
  return {
    port: e.PORT ?? DEFAULT_PORT,
    host: e.HOST ?? DEFAULT_HOST,
    clientAddress: clientAddressFrom(e),
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
    bodyMemoryLimit: e.KEYGATE_BODY_MEMORY_LIMIT ?? Math.max(DEFAULT_BODY_MEMORY_BODIES * bodyLimit, DEFAULT_BODY_MEMORY_FLOOR),
    keyCacheSize: e.KEYGATE_KEY_CACHE_SIZE ?? DEFAULT_KEY_CACHE_SIZE,
    maxKeysPerUser: e.KEYGATE_MAX_KEYS_PER_USER ?? DEFAULT_MAX_KEYS_PER_USER,
    keyRegistrationsPerHour: e.KEYGATE_KEY_REGISTRATIONS_PER_HOUR ?? DEFAULT_KEY_REGISTRATIONS_PER_HOUR,
    keyRegistrationsPerDay: e.KEYGATE_KEY_REGISTRATIONS_PER_DAY ?? DEFAULT_KEY_REGISTRATIONS_PER_DAY,
    revokedKeyRetentionDays: e.KEYGATE_REVOKED_KEY_RETENTION_DAYS ?? DEFAULT_REVOKED_KEY_RETENTION_DAYS,
    passwordScryptLogN: e.KEYGATE_PASSWORD_SCRYPT_LOG_N ?? SCRYPT_LOG_N,
    logLevel: e.LOG_LEVEL ?? 'info',
    logFormat: e.LOG_FORMAT,
    login: {
      ...(e.KEYGATE_LOGIN_MAX_FAILURES_PER_USER !== undefined && { maxFailuresPerUser: e.KEYGATE_LOGIN_MAX_FAILURES_PER_USER }),
      ...(e.KEYGATE_LOGIN_MAX_FAILURES_PER_ADDRESS !== undefined && { maxFailuresPerAddress: e.KEYGATE_LOGIN_MAX_FAILURES_PER_ADDRESS }),
      ...(e.KEYGATE_LOGIN_WINDOW_SECONDS !== undefined && { windowSeconds: e.KEYGATE_LOGIN_WINDOW_SECONDS }),
      ...(e.KEYGATE_LOGIN_CONCURRENCY !== undefined && { concurrency: e.KEYGATE_LOGIN_CONCURRENCY }),
      ...(e.KEYGATE_LOGIN_QUEUE !== undefined && { queue: e.KEYGATE_LOGIN_QUEUE })
    },
    signatureFailures: {
      ...(e.KEYGATE_SIGNATURE_FAILURE_LIMIT !== undefined && { limit: e.KEYGATE_SIGNATURE_FAILURE_LIMIT }),
      ...(e.KEYGATE_SIGNATURE_FAILURE_WINDOW_SECONDS !== undefined && { windowSeconds: e.KEYGATE_SIGNATURE_FAILURE_WINDOW_SECONDS }),
      ...(e.KEYGATE_SIGNATURE_FAILURE_DELAY_MS !== undefined && { delayMs: e.KEYGATE_SIGNATURE_FAILURE_DELAY_MS }),
      ...(e.KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT !== undefined && { attackedKeyLimit: e.KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT }),
      ...(e.KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES !== undefined && { attackedKeyAddresses: e.KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES })
    },
    server: {
      headersTimeoutMs: e.KEYGATE_HEADERS_TIMEOUT_MS ?? DEFAULT_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: Math.max(e.KEYGATE_REQUEST_TIMEOUT_MS ?? DEFAULT_REQUEST_TIMEOUT_MS, e.KEYGATE_HEADERS_TIMEOUT_MS ?? DEFAULT_HEADERS_TIMEOUT_MS),
      keepAliveTimeoutMs: e.KEYGATE_KEEP_ALIVE_TIMEOUT_MS ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
      shutdownGraceMs: e.KEYGATE_SHUTDOWN_GRACE_MS ?? DEFAULT_SHUTDOWN_GRACE_MS,
      strictRequestLine: isOn(e.KEYGATE_STRICT_REQUEST_LINE, false)
    },
    routeDefaults: { upstream, bodyLimit, timeoutMs, ...(portalPrefix !== undefined && { ownPrefixes: [portalPrefix] }) },
    upstreams: {
      connections: e.KEYGATE_UPSTREAM_CONNECTIONS ?? DEFAULT_UPSTREAM_CONNECTIONS,
      maxPending: e.KEYGATE_UPSTREAM_MAX_PENDING ?? DEFAULT_UPSTREAM_MAX_PENDING,
      connectTimeoutMs: e.KEYGATE_UPSTREAM_CONNECT_TIMEOUT_MS ?? DEFAULT_UPSTREAM_CONNECT_TIMEOUT_MS
    },
    routesFile: e.KEYGATE_ROUTES,
    pidFile: e.KEYGATE_PID_FILE,
    agentDirectoriesFile: e.KEYGATE_AGENT_DIRECTORIES,
    dpop: {
      ...(e.KEYGATE_DPOP_ALGORITHMS !== undefined && { algorithms: e.KEYGATE_DPOP_ALGORITHMS.split(',').map((alg) => alg.trim()).filter((alg) => alg !== '') }),
      ...(e.KEYGATE_DPOP_IAT_WINDOW_SECONDS !== undefined && { iatWindowSeconds: e.KEYGATE_DPOP_IAT_WINDOW_SECONDS }),
      ...(e.KEYGATE_DPOP_NONCE_SECONDS !== undefined && { nonceSeconds: e.KEYGATE_DPOP_NONCE_SECONDS })
    },
    identityProviders: identityProvidersFrom(e),
    watchRoutes: isOn(e.KEYGATE_ROUTES_WATCH, false),
    docs: isOn(e.KEYGATE_DOCS, true),
    usageAnalytics: {
      enabled: isOn(e.KEYGATE_USAGE_ANALYTICS, true),
      flushMs: e.KEYGATE_USAGE_FLUSH_MS ?? DEFAULT_USAGE_FLUSH_MS,
      maxSeries: e.KEYGATE_USAGE_MAX_SERIES ?? DEFAULT_USAGE_MAX_SERIES
    },
    portalPrefix,
    metrics: { port: e.KEYGATE_METRICS_PORT, host: e.KEYGATE_METRICS_HOST ?? DEFAULT_HOST },
    admin: adminConfigFrom(e, { port: e.PORT ?? DEFAULT_PORT, host: e.HOST ?? DEFAULT_HOST },
      { port: e.KEYGATE_METRICS_PORT, host: e.KEYGATE_METRICS_HOST ?? DEFAULT_HOST }),
    decision: decisionConfigFrom(e, [
      { name: 'PORT', port: e.PORT ?? DEFAULT_PORT, host: e.HOST ?? DEFAULT_HOST },
      { name: 'KEYGATE_METRICS_PORT', port: e.KEYGATE_METRICS_PORT, host: e.KEYGATE_METRICS_HOST ?? DEFAULT_HOST },
      { name: 'KEYGATE_ADMIN_PORT', port: e.KEYGATE_ADMIN_PORT, host: e.KEYGATE_ADMIN_HOST ?? DEFAULT_HOST }
    ]),
    workers,
    tracing: tracingSettingsFrom(env, e.KEYGATE_TRACE_PARENT)
  }
}
