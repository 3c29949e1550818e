// The composition root: what keygate is made of, in the order a request meets it.
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { createUsageCounter, type UsageCounter } from './analytics/counter.js'
import { createAuthenticator, type Authenticator } from './auth/authenticate.js'
import type { IdpTokens } from './auth/bearer.js'
import { agentPipeline, bearerPipeline, publicPipeline, signedPipeline } from './auth/pipeline.js'
import { createSignatureBudget, type SignatureBudget } from './auth/signature-budget.js'
import { ConfigError } from './config/config-error.js'
import { buildDecisionApp } from './decision/server.js'
import { createDpopVerifier, DEFAULT_DPOP_SETTINGS, dpopSettingsProblem, type DpopVerifier } from './dpop/proof.js'
import { MAX_HEADER_BYTES, SCRYPT_LOG_N, type GatewayConfig } from './config/env.js'
import { listenerOptions } from './http/listener-options.js'
import { accessLogPlugin } from './http/plugins/access-log.js'
import { countBodyMemory } from './http/plugins/body-memory.js'
import { clientAddressPlugin } from './http/plugins/client-address.js'
import { docsPlugin } from './http/plugins/docs.js'
import { metricsPlugin } from './http/plugins/metrics.js'
import { usagePlugin } from './http/plugins/usage.js'
import { portalPlugin } from './http/plugins/portal.js'
import { problemsPlugin, refuseConnect } from './http/plugins/problems.js'
import { requestTargetPlugin } from './http/plugins/request-target.js'
import { shutdownPlugin } from './http/plugins/shutdown.js'
import { apiKeyRoutes } from './http/routes/api-keys.js'
import { healthRoutes } from './http/routes/health.js'
import { jwksRoutes } from './http/routes/jwks.js'
import { resourceMetadataRoutes } from './http/routes/resource-metadata.js'
import { resourceAudiences, resourceIssuerProblems } from './resources/resource.js'
import { proxyRoutes } from './http/routes/proxy.js'
import { routeListRoutes } from './http/routes/routes.js'
import { timeRoutes } from './http/routes/time.js'
import { tokenRoutes } from './http/routes/token.js'
import { usageRoutes } from './http/routes/usage.js'
import { createIssuerKeys, type IssuerKeys, type IssuerKeysOptions } from './idp/issuer-keys.js'
import { loadIssuers, singleIssuer, type IssuerConfig } from './idp/issuers.js'
import { createIssuersInForce } from './idp/issuers-in-force.js'
import { createPortalLogin, type PortalLogin } from './idp/portal-login.js'
import { createKeyRegistry, keyPolicy } from './keys/key-registry.js'
import { ByteBudget } from './lib/byte-budget.js'
import { logDestination, type LogFormat } from './lib/log-format.js'
import { trackRequestLines } from './lib/request-line-tracker.js'
import { REDACTED, REDACTED_PATHS, redactUrl } from './lib/redact-url.js'
import { createRateLimiter } from './limits/limiter.js'
import { createAgentDirectories, type AgentDirectories } from './agents/agent-directories.js'
import { loadAgentsFile } from './agents/agents-file.js'
import { createAgentsInForce, type AgentsInForce } from './agents/agents-in-force.js'
import { directoryFetch, type DirectoryFetchOptions } from './agents/directory-fetch.js'
import { directoryCheck } from './auth/directory-signature.js'
import { createGatewayMetrics } from './metrics/metrics.js'
import { createConfigReloader } from './proxy/config-reload.js'
import { createIdentityTokenIssuer } from './proxy/identity.js'
import type { RouteConfig } from './proxy/route.js'
import { createRouteRegistry } from './proxy/route-registry.js'
import { createStore, type Store } from './store/index.js'
import { createTokenService } from './tokens/token-service.js'
import type { Tracing } from './tracing/tracer.js'
import { createLoginGuard } from './users/login-guard.js'
import { createUserService } from './users/user-service.js'
import { createUserScopes, type UserScopes } from './users/user-scopes.js'
import type { KeygateServices } from './types.js'
import './types.js'

