// A gateway with its admin API, as process/start.ts runs one (the app, and the admin listener
// beside it, both on free ports), on Redis under a prefix of its own or a shared one; its log
// lines captured. And a request to the admin API with the token.
import { randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import type { Test } from 'tap'
import { loggerOptions } from '../../gateway/src/app.js'
import type { GatewayConfig } from '../../gateway/src/config/env.js'
import { startGateway, type RunningGateway } from '../../gateway/src/process/start.js'
import { defaultRoutes, type RouteConfig } from '../../gateway/src/proxy/route.js'
import { send, type RawResponse } from './http.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from './redis.js'
import { testConfig } from './stack.js'

/** a fresh admin token: 64 hex characters */
export const newAdminToken = (): string => randomBytes(32).toString('hex')

export interface AdminGateway extends RunningGateway {
  adminUrl: string
  token: string
  config: GatewayConfig
  /** every log line so far, parsed */
  lines: Array<Record<string, unknown>>
  /** every log line so far, as written */
  raw: () => string
}

export interface AdminGatewayOptions {
  upstreamUrl: string
  /** share this Redis prefix (two gateways on one store); default: one of its own, deleted afterwards */
  redisPrefix?: string
  token?: string
  config?: Partial<GatewayConfig>
  /** the routes (no route file); default: the built-in ones to `upstreamUrl` */
  routes?: readonly RouteConfig[]
}

export async function startAdminGateway (t: Test, options: AdminGatewayOptions): Promise<AdminGateway> {
  const redisUrl = await testRedisUrl()
  let prefix = options.redisPrefix
  if (prefix === undefined) {
    const own = prefix = uniquePrefix('admin')
    t.teardown(async () => { await deletePrefix(redisUrl, own) })
  }
  const token = options.token ?? newAdminToken()
  const written: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { written.push(chunk.toString()); done() } })
  const config = testConfig({ redisUrl, redisPrefix: prefix, admin: { port: 0, host: '127.0.0.1', token }, ...options.config })
  const gateway = await startGateway({
    config,
    logger: { ...loggerOptions('info') as object, stream },
    routes: options.routes ?? defaultRoutes({ upstream: options.upstreamUrl, bodyLimit: config.bodyLimit, timeoutMs: 30_000 })
  })
  t.teardown(gateway.close)
  if (gateway.adminUrl === undefined) throw new Error('the admin API did not start')
  const parsed = (): Array<Record<string, unknown>> => written.join('').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
  return {
    ...gateway,
    adminUrl: gateway.adminUrl,
    token,
    config,
    get lines () { return parsed() },
    raw: () => written.join('')
  }
}

/** One request to the admin API, with the token unless `token` says otherwise (null: none). */
export async function admin (gw: { adminUrl: string; token: string }, method: string, target: string,
  options: { body?: unknown; token?: string | null } = {}): Promise<RawResponse> {
  const token = options.token === undefined ? gw.token : options.token
  return await send(gw.adminUrl, target, {
    method,
    headers: {
      ...(token !== null && { authorization: `Bearer ${token}` }),
      ...(options.body !== undefined && { 'content-type': 'application/json' })
    },
    ...(options.body !== undefined && { body: JSON.stringify(options.body) })
  })
}
