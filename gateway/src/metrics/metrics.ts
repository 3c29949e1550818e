// What keygate tells a Prometheus scraper. The hot path only bumps numbers: request and auth
// counts live in nested Maps keyed by label values (no label string is built per request), the
// caches and the store count into plain fields of their own, and everything is turned into
// prom-client metrics at scrape time (`collect`). The latency histograms observe into a series
// held per route (fast-histogram.ts). Measured: bench/metrics-overhead.ts.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import { HTTP_METHODS } from '#client/protocol'
import type { CacheStats } from '../lib/lru-cache.js'
import { FastHistogram, type Series } from './fast-histogram.js'
import { MCP_MESSAGES_METRIC, mcpMetrics, type McpMetrics } from './mcp.js'
import { OPENMETRICS_CONTENT_TYPE, openMetricsText } from './openmetrics.js'

/** what the scrape reads from the services: counters they keep themselves */
export interface MetricSources {
  keys: { readonly stats: Readonly<CacheStats> }
  tokens: { readonly stats: Readonly<CacheStats> }
  store: { readonly errors: number }
  /** the budget of failed signature checks per address (auth/signature-budget.ts) */
  signatureBudget?: { readonly stats: Readonly<{ refusals: number; exhausted: number; keysAttacked: number }> }
  /** each user's scopes (users/user-scopes.ts) */
  userScopes?: { readonly stats: Readonly<CacheStats> }
  /** usage analytics, when on (analytics/counter.ts) */
  usage?: { readonly stats: Readonly<{ overflowed: number; flushFailures: number }> }
}

/** One upstream origin's queue, as the proxy counts it (proxy/forwarder.ts). */
export interface UpstreamQueueCounts {
  /** scheme, host and port of the upstream, from the route table (never from a client) */
  readonly origin: string
  /** requests waiting for a connection now */
  readonly pending: number
  /** requests refused with 503 UPSTREAM_BUSY so far */
  readonly refused: number
}

/** A business route as the metrics label it: by its name (routes are long-lived objects, so they key a cache). */
export interface LabelledRoute {
  readonly name: string
}

export interface GatewayMetrics extends McpMetrics {
  readonly registry: Registry
  /** one finished request: its route label (see routeLabel in http/plugins/metrics.ts), method and status */
  countRequest: (route: string, method: string, status: number) => void
  /** how authentication ended: `ok`, or the catalog code that denied it */
  countAuthOutcome: (route: string, reason: string) => void
  /** the verification of one request signature (either scheme, any key type) */
  observeSignatureVerification: (seconds: number) => void
  /** from sending a request upstream to the upstream's response headers; `traceId`: a sampled request's, its bucket's exemplar */
  observeUpstreamLatency: (route: LabelledRoute, seconds: number, traceId?: string) => void
  /** a request refused with 429 by a route's rate limit counted per `by` (key, user, address) */
  countRateLimited: (route: string, by: string) => void
  /** a rate-limit check whose store did not answer, on a route whose onStoreDown is `mode` (allow, deny) */
  countRateLimitStoreFailure: (route: string, mode: string) => void
  /** where the upstream queues are counted: read at scrape time, never per request */
  watchUpstreams: (queues: () => Iterable<UpstreamQueueCounts>) => void
  /** one fetch of a trusted identity provider's keys (`jwks`) or discovery document (`discovery`) */
  observeIdpFetch: (issuer: string, what: 'jwks' | 'discovery', ok: boolean, seconds: number) => void
  /**
   * one answered request on a route that takes signed agents: `agent` is the verified agent's
   * directory origin when an operator pinned it, `other` for any other verified agent, `none` when
   * none was verified (agents can be anyone: never an unpinned origin as a label); `outcome` how
   * its authentication ended: `ok`, or the error code that refused it
   */
  countAgentRequest: (agent: string, outcome: string) => void
  /** one fetch of a signed agent's key directory */
  observeAgentDirectoryFetch: (ok: boolean, seconds: number) => void
  /** where each trusted issuer's keys are: their age and whether they are usable, read at scrape time */
  watchIdpKeys: (issuers: readonly IdpKeysState[]) => void
  /** process metrics (CPU, memory, event loop, GC) too; once per registry, for the metrics listener */
  includeProcessMetrics: () => void
  /** the exposition text (OpenMetrics, with exemplars, or the classic text) and its content type */
  scrape: (openMetrics?: boolean) => Promise<{ contentType: string; body: string }>
}