/** the bodies of keygate's own JSON endpoints (token, key registration) */
const OWN_BODY_LIMIT = 64 * 1024

export interface BuildAppOptions {
  config: GatewayConfig
  /** a store owned by the caller (tests share one); default: the one the config names, closed with the app */
  store?: Store
  logger?: FastifyServerOptions['logger']
  /** the clock of the timestamp check (tests) */
  now?: () => number
  /** the routes when there is no route file; default: the built-in ones (proxy/route.ts) */
  routes?: readonly RouteConfig[]
  /** signed agents' directories: the name resolution and the CAs trusted (tests: their own); default the system's */
  agentDirectories?: Pick<DirectoryFetchOptions, 'resolver' | 'ca'>
}

interface LoggedRequest { method?: string; url?: string; ip?: string; socket?: { remotePort?: number } }

/** The gateway's pino options: LOG_LEVEL, and with LOG_FORMAT (or a terminal) readable lines instead of JSON. */
export function loggerOptions (level: string, format?: LogFormat): FastifyServerOptions['logger'] {
  const stream = logDestination(format)
  return {
    level,
    ...(stream !== undefined && { stream }),
    redact: { paths: REDACTED_PATHS, censor: REDACTED },
    // Fastify's own request lines (`req`): the URL with any credential in its query redacted
    serializers: {
      req: (req: LoggedRequest) => ({ method: req.method, url: req.url === undefined ? undefined : redactUrl(req.url), remoteAddress: req.ip })
    }
  }
}

/** What the app is built with: its Fastify instance, the options, the store and the tracing (when on). */
interface Building {
  app: FastifyInstance
  options: BuildAppOptions
  config: GatewayConfig
  store: Store
  tracing: Tracing | undefined
}

/** The services, each built once and handed to the plugins that use it as their options; the users bootstrapped. */
async function buildServices ({ app, options, config, store }: Building):
Promise<{ services: Omit<KeygateServices, 'reloader'>; userScopes: UserScopes; signatureBudget: SignatureBudget; usage: UsageCounter | undefined }> {
  const routes = await createRouteRegistry(config, app.log, options.routes)
  app.addHook('onClose', async () => { routes.close() })
  const tokens = await createTokenService(config.jwt, store)
  const keys = createKeyRegistry(store, {
    cacheSize: config.keyCacheSize,
    ...keyPolicy(config),
    onRecordUseError: (err, apiKey) => { app.log.debug({ err, apiKey }, 'recording a key\'s last use failed') }
  })
  // each user's scopes, cached beside the keys and as many
  const userScopes = createUserScopes(store, { cacheSize: config.keyCacheSize })
  const users = createUserService(store, { onChanged: userScopes.forget, scryptLogN: config.passwordScryptLogN })
  const signatureBudget = createSignatureBudget(config.signatureFailures)
  // usage analytics: counted in process, flushed to the store in batches (analytics/counter.ts)
  const usage = config.usageAnalytics.enabled
    ? createUsageCounter({
      store,
      flushMs: config.usageAnalytics.flushMs,
      maxSeries: config.usageAnalytics.maxSeries,
      onFlushError: (err, requests) => { app.log.warn({ err, requests }, 'usage analytics: the store refused a flush; its counts are lost') },
      onOverflow: (requests) => {
        app.log.warn({ requests, max: config.usageAnalytics.maxSeries }, 'usage analytics: more distinct keys, users and routes than ' +
          'KEYGATE_USAGE_MAX_SERIES in one flush interval; the rest were counted as other')
      }
    })
    : undefined
  const services: Omit<KeygateServices, 'reloader'> = {
    store,
    tokens,
    users,
    keys,
    routes,
    metrics: createGatewayMetrics({ keys, tokens, store, signatureBudget, userScopes, ...(usage !== undefined && { usage }) }),
    ...(usage !== undefined && { usage }),
    loginGuard: createLoginGuard(store, users, config.login),
    bodyMemory: new ByteBudget(config.bodyMemoryLimit)
  }
  // the last counts reach the store before it closes (onClose hooks run last added first)
  if (usage !== undefined) app.addHook('onClose', async () => { await usage.close() })
  app.addHook('onClose', async () => {
    services.tokens.close()
    await services.keys.close()
    await userScopes.close()
  })
  await services.users.bootstrap(config.bootstrapUsers)
  return { services, userScopes, signatureBudget, usage }
}

