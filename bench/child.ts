// One measured service in a process of its own, so its CPU time is its own: `node --import tsx
// bench/child.ts upstream|bare|mcp|keygate`. It reports its URL over IPC once it listens, answers CPU
// samples (process.cpuUsage: every thread of the process, in microseconds; for keygate with
// KEYGATE_WORKERS > 1, which makes this process the cluster's primary, plus the CPU time of every
// process below it, the workers, read from /proc), and exits when told
// to, on SIGINT/SIGTERM, or when the parent goes away (the IPC channel closes), so a killed bench
// run leaves no process behind; a gateway given BENCH_OWNS_PREFIX=1 then also deletes its Redis
// prefix, so it leaves no key either.
//   upstream: the example clients service (upstream-stub) on a free port
//   bare:     buildBareProxy(BENCH_UPSTREAM_URL)
//   mcp:      an MCP server's answers to JSON-RPC requests (bench/mcp-upstream.ts, --scenario mcp)
//   keygate:  the gateway as main.ts starts it, configured by its environment (PORT=0, ...),
//             with KEYGATE_WORKERS > 1 as main.ts's primary does (process/cluster.ts); with
//             KEYGATE_DECISION_PORT (one process only), it reports its decision listener's URL too
// Each role loads only its own modules (imported when it starts): the example service's process
// does not load the gateway, which would cost it most of a second of CPU at every start.
import { readdirSync, readFileSync } from 'node:fs'
import { sendIfConnected, type ChildMessage, type ParentMessage } from './ipc.js'
import { parseStat, ticksPerSecond } from './proc.js'

/** a stop gets this long (a start still under way included) before the process exits anyway */
const STOP_TIMEOUT_MS = 10_000

interface Running {
  url: string
  /** keygate with KEYGATE_DECISION_PORT: its decision listener */
  decisionUrl?: string | undefined
  close: () => Promise<void>
  /** CPU time so far, microseconds: this process's, and its workers' when it has any */
  cpuUsage: () => NodeJS.CpuUsage
}

const ownCpuUsage = (): NodeJS.CpuUsage => process.cpuUsage()

/**
 * CPU time (user + system) of every process below this one, microseconds, from Linux's /proc
 * (to the clock tick: 10 ms, against seconds per measurement). A process that has exited no
 * longer counts: the workers run for the whole bench.
 */
function descendantsCpuUsage (): NodeJS.CpuUsage {
  const stats = new Map<number, { ppid: number; user: number; system: number }>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let text: string
    try { text = readFileSync(`/proc/${entry}/stat`, 'utf8') } catch { continue }
    stats.set(Number(entry), parseStat(text))
  }
  const ticks = { user: 0, system: 0 }
  const below = [process.pid]
  for (let parent = below.pop(); parent !== undefined; parent = below.pop()) {
    for (const [pid, stat] of stats) {
      if (stat.ppid !== parent) continue
      ticks.user += stat.user
      ticks.system += stat.system
      below.push(pid)
    }
  }
  const micros = 1e6 / ticksPerSecond()
  return { user: ticks.user * micros, system: ticks.system * micros }
}

async function startKeygate (): Promise<Running> {
  const { loadConfig } = await import('../gateway/src/config/env.js')
  const config = loadConfig(process.env)
  if (config.workers.count === 1) {
    const { startGateway } = await import('../gateway/src/process/start.js')
    const gateway = await startGateway({ config })
    return { ...gateway, cpuUsage: ownCpuUsage }
  }
  // The load goes to the workers: CPU per request must count them, or it would be the primary's
  // few microseconds. This reads /proc, so it needs Linux.
  descendantsCpuUsage()
  const [{ pino }, { startCluster }] = await Promise.all([import('pino'), import('../gateway/src/process/cluster.js')])
  const workers = await startCluster({ workers: config.workers.count, log: pino({ level: config.logLevel, name: 'keygate-primary' }) })
  return {
    url: workers.url,
    close: async () => { if (!await workers.close()) throw new Error('a worker did not shut down cleanly') },
    cpuUsage: () => {
      const own = process.cpuUsage()
      const workers = descendantsCpuUsage()
      return { user: own.user + workers.user, system: own.system + workers.system }
    }
  }
}

function send (message: ChildMessage): void {
  sendIfConnected(process, message)
}

async function start (role: string): Promise<Running> {
  switch (role) {
    case 'upstream': {
      const { startUpstream } = await import('../upstream-stub/src/server.js')
      return { ...await startUpstream({ port: 0, host: '127.0.0.1', logger: false }), cpuUsage: ownCpuUsage }
    }
    case 'bare': {
      const upstream = process.env.BENCH_UPSTREAM_URL
      if (upstream === undefined) throw new Error('BENCH_UPSTREAM_URL is not set')
      const { buildBareProxy } = await import('./bare-proxy.js')
      const app = await buildBareProxy(upstream)
      const url = await app.listen({ port: 0, host: '127.0.0.1' })
      return { url, close: async () => { await app.close() }, cpuUsage: ownCpuUsage }
    }
    case 'mcp': {
      const { startMcpUpstream } = await import('./mcp-upstream.js')
      return { ...await startMcpUpstream(), cpuUsage: ownCpuUsage }
    }
    case 'keygate':
      return await startKeygate()
    default:
      throw new Error(`unknown role "${role}" (upstream, bare, mcp, keygate)`)
  }
}

async function deleteOwnPrefix (): Promise<void> {
  const { REDIS_URL: url, KEYGATE_REDIS_PREFIX: prefix, BENCH_OWNS_PREFIX: owns } = process.env
  if (owns === '1' && url !== undefined && prefix !== undefined) await (await import('./redis.js')).deletePrefix(url, prefix)
}

const role = process.argv[2] ?? ''
const started = start(role)
let stopping = false

// Installed before the service starts: a parent that goes away during a start is noticed too.
function stop (): void {
  if (stopping) return
  stopping = true
  setTimeout(() => process.exit(1), STOP_TIMEOUT_MS).unref()
  started
    .then(async (service) => { await service.close() }, () => {})
    .then(deleteOwnPrefix)
    .then(() => process.exit(0), () => process.exit(1))
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
process.on('disconnect', stop)
// the parent may have gone while this module was still loading, before there was a listener
if (!process.connected) stop()
process.on('message', (message: ParentMessage) => {
  if (message.type === 'cpu') {
    // a sample is only asked for once the service listens
    started.then((service) => {
      send({ type: 'cpu', id: message.id, ...service.cpuUsage() })
    }, () => {})
  } else if (message.type === 'stop') {
    stop()
  }
})

started.then((service) => {
  if (!stopping) send({ type: 'ready', url: service.url, pid: process.pid, ...(service.decisionUrl !== undefined && { decisionUrl: service.decisionUrl }) })
}, (err: unknown) => {
  process.stderr.write(`bench child ${role}: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exit(1)
})