export const METRIC_NAMES = {
  requests: 'keygate_http_requests_total',
  authOutcomes: 'keygate_auth_outcomes_total',
  signatureVerification: 'keygate_signature_verification_seconds',
  upstreamLatency: 'keygate_upstream_latency_seconds',
  cacheLookups: 'keygate_cache_lookups_total',
  storeErrors: 'keygate_store_errors_total',
  upstreamPending: 'keygate_upstream_pending_requests',
  upstreamBusy: 'keygate_upstream_busy_total',
  signatureBudgetRefusals: 'keygate_signature_budget_refusals_total',
  signatureBudgetExhausted: 'keygate_signature_budget_exhausted_total',
  signatureBudgetKeysAttacked: 'keygate_signature_budget_keys_attacked_total',
  rateLimited: 'keygate_rate_limited_total',
  rateLimitStoreFailures: 'keygate_rate_limit_store_failures_total',
  usageOverflow: 'keygate_usage_overflow_total',
  usageFlushFailures: 'keygate_usage_flush_failures_total',
  workerRestarts: 'keygate_worker_restarts_total',
  idpKeyFetches: 'keygate_idp_key_fetches_total',
  idpKeysAge: 'keygate_idp_keys_age_seconds',
  idpKeysUsable: 'keygate_idp_keys_usable',
  agentRequests: 'keygate_agent_requests_total',
  agentDirectoryFetches: 'keygate_agent_directory_fetches_total',
  mcpMessages: MCP_MESSAGES_METRIC
} as const

/** What the metrics read of one trusted issuer's keys (idp/issuer-keys.ts). */
export interface IdpKeysState {
  readonly issuer: { readonly name: string }
  state: () => { usable: boolean, ageSeconds: number | undefined }
}

/** RSA-2048 verifies in about 35 us, RSA-8192 in about 1 ms */
export const SIGNATURE_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01]
export const UPSTREAM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** A method outside HTTP_METHODS (Node accepts a few dozen) is counted as OTHER: the label stays bounded. */
const METHOD_LABELS = [...HTTP_METHODS, 'OTHER']
const METHOD_INDEX = new Map<string, number>(HTTP_METHODS.map((method, index) => [method, index]))
const OTHER_METHOD = HTTP_METHODS.length
/** method index and status in one number key: status * 8 + method index */
const METHOD_SLOTS = 8

/** Requests answered, by route, method and status, and how authentication ended, by route and reason. */
function trafficMetrics (registry: Registry): Pick<GatewayMetrics, 'countRequest' | 'countAuthOutcome'> {
  /** route label -> (status * 8 + method index) -> count */
  const requests = new Map<string, Map<number, number>>()
  /** route label -> reason -> count */
  const outcomes = new Map<string, Map<string, number>>()
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.requests,
    help: 'Requests answered, by route (the route file\'s name, keygate\'s own endpoint path, or "none" when no route took the request), method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const [route, counts] of requests) {
        for (const [key, count] of counts) {
          this.inc({ route, method: METHOD_LABELS[key % METHOD_SLOTS] ?? 'OTHER', status: String(Math.floor(key / METHOD_SLOTS)) }, count)
        }
      }
    }
  })
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.authOutcomes,
    help: 'Authentication results on routes that authenticate, by route and reason: ok, or the error code that refused the request',
    labelNames: ['route', 'reason'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const [route, reasons] of outcomes) {
        for (const [reason, count] of reasons) this.inc({ route, reason }, count)
      }
    }
  })
  return {
    countRequest (route, method, status) {
      let counts = requests.get(route)
      if (counts === undefined) {
        counts = new Map()
        requests.set(route, counts)
      }
      const key = status * METHOD_SLOTS + (METHOD_INDEX.get(method) ?? OTHER_METHOD)
      counts.set(key, (counts.get(key) ?? 0) + 1)
    },
    countAuthOutcome (route, reason) {
      let reasons = outcomes.get(route)
      if (reasons === undefined) {
        reasons = new Map()
        outcomes.set(route, reasons)
      }
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
    }
  }
}