/**
 * Trusted identity providers' tokens, beside keygate's own (docs/identity-providers.md): each
 * issuer's keys fetched now; an issuer whose keys cannot be had yet makes /readyz say so, and its
 * tokens get 503 IDP_KEYS_UNAVAILABLE until they can. With the portal, its login through those
 * issuers that have portalLogin. With an issuers file, the issuers in force change when it is
 * reloaded (idp/issuers-in-force.ts; none at start is then a set like any other).
 */
async function trustIdentityProviders ({ app, config, store, tracing }: Building, services: Omit<KeygateServices, 'reloader'>):
Promise<{ idp: IdpTokens | undefined; portalLogin: PortalLogin | undefined }> {
  const { file: issuersFile, oidc } = config.identityProviders
  const issuers = await loadIssuers({ file: issuersFile, single: oidc === undefined ? undefined : singleIssuer(oidc) })
  if (issuersFile === undefined && issuers.length === 0) return { idp: undefined, portalLogin: undefined }
  const onFetch: IssuerKeysOptions['onFetch'] = (from, outcome) => {
    services.metrics.observeIdpFetch(from.name, outcome.what, outcome.ok, outcome.seconds)
    tracing?.fetched('keygate.idp_key_fetch', outcome.seconds, {
      'keygate.issuer': from.name,
      'keygate.fetch': outcome.what,
      ...(outcome.keys !== undefined && { 'keygate.keys': outcome.keys })
    }, outcome.error)
    if (!outcome.ok) app.log.warn({ issuer: from.name, what: outcome.what, error: outcome.error }, 'an identity provider\'s keys could not be fetched')
  }
  const startKeys = async (keys: IssuerKeys): Promise<void> => {
    await keys.start().catch((err: Error) => { app.log.warn({ issuer: keys.issuer.name, err }, 'an identity provider\'s keys are not usable yet') })
  }
  // the developer portal's login through those issuers that have portalLogin (idp/portal-login.ts)
  const withLogin = config.portalPrefix !== undefined && (issuersFile !== undefined || issuers.some((issuer) => issuer.portalLogin !== undefined))
  const inForce = createIssuersInForce(issuers, {
    makeKeys: (issuer) => createIssuerKeys(issuer, { onFetch }),
    startKeys,
    ...(withLogin && {
      portalLoginOf: (list, keysOf, verifier) => createPortalLogin({
        issuers: list,
        store,
        keysOf,
        verifier,
        onError: (err) => { app.log.warn({ err }, 'a portal login through an identity provider failed') }
      })
    }),
    onSwap: (keys) => { services.metrics.watchIdpKeys(keys) },
    // tokens an issuer mints for the route file's resources pass its audience check (resources/audience.ts)
    resourceAudiences: (issuer) => resourceAudiences(services.routes.current.routes, issuer.name)
  })
  services.issuers = inForce
  app.addHook('onClose', async () => { inForce.close() })
  await Promise.all(inForce.keys.map(startKeys))
  const idp: IdpTokens = {
    verifier: inForce.verifier,
    provision: async (username, issuedAt) => await services.users.provisionIdpUser(username, issuedAt)
  }
  return { idp, portalLogin: inForce.portalLogin }
}

