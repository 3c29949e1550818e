// Redis Cluster and Redis Sentinel for tests: real redis-server processes on free ports, in a temp
// dir, started by the test and gone when it ends (processes killed, dir removed), even on failure.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import type { RedisClusterConfig, RedisSentinelConfig } from '../../gateway/src/config/redis.js'
import { freePort } from './redis.js'

interface Teardown { teardown: (fn: () => unknown) => void }

const HOST = '127.0.0.1'
const SLOTS = 16384

export interface TestRedisCluster {
  connection: RedisClusterConfig
  /** the same, as the gateway's environment */
  env: Record<string, string>
  /** a plain client on one master, by its port (for CLUSTER and role checks) */
  node: (port: number) => Redis
  ports: number[]
}

export interface TestRedisSentinel {
  connection: RedisSentinelConfig
  env: Record<string, string>
  masterName: string
  masterPort: number
  replicaPort: number
  /** a plain client on the sentinel */
  sentinel: Redis
  /** a plain client on a data node, by its port */
  node: (port: number) => Redis
}

function requireRedisServer (): void {
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    throw new Error('These tests start their own Redis Cluster and Sentinel and need redis-server: ' +
      'install it (Debian: apt-get install redis-server).')
  }
}

/** A temp dir and the processes started in it; all of it goes when the test ends. */
function workspace (t: Teardown, label: string): { dir: string, start: (args: string[]) => void } {
  const dir = mkdtempSync(join(tmpdir(), `keygate-${label}-`))
  const children: ChildProcess[] = []
  const killAll = (): void => { for (const child of children) if (child.exitCode === null) child.kill('SIGKILL') }
  // A test process killed before its teardown still leaves no redis-server behind.
  process.on('exit', killAll)
  t.teardown(async () => {
    await Promise.all(children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }))
    process.off('exit', killAll)
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    dir,
    start: (args) => { children.push(spawn('redis-server', args, { cwd: dir, stdio: 'ignore' })) }
  }
}

async function waitFor<T> (what: string, attempt: () => Promise<T | undefined>, tries = 100): Promise<T> {
  let last: unknown
  for (let i = 0; i < tries; i++) {
    try {
      const value = await attempt()
      if (value !== undefined) return value
    } catch (err) {
      last = err
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${what}: not after ${tries * 100} ms${last === undefined ? '' : ` (${(last as Error).message})`}`)
}

function client (t: Teardown, port: number, auth: { username?: string, password?: string } = {}): Redis {
  const redis = new Redis({ host: HOST, port, ...auth, maxRetriesPerRequest: 1, retryStrategy: () => 200, lazyConnect: true })
  redis.on('error', () => {})
  t.teardown(() => { redis.disconnect() })
  return redis
}

const serverArgs = (port: number, dir: string): string[] =>
  ['--port', String(port), '--bind', HOST, '--dir', dir, '--save', '', '--appendonly', 'no', '--logfile', join(dir, `${port}.log`)]

/**
 * Three masters with the 16384 slots split between them, reached as user `keygate` with a
 * password (the default user is off, so a client without the credentials is refused).
 */
export async function startRedisCluster (t: Teardown): Promise<TestRedisCluster> {
  requireRedisServer()
  const { dir, start } = workspace(t, 'cluster')
  const username = 'keygate'
  const password = randomBytes(12).toString('hex')
  const ports = [await freePort(), await freePort(), await freePort()]
  const busPorts = [await freePort(), await freePort(), await freePort()]
  ports.forEach((port, i) => {
    start([...serverArgs(port, dir), '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`,
      '--cluster-port', String(busPorts[i]), '--cluster-node-timeout', '2000',
      '--user', 'default', 'off', '--user', username, 'on', `>${password}`, '~*', '&*', '+@all'])
  })
  const clients = new Map(ports.map((port) => [port, client(t, port, { username, password })]))
  const node = (port: number): Redis => clients.get(port) as Redis
  await Promise.all(ports.map(async (port) => await waitFor(`cluster node ${port} answers`, async () => await node(port).ping())))
  const per = Math.ceil(SLOTS / ports.length)
  for (const [i, port] of ports.entries()) {
    await node(port).call('CLUSTER', 'ADDSLOTSRANGE', String(i * per), String(Math.min(SLOTS, (i + 1) * per) - 1))
    await node(port).call('CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1))
  }
  for (const [i, port] of ports.entries()) if (i > 0) await node(ports[0] as number).call('CLUSTER', 'MEET', HOST, String(port), String(busPorts[i]))
  await Promise.all(ports.map(async (port) => await waitFor(`cluster node ${port} sees a whole cluster`, async () => {
    const info = String(await node(port).call('CLUSTER', 'INFO'))
    return /cluster_state:ok/.test(info) && /cluster_known_nodes:3\b/.test(info) ? true : undefined
  })))
  const nodes = ports.map((port) => ({ host: HOST, port }))
  return {
    connection: { mode: 'cluster', nodes, username, password },
    env: {
      KEYGATE_REDIS_CLUSTER_NODES: nodes.map((n) => `${n.host}:${n.port}`).join(','),
      KEYGATE_REDIS_USERNAME: username,
      KEYGATE_REDIS_PASSWORD: password
    },
    node,
    ports
  }
}