/** The latency histograms: one signature's verification, and the upstream's answer by route (a sampled request's trace as exemplar). */
function latencyMetrics (registry: Registry): Pick<GatewayMetrics, 'observeSignatureVerification' | 'observeUpstreamLatency'> {
  const signature = new FastHistogram({
    name: METRIC_NAMES.signatureVerification,
    help: 'Time of the verification of one request signature (X-API-Signature or RFC 9421; RSA, Ed25519 or P-256), in seconds',
    buckets: SIGNATURE_BUCKETS,
    registers: [registry]
  })
  const signatureSeries = signature.series()
  const upstream = new FastHistogram({
    name: METRIC_NAMES.upstreamLatency,
    help: 'Time from sending a request upstream to the upstream\'s response headers, in seconds, by route',
    labelNames: ['route'] as const,
    buckets: UPSTREAM_BUCKETS,
    registers: [registry]
  })
  /** a route's series, found by the route object itself: no label string per observation */
  const upstreamSeries = new WeakMap<LabelledRoute, Series>()
  return {
    observeSignatureVerification (seconds) {
      signature.record(signatureSeries, seconds)
    },
    observeUpstreamLatency (route, seconds, traceId) {
      let series = upstreamSeries.get(route)
      if (series === undefined) {
        series = upstream.series({ route: route.name })
        upstreamSeries.set(route, series)
      }
      if (traceId === undefined) upstream.record(series, seconds)
      else upstream.recordExemplar(series, seconds, { trace_id: traceId })
    }
  }
}

/** What the services count themselves, read at scrape time: cache lookups, store errors, usage analytics' overflow and failed flushes. */
function serviceCountMetrics (registry: Registry, sources: MetricSources): void {
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.cacheLookups,
    help: 'Lookups in the in-process caches, by cache (api_key: parsed public keys; token: verified bearer tokens; user_scopes: users\' scopes) ' +
      'and result (hit, miss: the store or a signature check answered)',
    labelNames: ['cache', 'result'] as const,
    registers: [registry],
    collect () {
      this.reset()
      this.inc({ cache: 'api_key', result: 'hit' }, sources.keys.stats.hits)
      this.inc({ cache: 'api_key', result: 'miss' }, sources.keys.stats.misses)
      this.inc({ cache: 'token', result: 'hit' }, sources.tokens.stats.hits)
      this.inc({ cache: 'token', result: 'miss' }, sources.tokens.stats.misses)
      if (sources.userScopes !== undefined) {
        this.inc({ cache: 'user_scopes', result: 'hit' }, sources.userScopes.stats.hits)
        this.inc({ cache: 'user_scopes', result: 'miss' }, sources.userScopes.stats.misses)
      }
    }
  })
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.storeErrors,
    help: 'Store operations that failed because Redis did not answer (down, slow, connection reset)',
    registers: [registry],
    collect () {
      this.reset()
      this.inc(sources.store.errors)
    }
  })

  const usage = sources.usage
  if (usage !== undefined) {
    // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
    new Counter({
      name: METRIC_NAMES.usageOverflow,
      help: 'Requests usage analytics counted as other: more distinct keys, users, routes and outcomes than KEYGATE_USAGE_MAX_SERIES in a flush interval',
      registers: [registry],
      collect () {
        this.reset()
        this.inc(usage.stats.overflowed)
      }
    })
    // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
    new Counter({
      name: METRIC_NAMES.usageFlushFailures,
      help: 'Usage analytics flushes the store refused (their counts are lost)',
      registers: [registry],
      collect () {
        this.reset()
        this.inc(usage.stats.flushFailures)
      }
    })
  }
}