/**
 * Signed agents' key directories (docs/agents.md): pinned ones from the agents file, others
 * fetched when an agent names them, through the address guard, within bounds. The agents file
 * in force changes when it is reloaded (agents/agents-in-force.ts).
 */
async function agentDirectoriesOf ({ app, options, config, tracing }: Building, services: Omit<KeygateServices, 'reloader'>):
Promise<{ agentDirectories: AgentDirectories; agentsInForce: AgentsInForce }> {
  const agentSettings = await loadAgentsFile(config.agentDirectoriesFile)
  const agentsInForce = createAgentsInForce(config.agentDirectoriesFile, agentSettings, (settings, touched) => {
    agentDirectories.repin(settings.pinned, touched)
  })
  const agentDirectories: AgentDirectories = createAgentDirectories({
    fetch: directoryFetch({ privateOrigins: agentsInForce.privateOrigins, ...options.agentDirectories }),
    checkDirectory: (agent) => directoryCheck(agent, options.now),
    pinned: agentSettings.pinned,
    // the agents file in force names it: reloaded with the file
    named: agentsInForce.named,
    ...(options.now && { now: options.now }),
    onFetch: (agent, outcome) => {
      services.metrics.observeAgentDirectoryFetch(outcome.ok, outcome.seconds)
      tracing?.fetched('keygate.agent_directory_fetch', outcome.seconds, {
        'keygate.agent': agent.origin,
        ...(outcome.keys !== undefined && { 'keygate.keys': outcome.keys })
      }, outcome.error)
      if (!outcome.ok) app.log.info({ agent: agent.origin, error: outcome.error }, 'a signed agent\'s directory could not be used')
    }
  })
  app.addHook('onClose', async () => { agentDirectories.close() })
  return { agentDirectories, agentsInForce }
}

/** DPoP proofs' verifier (RFC 9449), of the KEYGATE_DPOP_* settings: one per process, its jti marks and nonces in the store. */
function dpopVerifierOf ({ config, store, options }: Building): DpopVerifier {
  const settings = { ...DEFAULT_DPOP_SETTINGS, ...config.dpop }
  const problem = dpopSettingsProblem(settings)
  if (problem !== undefined) throw new ConfigError(`KEYGATE_DPOP_ALGORITHMS ${problem}`)
  return createDpopVerifier(settings, store, options.now)
}

/** The one way a request is authenticated, per tier: each tier's pipeline, its stages traced when tracing is on. */
function authenticatorOf ({ options, store, tracing }: Building, services: KeygateServices, userScopes: UserScopes, signatureBudget: SignatureBudget,
  idp: IdpTokens | undefined, agents: AgentDirectories, dpop: DpopVerifier): Authenticator {
  const { tokens, keys } = services
  const signed = signedPipeline({
    tokens,
    keys,
    store,
    userScopes,
    observeVerification: services.metrics.observeSignatureVerification,
    signatureBudget,
    idp,
    agents,
    dpop,
    ...(options.now && { now: options.now })
  })
  const bearer = bearerPipeline({ tokens, userScopes, idp, agents, store, signatureBudget, dpop, ...(options.now && { now: options.now }) })
  const agent = agentPipeline({ tokens, keys, store, userScopes, signatureBudget, agents, ...(options.now && { now: options.now }) })
  const open = publicPipeline()
  // with tracing on, the stages where time goes have child spans
  return createAuthenticator(tracing === undefined
    ? { signed, bearer, agent, public: open }
    : { signed: tracing.traceStages(signed), bearer: tracing.traceStages(bearer), agent: tracing.traceStages(agent), public: tracing.traceStages(open) })
}

/**
 * The plugins every request meets before the routes (client address, problem+json, the request
 * line's checks, the access log, metrics and usage counts, /docs, the portal), then keygate's own
 * endpoints, in the order a request meets them.
 */
