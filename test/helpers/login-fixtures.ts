// For the login-limit tests: a small gateway of keygate's own parts (problem+json, health, JWKS,
// the token route with login limits given as plugin options) on a real store and a real socket,
// since buildApp registers the token route with the default limits. Not a test file.
import Fastify, { type FastifyInstance } from 'fastify'
import { request as httpRequest } from 'node:http'
import { performance } from 'node:perf_hooks'
import { problemsPlugin } from '../../gateway/src/http/plugins/problems.js'
import { healthRoutes } from '../../gateway/src/http/routes/health.js'
import { jwksRoutes } from '../../gateway/src/http/routes/jwks.js'
import { tokenRoutes } from '../../gateway/src/http/routes/token.js'
import { createStore, type Store } from '../../gateway/src/store/index.js'
import { createTokenService } from '../../gateway/src/tokens/token-service.js'
import type { KeygateServices } from '../../gateway/src/types.js'
import { createLoginGuard, type LoginGuardOptions } from '../../gateway/src/users/login-guard.js'
import { hashPassword } from '../../gateway/src/users/passwords.js'
import { createUserService, type UserService } from '../../gateway/src/users/user-service.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from './redis.js'
import { testConfig, type StoreKind } from './stack.js'
import { TEST_SCRYPT_LOG_N } from './test-env.js'

interface Teardown { teardown: (fn: () => unknown) => void }

/** What reached the password check: calls, and the most that ran at once. */
export interface AuthenticateCalls {
  count: number
  active: number
  peak: number
}

export interface LoginApp {
  app: FastifyInstance
  url: string
  store: Store
  users: UserService
  calls: AuthenticateCalls
}

export interface LoginAppOptions {
  store: StoreKind
  /** a Redis prefix shared with another LoginApp (deleted by whoever made it) */
  redisPrefix?: string
  login?: LoginGuardOptions
  /** the cost of the hashes it writes, the unknown user's included (default: the tests' cheap one, test-env.ts) */
  scryptLogN?: number
}

/** The user service with its `authenticate` calls counted (the real one runs: scrypt and all). */
function countingUsers (users: UserService, calls: AuthenticateCalls): UserService {
  return {
    ...users,
    authenticate: async (username, password) => {
      calls.count++
      calls.active++
      calls.peak = Math.max(calls.peak, calls.active)
      try {
        return await users.authenticate(username, password)
      } finally {
        calls.active--
      }
    }
  }
}

export async function startLoginApp (t: Teardown, options: LoginAppOptions): Promise<LoginApp> {
  let redisUrl: string | undefined
  let redisPrefix = options.redisPrefix
  if (options.store === 'redis') {
    redisUrl = await testRedisUrl()
    if (redisPrefix === undefined) {
      const prefix = redisPrefix = uniquePrefix('login')
      t.teardown(async () => { await deletePrefix(redisUrl as string, prefix) })
    }
  }
  const config = testConfig({ redisUrl, ...(redisPrefix !== undefined && { redisPrefix }) })
  const store = await createStore(config)
  const tokens = await createTokenService(config.jwt, store)
  const plainUsers = createUserService(store, { scryptLogN: options.scryptLogN ?? config.passwordScryptLogN })
  const calls: AuthenticateCalls = { count: 0, active: 0, peak: 0 }
  const users = countingUsers(plainUsers, calls)
  const app = Fastify({ logger: false })
  // Only what these routes use: store, users, tokens.
  app.decorate('keygate', { store, tokens, users } as unknown as KeygateServices)
  await app.register(problemsPlugin)
  await app.register(healthRoutes, { store, identityProviders: () => [] })
  await app.register(jwksRoutes, { tokens })
  await app.register(tokenRoutes, { tokens, guard: createLoginGuard(store, users, options.login) })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(async () => {
    await app.close()
    tokens.close()
    await store.close()
  })
  return { app, url, store, users: plainUsers, calls }
}

/**
 * Stores a user whose hash is at the tests' cost (ln=14, the least keygate takes), whatever the
 * app's own, so that a test can afford many failed logins of known users. Unknown usernames cost
 * what the app's dummy hash costs.
 */
export async function putCheapUser (store: Store, username: string, password: string): Promise<void> {
  await store.putUser(username, await hashPassword(password, TEST_SCRYPT_LOG_N))
}

export interface LoginAnswer {
  status: number
  code: string | undefined
  contentType: string | undefined
  retryAfter: string | undefined
  ms: number
}

/** POST /v1/auth/token on a fresh connection, from `from` (another loopback address) if given. */
export async function postLogin (url: string, username: string, password: string, from?: string): Promise<LoginAnswer> {
  const { hostname, port } = new URL(url)
  const body = JSON.stringify({ username, password })
  const started = performance.now()
  return await new Promise((resolve, reject) => {
    const req = httpRequest({
      host: hostname,
      port,
      method: 'POST',
      path: '/v1/auth/token',
      agent: false,
      ...(from !== undefined && { localAddress: from }),
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
    }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('error', reject)
      res.on('end', () => {
        const ms = performance.now() - started
        let code: string | undefined
        try { code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code?: string }).code } catch {}
        const retryAfter = res.headers['retry-after']
        resolve({ status: res.statusCode ?? 0, code, contentType: res.headers['content-type'], retryAfter, ms })
      })
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** GET `target` on a fresh connection; resolves to its status and time in ms. */
export async function timedGet (url: string, target: string): Promise<{ status: number; ms: number }> {
  const { hostname, port } = new URL(url)
  const started = performance.now()
  return await new Promise((resolve, reject) => {
    httpRequest({ host: hostname, port, path: target, agent: false }, (res) => {
      res.resume()
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }) })
      res.on('error', reject)
    }).on('error', reject).end()
  })
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}