/** Requests refused by a route's rate limit, and rate-limit checks the store did not answer. */
function rateLimitMetrics (registry: Registry): Pick<GatewayMetrics, 'countRateLimited' | 'countRateLimitStoreFailure'> {
  /** route label -> by -> requests refused by a rate limit */
  const limited = new Map<string, Map<string, number>>()
  /** route label -> onStoreDown mode -> rate-limit checks the store did not answer */
  const limiterFailures = new Map<string, Map<string, number>>()
  /** one more in a route's count of `label` */
  const bump = (counts: Map<string, Map<string, number>>, route: string, label: string): void => {
    let byLabel = counts.get(route)
    if (byLabel === undefined) counts.set(route, byLabel = new Map())
    byLabel.set(label, (byLabel.get(label) ?? 0) + 1)
  }

  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.rateLimited,
    help: 'Requests refused with 429 RATE_LIMITED by a route\'s rate limit, by route and by what the limit counts per (key, user, address)',
    labelNames: ['route', 'by'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const [route, counts] of limited) for (const [by, count] of counts) this.inc({ route, by }, count)
    }
  })
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.rateLimitStoreFailures,
    help: 'Rate-limit checks the store did not answer, by route and the route\'s onStoreDown mode ' +
      '(allow: forwarded uncounted; deny: refused with 503 STORE_UNAVAILABLE)',
    labelNames: ['route', 'mode'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const [route, counts] of limiterFailures) for (const [mode, count] of counts) this.inc({ route, mode }, count)
    }
  })

  return {
    countRateLimited (route, by) {
      bump(limited, route, by)
    },
    countRateLimitStoreFailure (route, mode) {
      bump(limiterFailures, route, mode)
    }
  }
}

/** The upstream queues, read at scrape time: requests waiting for a connection, and those refused with 503 UPSTREAM_BUSY. */
function upstreamQueueMetrics (registry: Registry): Pick<GatewayMetrics, 'watchUpstreams'> {
  let upstreamQueues: () => Iterable<UpstreamQueueCounts> = () => []
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Gauge({
    name: METRIC_NAMES.upstreamPending,
    help: 'Requests waiting for a connection to their upstream, by upstream origin (at most KEYGATE_UPSTREAM_MAX_PENDING each)',
    labelNames: ['upstream'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const queue of upstreamQueues()) this.set({ upstream: queue.origin }, queue.pending)
    }
  })
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.upstreamBusy,
    help: 'Requests refused with 503 UPSTREAM_BUSY, never sent, by upstream origin: its connections were all in use and its queue full',
    labelNames: ['upstream'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const queue of upstreamQueues()) this.inc({ upstream: queue.origin }, queue.refused)
    }
  })
  return {
    watchUpstreams (queues) {
      upstreamQueues = queues
    }
  }
}

/** The budget of failed signature checks per address: refusals, budgets used up, and keys under attack. */
function signatureBudgetMetrics (registry: Registry, sources: MetricSources): void {
  const budget = sources.signatureBudget
  if (budget !== undefined) {
    // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
    new Counter({
      name: METRIC_NAMES.signatureBudgetRefusals,
      help: 'Signed requests refused with 429 RATE_LIMITED before verification because their client address had used up its budget ' +
        'of failed signature checks (KEYGATE_SIGNATURE_FAILURE_LIMIT per _WINDOW_SECONDS), or was one of those that put a key under attack',
      registers: [registry],
      collect () {
        this.reset()
        this.inc(budget.stats.refusals)
      }
    })
    // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
    new Counter({
      name: METRIC_NAMES.signatureBudgetExhausted,
      help: 'Times a client address used up its budget of failed signature checks within a window (its signed requests then get 429)',
      registers: [registry],
      collect () {
        this.reset()
        this.inc(budget.stats.exhausted)
      }
    })
    // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
    new Counter({
      name: METRIC_NAMES.signatureBudgetKeysAttacked,
      help: 'Times a key came under attack: KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES client addresses each failed ' +
        'KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT signature checks on it within a window (those addresses are then refused for it before verification)',
      registers: [registry],
      collect () {
        this.reset()
        this.inc(budget.stats.keysAttacked)
      }
    })
  }
}