/**
 * A master, one replica of it, and one sentinel watching them under `keygate-test`. The data
 * nodes and the sentinel each have their own password.
 */
export async function startRedisSentinel (t: Teardown): Promise<TestRedisSentinel> {
  requireRedisServer()
  const { dir, start } = workspace(t, 'sentinel')
  const masterName = 'keygate-test'
  const password = randomBytes(12).toString('hex')
  const sentinelPassword = randomBytes(12).toString('hex')
  const [masterPort, replicaPort, sentinelPort] = [await freePort(), await freePort(), await freePort()] as [number, number, number]
  // a replica's full sync starts at once: Redis 7's master otherwise waits 5 s
  // (repl-diskless-sync-delay) for more replicas to share the transfer, at the start and again after
  // the failover, when the old master syncs from the new one
  const auth = ['--requirepass', password, '--masterauth', password, '--repl-diskless-sync-delay', '0']
  start([...serverArgs(masterPort, dir), ...auth])
  start([...serverArgs(replicaPort, dir), ...auth, '--replicaof', HOST, String(masterPort)])
  const clients = new Map([masterPort, replicaPort].map((port) => [port, client(t, port, { password })]))
  const node = (port: number): Redis => clients.get(port) as Redis
  await waitFor('the replica is in sync with the master', async () =>
    /master_link_status:up/.test(await node(replicaPort).info('replication')) ? true : undefined)

  const config = join(dir, 'sentinel.conf')
  writeFileSync(config, [
    `port ${sentinelPort}`,
    `bind ${HOST}`,
    `dir ${dir}`,
    `logfile ${join(dir, `${sentinelPort}.log`)}`,
    `requirepass ${sentinelPassword}`,
    `sentinel monitor ${masterName} ${HOST} ${masterPort} 1`,
    `sentinel auth-pass ${masterName} ${password}`,
    `sentinel down-after-milliseconds ${masterName} 2000`,
    `sentinel failover-timeout ${masterName} 10000`,
    ''
  ].join('\n'), { mode: 0o600 })
  start([config, '--sentinel'])
  const sentinel = client(t, sentinelPort, { password: sentinelPassword })
  await waitFor('the sentinel knows the master and its replica', async () => {
    const replicas = await sentinel.call('SENTINEL', 'REPLICAS', masterName) as string[][]
    return replicas.some((fields) => fields.includes(String(replicaPort)) && !String(fields[fields.indexOf('flags') + 1]).includes('down')) ? true : undefined
  })
  const sentinels = [{ host: HOST, port: sentinelPort }]
  return {
    connection: { mode: 'sentinel', sentinels, masterName, sentinelPassword, username: undefined, password },
    env: {
      KEYGATE_REDIS_SENTINELS: `${HOST}:${sentinelPort}`,
      KEYGATE_REDIS_SENTINEL_MASTER: masterName,
      KEYGATE_REDIS_SENTINEL_PASSWORD: sentinelPassword,
      KEYGATE_REDIS_PASSWORD: password
    },
    masterName,
    masterPort,
    replicaPort,
    sentinel,
    node
  }
}

/** Asks the sentinel to fail over now and waits until it names the replica as the master. */
export async function failOver (setup: TestRedisSentinel): Promise<void> {
  await setup.sentinel.call('SENTINEL', 'FAILOVER', setup.masterName)
  await waitFor('the sentinel names the new master', async () => {
    const [, port] = await setup.sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', setup.masterName) as [string, string]
    return Number(port) === setup.replicaPort ? true : undefined
  }, 200)
}
