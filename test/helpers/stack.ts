// A real stack on real sockets: the example clients service and a gateway in front of it, on the
// embedded store or on Redis under a prefix of its own. Closed when the test ends.
import type { FastifyInstance } from 'fastify'
import { buildApp, type BuildAppOptions } from '../../gateway/src/app.js'
import { defaultRoutes, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { loadConfig, type GatewayConfig } from '../../gateway/src/config/env.js'
import { createStore, type Store } from '../../gateway/src/store/index.js'
import type { RedisConnection } from '../../gateway/src/store/redis-connection.js'
import { buildUpstreamApp } from '../../upstream-stub/src/app.js'
import { send } from './http.js'
import { signBase64, signedHeaders, type TestKeyPair } from './keys.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from './redis.js'
import { TEST_SCRYPT_LOG_N } from './test-env.js'

export type StoreKind = 'memory' | 'redis'
export const STORE_KINDS: StoreKind[] = ['memory', 'redis']

interface Teardown { teardown: (fn: () => unknown) => void }

export interface GatewayHandle {
  app: FastifyInstance
  url: string
  store: Store
  config: GatewayConfig
}

export interface StackOptions {
  store: StoreKind
  /** share a Redis prefix with another gateway (the two-instance tests) */
  redisPrefix?: string
  /** with store 'redis': this Redis (a cluster, a master behind sentinels) rather than testRedisUrl() */
  redis?: RedisConnection
  /** an upstream other than the example service (a recorder, a dead port) */
  upstreamUrl?: string
  routes?: (upstream: string) => RouteConfig[]
  config?: Partial<GatewayConfig>
  now?: () => number
  logger?: BuildAppOptions['logger']
  /** listen here rather than on a free port (when another service must know the URL first) */
  port?: number
  /** signed agents' directories: the test's resolver and CA */
  agentDirectories?: BuildAppOptions['agentDirectories']
}

export const PASSWORD = 'correct horse battery staple'

/** Config for tests: port 0, quiet logs, the env read from nothing but what is given. */
export function testConfig (overrides: Partial<GatewayConfig> = {}): GatewayConfig {
  return { ...loadConfig({}), port: 0, logLevel: 'silent', passwordScryptLogN: TEST_SCRYPT_LOG_N, ...overrides }
}

export async function startUpstreamStub (t: Teardown, options: Parameters<typeof buildUpstreamApp>[0] = {}): Promise<string> {
  const upstream = await buildUpstreamApp({ logger: false, ...options })
  const url = await upstream.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(async () => { await upstream.close() })
  return url
}

/** A gateway on its own store (or on a shared Redis prefix), listening on a free port. */
export async function startTestGateway (t: Teardown, options: StackOptions & { upstreamUrl: string }): Promise<GatewayHandle> {
  let redis: RedisConnection | undefined
  let redisPrefix = options.redisPrefix
  if (options.store === 'redis') {
    const connection = redis = options.redis ?? await testRedisUrl()
    if (redisPrefix === undefined) {
      const prefix = redisPrefix = uniquePrefix()
      t.teardown(async () => { await deletePrefix(connection, prefix) })
    }
  }
  const base = testConfig({
    redisUrl: typeof redis === 'string' ? redis : undefined,
    redisTopology: typeof redis === 'object' ? redis : undefined,
    ...(redisPrefix !== undefined && { redisPrefix }),
    ...options.config
  })
  const routes = options.routes?.(options.upstreamUrl) ??
    defaultRoutes({ upstream: options.upstreamUrl, bodyLimit: base.bodyLimit, timeoutMs: 30_000 })
  const config = base
  const store = await createStore(config)
  const app = await buildApp({
    config,
    store,
    routes,
    ...(options.now && { now: options.now }),
    ...(options.logger !== undefined && { logger: options.logger }),
    ...(options.agentDirectories !== undefined && { agentDirectories: options.agentDirectories })
  })
  const url = await app.listen({ port: options.port ?? 0, host: '127.0.0.1' })
  t.teardown(async () => {
    await app.close()
    await store.close()
  })
  return { app, url, store, config }
}

/** Upstream stub + gateway. */
export async function startStack (t: Teardown, options: StackOptions): Promise<GatewayHandle & { upstreamUrl: string }> {
  const upstreamUrl = options.upstreamUrl ?? await startUpstreamStub(t)
  return { ...await startTestGateway(t, { ...options, upstreamUrl }), upstreamUrl }
}

export async function addUser (gateway: GatewayHandle, username: string, password = PASSWORD): Promise<void> {
  await gateway.app.keygate.users.upsert(username, password)
}

export async function login (url: string, username: string, password = PASSWORD): Promise<string> {
  const res = await send(url, '/v1/auth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password })
  })
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${res.text}`)
  return res.json<{ token: string }>().token
}

export async function registerKey (url: string, token: string, keys: TestKeyPair, name = 'test key') {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name, publicKey: keys.publicPem, signature: signBase64(keys.privateKey, name) })
  })
}

/** A signed business request sent exactly as signed. */
export async function sendSigned (
  url: string,
  input: { keys: TestKeyPair; token: string; method: string; target: string; body?: string | Buffer; headers?: Record<string, string>; from?: string }
) {
  return await send(url, input.target, {
    method: input.method,
    ...(input.from !== undefined && { localAddress: input.from }),
    headers: {
      ...(input.body !== undefined && { 'content-type': 'application/json' }),
      ...input.headers,
      ...signedHeaders(input)
    },
    ...(input.body !== undefined && { body: input.body })
  })
}