async function registerOwnPlugins ({ app, options, config, store, tracing }: Building, services: KeygateServices, usage: UsageCounter | undefined,
  portalLogin: PortalLogin | undefined, authenticator: Authenticator, dpop: DpopVerifier): Promise<void> {
  const { routes, tokens, keys } = services
  // First: every later hook, log line and limit reads the client's address (request.ip) from it.
  await app.register(clientAddressPlugin, config.clientAddress)
  await app.register(problemsPlugin)
  if (tracing !== undefined) await app.register((await import('./tracing/plugin.js')).tracingPlugin, { tracing, inline: true })
  // CONNECT never reaches Fastify: Node hands it to 'connect' listeners, or drops the connection.
  app.server.on('connect', refuseConnect)
  // Runs of spaces in a request line, which Node's parser reads as one and does not report: the
  // request-target plugin refuses the request they were in
  // KEYGATE_STRICT_REQUEST_LINE=off: Node's parser alone, which reads runs of spaces as one
  if (config.server.strictRequestLine) trackRequestLines(app.server, MAX_HEADER_BYTES)
  // A client that sends its request and then closes its sending side (a FIN: `socket.end()`,
  // `curl` with stdin closed, many scripts) still reads the answer. By default Node aborts every
  // request of a connection on its FIN, so an answer that needs any asynchronous work (a token
  // check, a forward) was never sent. With this, Node answers and then closes the connection.
  // (Undocumented, and Node's own since 0.x.) A request still waiting for an upstream connection
  // when the FIN comes is never sent: proxy/forwarder.ts.
  Object.assign(app.server, { httpAllowHalfOpen: true })
  await app.register(shutdownPlugin)
  await app.register(requestTargetPlugin)
  await app.register(accessLogPlugin, { traceIds: tracing?.ids })
  await app.register(metricsPlugin, { metrics: services.metrics })
  if (usage !== undefined) await app.register(usagePlugin, { counter: usage })
  // Before the routes, which it documents as they are added. Its /docs paths are keygate's own.
  if (config.docs) await app.register(docsPlugin, { routes })
  // The developer portal's page and bundles: static, and every action it takes is a call to the API below
  if (config.portalPrefix !== undefined) {
    await app.register(portalPlugin, { prefix: config.portalPrefix, ...(portalLogin !== undefined && { login: { service: portalLogin, store } }) })
  }

  await app.register(healthRoutes, { store, identityProviders: () => services.issuers?.keys ?? [] })
  await app.register(jwksRoutes, { tokens })
  await app.register(resourceMetadataRoutes, {
    routes: () => services.routes.current.routes,
    issuers: () => services.issuers?.issuers ?? [],
    dpopAlgorithms: dpop.settings.algorithms
  })
  await app.register(timeRoutes, { ...(options.now && { now: options.now }) })
  // keygate's own JSON endpoints: their bodies count against the same body memory as business ones
  await app.register(async (own) => {
    own.addHook('preParsing', countBodyMemory(services.bodyMemory, OWN_BODY_LIMIT))
    await own.register(tokenRoutes, { tokens, guard: services.loginGuard, dpop })
    await own.register(apiKeyRoutes, { keys, authenticator })
    // what the caller may call, and where they stand against its limits (the developer portal's)
    await own.register(routeListRoutes, { routes, authenticator })
    await own.register(usageRoutes, { keys, routes, store, authenticator })
  })
}