/** Trusted identity providers (their key fetches, the keys' age and usability) and signed agents (their requests, their directories' fetches). */
function identityMetrics (registry: Registry): Pick<GatewayMetrics, 'observeIdpFetch' | 'countAgentRequest' | 'observeAgentDirectoryFetch' | 'watchIdpKeys'> {
  const idpFetches = new Counter({
    name: METRIC_NAMES.idpKeyFetches,
    help: 'Fetches of a trusted identity provider\'s keys (what=jwks) or discovery document (what=discovery), by issuer and outcome (ok, error)',
    labelNames: ['issuer', 'what', 'outcome'] as const,
    registers: [registry]
  })
  const agentRequests = new Counter({
    name: METRIC_NAMES.agentRequests,
    help: 'Requests on routes that take signed agents, by agent (a pinned directory origin, other, or none verified) and authentication outcome',
    labelNames: ['agent', 'outcome'] as const,
    registers: [registry]
  })
  const agentDirectoryFetches = new Counter({
    name: METRIC_NAMES.agentDirectoryFetches,
    help: 'Fetches of signed agents\' key directories, by outcome (ok, error)',
    labelNames: ['outcome'] as const,
    registers: [registry]
  })
  let idpKeys: readonly IdpKeysState[] = []
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Gauge({
    name: METRIC_NAMES.idpKeysAge,
    help: 'Seconds since a trusted identity provider\'s keys were last fetched successfully, by issuer (absent before the first success)',
    labelNames: ['issuer'] as const,
    registers: [registry],
    // with workers: the oldest worker's keys
    aggregator: 'max',
    collect () {
      this.reset()
      for (const keys of idpKeys) {
        const age = keys.state().ageSeconds
        if (age !== undefined) this.set({ issuer: keys.issuer.name }, age)
      }
    }
  })
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Gauge({
    name: METRIC_NAMES.idpKeysUsable,
    help: '1 when keygate holds usable keys of a trusted identity provider (fetched, and not older than the outage bound), else 0: its tokens get 503',
    labelNames: ['issuer'] as const,
    registers: [registry],
    // with workers: 0 when any worker lacks usable keys
    aggregator: 'min',
    collect () {
      this.reset()
      for (const keys of idpKeys) this.set({ issuer: keys.issuer.name }, keys.state().usable ? 1 : 0)
    }
  })

  return {
    observeIdpFetch (issuer, what, ok, _seconds) {
      idpFetches.inc({ issuer, what, outcome: ok ? 'ok' : 'error' })
    },
    countAgentRequest (agent, outcome) {
      agentRequests.inc({ agent, outcome })
    },
    observeAgentDirectoryFetch (ok, _seconds) {
      agentDirectoryFetches.inc({ outcome: ok ? 'ok' : 'error' })
    },
    watchIdpKeys (issuers) {
      idpKeys = issuers
    }
  }
}

export function createGatewayMetrics (sources: MetricSources): GatewayMetrics {
  const registry = new Registry()
  // each family in the order the exposition lists them
  const traffic = trafficMetrics(registry)
  const latency = latencyMetrics(registry)
  serviceCountMetrics(registry, sources)
  const limits = rateLimitMetrics(registry)
  const queues = upstreamQueueMetrics(registry)
  signatureBudgetMetrics(registry, sources)
  const identity = identityMetrics(registry)
  let processMetrics = false

  return {
    registry,
    ...traffic,
    ...latency,
    ...limits,
    ...queues,
    ...identity,
    ...mcpMetrics(registry),
    includeProcessMetrics () {
      if (processMetrics) return
      processMetrics = true
      collectDefaultMetrics({ register: registry })
    },
    async scrape (openMetrics = false) {
      if (openMetrics) return { contentType: OPENMETRICS_CONTENT_TYPE, body: await openMetricsText(await registry.getMetricsAsJSON()) }
      return { contentType: registry.contentType, body: await registry.metrics() }
    }
  }
}

/**
 * The primary's own metrics when there are workers (process/primary.ts): one counter, read at
 * scrape time and served with the workers' added up. A worker's death takes its counts with it,
 * so only the primary can count the deaths.
 */
export function createClusterMetrics (source: { readonly restarts: number }): Registry {
  const registry = new Registry()
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: METRIC_NAMES.workerRestarts,
    help: 'Workers that exited unexpectedly and were replaced (KEYGATE_WORKERS above 1), counted by the primary since it started',
    registers: [registry],
    collect () {
      this.reset()
      this.inc(source.restarts)
    }
  })
  return registry
}
