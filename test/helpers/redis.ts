// Real Redis for integration tests (never a mock): REDIS_URL when set, else 127.0.0.1:6379; when
// neither answers and redis-server is installed, one started here on a free port for this test
// process; when none of that works, a failure that says how to get Redis.
import { spawn, spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'
import { connectRedis, deleteKeys, type RedisConnection } from '../../gateway/src/store/redis-connection.js'
import { createRedisStore } from '../../gateway/src/store/redis.js'
import type { Store } from '../../gateway/src/store/index.js'

let resolved: Promise<string> | undefined

async function answers (url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    await client.connect()
    return await client.ping() === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => { typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port')) })
    })
  })
}

async function startOwnRedis (): Promise<string> {
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    throw new Error('The integration tests need Redis and none answers: set REDIS_URL=redis://host:port, ' +
      'start one on 127.0.0.1:6379, or install redis-server (Debian: apt-get install redis-server) so the tests can start their own.')
  }
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  process.on('exit', () => child.kill())
  const url = `redis://127.0.0.1:${port}`
  for (let attempt = 0; attempt < 50; attempt++) {
    if (await answers(url)) return url
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`redis-server started on port ${port} but does not answer`)
}

/** The Redis URL the tests use (resolved once per test process). */
export async function testRedisUrl (): Promise<string> {
  resolved ??= (async () => {
    const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
    if (await answers(url)) return url
    if (process.env.REDIS_URL !== undefined) throw new Error(`REDIS_URL=${url} does not answer PING`)
    return await startOwnRedis()
  })()
  return await resolved
}

/** A key prefix no other test or run shares. */
export function uniquePrefix (label = 'test'): string {
  return `keygate-test:${label}:${randomUUID()}:`
}

/** A Redis store of this test's own (the test Redis, a fresh prefix), closed and its keys deleted at the test's end. */
export async function testRedisStore (t: { teardown: (fn: () => unknown) => void }, label: string): Promise<Store> {
  const url = await testRedisUrl()
  const prefix = uniquePrefix(label)
  const store = await createRedisStore({ url, prefix, commandTimeoutMs: 500 })
  t.teardown(async () => {
    await store.close()
    await deletePrefix(url, prefix)
  })
  return store
}

/** Deletes every key under `prefix` (on every master of a cluster), so runs leave nothing behind. */
export async function deletePrefix (redis: RedisConnection, prefix: string): Promise<void> {
  const client = await connectRedis(redis, { commandTimeoutMs: 5000 })
  try {
    await deleteKeys(client, `${prefix}*`)
  } finally {
    client.disconnect()
  }
}

export interface PrivateRedis {
  url: string
  /** SIGSTOP: the server keeps its connections but answers nothing (the kernel still queues what is sent) */
  pause: () => void
  /** SIGCONT: it runs what was queued meanwhile, in order */
  resume: () => void
}

/**
 * A redis-server of this test's own on a free port (for faults no shared Redis may suffer:
 * SIGSTOP), stopped when the test ends; resumed first if the test left it paused.
 */
export async function startPrivateRedis (t: { teardown: (fn: () => unknown) => void }): Promise<PrivateRedis> {
  if (spawnSync('redis-server', ['--version']).status !== 0) throw new Error('this test needs redis-server (Debian: apt-get install redis-server)')
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const stop = (): void => { child.kill('SIGCONT'); child.kill('SIGKILL') }
  process.on('exit', stop)
  t.teardown(async () => {
    process.off('exit', stop)
    stop()
    await exited
  })
  const url = `redis://127.0.0.1:${port}`
  for (let attempt = 0; !await answers(url); attempt++) {
    if (attempt > 50) throw new Error(`redis-server started on port ${port} but does not answer`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return { url, pause: () => { child.kill('SIGSTOP') }, resume: () => { child.kill('SIGCONT') } }
}