export async function buildApp (options: BuildAppOptions): Promise<FastifyInstance> {
  const { config } = options
  const app = Fastify({
    logger: options.logger ?? loggerOptions(config.logLevel, config.logFormat),
    // the options every listener that judges requests shares (http/listener-options.ts)
    ...listenerOptions(config.server, MAX_HEADER_BYTES),
    // JSON endpoints (token, key registration) are small; business routes set their own limit.
    bodyLimit: OWN_BODY_LIMIT,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true, useDefaults: false } }
  }).withTypeProvider<TypeBoxTypeProvider>()

  // OpenTelemetry traces: its modules loaded only when the OTEL_* variables turn tracing on (config/tracing.ts)
  const tracing = config.tracing === undefined ? undefined : await (await import('./tracing/tracer.js')).startTracing(config.tracing)
  if (tracing !== undefined) app.addHook('onClose', async () => { await tracing.shutdown() })
  const store = options.store ?? await createStore(config)
  if (options.store === undefined) app.addHook('onClose', async () => { await store.close() })
  if (store.kind === 'memory') {
    app.log.warn('REDIS_URL is not set: users and keys live in this process only and are lost when it stops; set REDIS_URL for anything but a trial')
  }
  if (config.passwordScryptLogN < SCRYPT_LOG_N) {
    app.log.warn(`KEYGATE_PASSWORD_SCRYPT_LOG_N=${config.passwordScryptLogN}: the password hashes written here cost ` +
      `${2 ** (SCRYPT_LOG_N - config.passwordScryptLogN)} times less to guess than at OWASP's recommended ${SCRYPT_LOG_N}; for development and tests`)
  }

  const building: Building = { app, options, config, store, tracing }
  const built = await buildServices(building)
  const { userScopes, signatureBudget, usage } = built
  const { idp, portalLogin } = await trustIdentityProviders(building, built.services)
  // the route file's resources name issuers of the issuers file: checked together, now and on each routes reload
  built.services.routes.checkWith((routes) => resourceIssuerProblems(routes, built.services.issuers?.issuers ?? []))
  const { agentDirectories, agentsInForce } = await agentDirectoriesOf(building, built.services)
  // SIGHUP, `keygate reload` and the admin API's POST /v1/reload: every file that can change without a restart
  const reloader = createConfigReloader({
    routes: built.services.routes,
    issuers: { file: config.identityProviders.file, inForce: built.services.issuers },
    agents: agentsInForce,
    log: app.log
  })
  const services: KeygateServices = Object.assign(built.services, { reloader })
  app.decorate('keygate', services)
  app.decorateRequest('auth', null)
  app.decorateRequest('described', null)
  app.decorateRequest('authenticated', false)
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id)
    // a client that half-closed sends nothing more: its connection closes after this answer, say so
    if (request.raw.socket?.readableEnded === true) reply.header('connection', 'close')
    done(null, payload)
  })
  const dpop = dpopVerifierOf(building)
  const authenticator = authenticatorOf(building, services, userScopes, signatureBudget, idp, agentDirectories, dpop)
  await registerOwnPlugins(building, services, usage, portalLogin, authenticator, dpop)
  const { routes, tokens } = services
  const limiter = createRateLimiter({
    store,
    onLimited: (route, limit) => { services.metrics.countRateLimited(route.name, limit.by) },
    onStoreFailure: (route, mode) => { services.metrics.countRateLimitStoreFailure(route.name, mode) },
    log: { warn: (fields, message) => { app.log.warn(fields, message) } }
  })
  const identityTokens = createIdentityTokenIssuer(tokens)
  // Decision mode: the same route table, pipelines, limits and identity tokens, on a listener of its own
  if (config.decision.port !== undefined) {
    const issuers = (): readonly IssuerConfig[] => services.issuers?.issuers ?? []
    const decisions = await buildDecisionApp({
      routes, issuers, judge: authenticator.judge, limiter, identityTokens, bodyMemory: services.bodyMemory, tracing, dpopAlgorithms: dpop.settings.algorithms
    }, {
      trustedProxies: config.decision.trustedProxies,
      server: config.server,
      log: app.log
    })
    services.decisions = decisions
    app.addHook('onClose', async () => { await decisions.close() })
  }
  // Last: everything that is not one of keygate's own endpoints is business traffic.
  await app.register(proxyRoutes, {
    limiter,
    routes,
    authenticator,
    identityTokens,
    metrics: services.metrics,
    upstreams: config.upstreams,
    bodyMemory: services.bodyMemory,
    mcpSessions: store,
    ...(tracing !== undefined && { tracing })
  })
  return app
}
