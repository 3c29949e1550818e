// The gateway's configuration as the rest of keygate reads it: what config/env.ts makes of the
// environment (loadConfig), each field named after the variable it comes from.
import type { LogFormat } from '../lib/log-format.js'
import type { BootstrapUser } from './bootstrap-users.js'
import type { AdminConfig, DecisionConfig } from './listeners.js'
import type { RedisTopology } from './redis.js'
import type { TracingSettings } from './tracing.js'
import type { ClientAddressConfig } from './trusted-proxies.js'
import type { WorkerCount } from './workers.js'

export interface GatewayConfig {
  port: number
  host: string
  /** KEYGATE_TRUSTED_PROXIES, KEYGATE_TRUSTED_PROXY_HEADER: who may say who the client is */
  clientAddress: ClientAddressConfig
  /** one Redis node; unset (and no redisTopology): the embedded in-memory store */
  redisUrl: string | undefined
  /** Redis through Sentinel or a Redis Cluster; set only when redisUrl is not */
  redisTopology: RedisTopology | undefined
  redisPrefix: string
  redisCommandTimeoutMs: number
  bootstrapUsers: BootstrapUser[]
  jwt: { keyFile: string | undefined; issuer: string; audience: string; ttlSeconds: number }
  bodyLimit: number
  /**
   * KEYGATE_BODY_MEMORY_LIMIT: bytes of request bodies buffered at once, every request of this
   * process together; past it, 503 BODY_MEMORY_EXHAUSTED at once
   */
  bodyMemoryLimit: number
  keyCacheSize: number
  /** KEYGATE_MAX_KEYS_PER_USER: active (neither revoked nor expired) keys a user may hold */
  maxKeysPerUser: number
  /** KEYGATE_KEY_REGISTRATIONS_PER_HOUR and _PER_DAY: key registrations per user, at every gateway together */
  keyRegistrationsPerHour: number
  keyRegistrationsPerDay: number
  /** KEYGATE_REVOKED_KEY_RETENTION_DAYS: a revoked key is kept whole this long, then as a tombstone */
  revokedKeyRetentionDays: number
  /** KEYGATE_PASSWORD_SCRYPT_LOG_N: the cost of the password hashes this process writes (scrypt's N = 2^this) */
  passwordScryptLogN: number
  logLevel: string
  /** LOG_FORMAT: json or pretty; unset, pretty when stdout is a terminal (lib/log-format.ts) */
  logFormat: LogFormat | undefined
  server: ServerLimits
  /** login brute-force limits and concurrency; unset fields take users/login-guard.ts's defaults */
  login: {
    maxFailuresPerUser?: number
    maxFailuresPerAddress?: number
    windowSeconds?: number
    concurrency?: number
    queue?: number
  }
  /** failed signature checks per client address; unset fields take auth/signature-budget.ts's defaults */
  signatureFailures: {
    limit?: number
    windowSeconds?: number
    delayMs?: number
    attackedKeyLimit?: number
    attackedKeyAddresses?: number
  }
  /** route defaults from the environment, for route files */
  routeDefaults: RouteDefaults
  /** the upstream queue, per upstream origin and per process (each worker has its own) */
  upstreams: UpstreamLimits
  /** KEYGATE_ROUTES: the route file; unset: the built-in routes (proxy/route.ts) */
  routesFile: string | undefined
  /** KEYGATE_PID_FILE: where the process that takes the signals writes its PID (process/pid-file.ts) */
  pidFile: string | undefined
  /** KEYGATE_AGENT_DIRECTORIES: signed agents' directories pinned, or allowed on a private address (agents/agents-file.ts) */
  agentDirectoriesFile: string | undefined
  /** DPoP proofs (RFC 9449): KEYGATE_DPOP_ALGORITHMS, _IAT_WINDOW_SECONDS, _NONCE_SECONDS; unset: dpop/proof.ts's defaults */
  dpop?: { algorithms?: string[], iatWindowSeconds?: number, nonceSeconds?: number }
  /**
   * Trusted identity providers (idp/issuers.ts reads and checks them): KEYGATE_ISSUERS, an issuers
   * file, or one issuer from KEYGATE_OIDC_ISSUER and KEYGATE_OIDC_AUDIENCE; neither: none
   */
  identityProviders: {
    file: string | undefined
    oidc: {
      issuer: string
      audience: string
      name: string | undefined
      jwksUri: string | undefined
      /** KEYGATE_OIDC_PORTAL_CLIENT_ID: the portal logs in through this issuer */
      portalClientId?: string
      /** KEYGATE_OIDC_PORTAL_CLIENT_SECRET, as a function: in no JSON or log line of the configuration */
      portalClientSecret?: () => string | undefined
    } | undefined
  }
  /** reload the route file when it changes (SIGHUP always reloads) */
  watchRoutes: boolean
  /** KEYGATE_DOCS: serve the OpenAPI document at /docs/json and its page at /docs */
  docs: boolean
  /**
   * usage analytics (analytics/): KEYGATE_USAGE_ANALYTICS counts business requests by key, user,
   * route and outcome, flushed to the store every KEYGATE_USAGE_FLUSH_MS, at most
   * KEYGATE_USAGE_MAX_SERIES distinct ones per flush interval
   */
  usageAnalytics: { enabled: boolean; flushMs: number; maxSeries: number }
  /** KEYGATE_PORTAL_PREFIX: the developer portal's path on the public port (default /portal); undefined: off */
  portalPrefix: string | undefined
  /**
   * the Prometheus listener: none unless KEYGATE_METRICS_PORT is set; on 127.0.0.1 by default.
   * With workers, the primary holds it and serves every worker's metrics added up.
   */
  metrics: { port: number | undefined; host: string }
  /**
   * the admin API (admin/server.ts): none unless KEYGATE_ADMIN_PORT is set; on 127.0.0.1 by
   * default; every request needs KEYGATE_ADMIN_TOKEN. With workers, the primary holds it.
   */
  admin: AdminConfig
  /**
   * decision mode (decision/server.ts): none unless KEYGATE_DECISION_PORT is set; on 127.0.0.1 by
   * default; it believes the proxies of KEYGATE_DECISION_TRUSTED_PROXIES (else KEYGATE_TRUSTED_PROXIES)
   * only. With workers, every worker serves it.
   */
  decision: DecisionConfig
  /** KEYGATE_WORKERS: how many gateway processes serve the port (1: this process alone) */
  workers: WorkerCount
  /** OpenTelemetry traces: on only when the OTEL_* variables ask for them (config/tracing.ts) */
  tracing?: TracingSettings | undefined
}

export interface ServerLimits {
  headersTimeoutMs: number
  requestTimeoutMs: number
  keepAliveTimeoutMs: number
  shutdownGraceMs: number
  /** refuse a request line with runs of spaces (lib/request-line-tracker.ts): costs a few us per request */
  strictRequestLine: boolean
}

export interface UpstreamLimits {
  /** keep-alive connections per origin: requests sent at once */
  connections: number
  /** requests waiting for a connection, per origin; past it, 503 UPSTREAM_BUSY */
  maxPending: number
  /** an upstream that accepts no connection within this: 502 UPSTREAM_UNAVAILABLE */
  connectTimeoutMs: number
}

export interface RouteDefaults {
  upstream: string
  bodyLimit: number
  timeoutMs: number
  /** keygate's own subtrees that this configuration serves beyond the fixed ones (the portal's prefix): no route may cover one */
  ownPrefixes?: readonly string[]
}
