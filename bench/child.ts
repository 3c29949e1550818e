// One measured service in a process of its own, so its CPU time is its own: `node --import tsx
// bench/child.ts upstream|bare|keygate`. It reports its URL over IPC once it listens, answers CPU
// samples (process.cpuUsage: every thread of the process, in microseconds), and exits when told
// to, on SIGINT/SIGTERM, or when the parent goes away (the IPC channel closes), so a killed bench
// run leaves no process behind; a gateway given BENCH_OWNS_PREFIX=1 then also deletes its Redis
// prefix, so it leaves no key either.
//   upstream: the example clients service (upstream-stub) on a free port
//   bare:     buildBareProxy(BENCH_UPSTREAM_URL)
//   keygate:  the gateway as server.ts starts it, configured by its environment (PORT=0, ...)
import { loadConfig } from '../gateway/src/config.js'
import { startGateway } from '../gateway/src/server.js'
import { startUpstream } from '../upstream-stub/src/server.js'
import { buildBareProxy } from './bare-proxy.js'
import type { ChildMessage, ParentMessage } from './ipc.js'
import { deletePrefix } from './redis.js'

/** a stop gets this long (a start still under way included) before the process exits anyway */
const STOP_TIMEOUT_MS = 10_000

interface Running { url: string; close: () => Promise<void> }

function send (message: ChildMessage): void {
  if (process.send !== undefined && process.connected) process.send(message)
}

async function start (role: string): Promise<Running> {
  switch (role) {
    case 'upstream':
      return await startUpstream({ port: 0, host: '127.0.0.1', logger: false })
    case 'bare': {
      const upstream = process.env.BENCH_UPSTREAM_URL
      if (upstream === undefined) throw new Error('BENCH_UPSTREAM_URL is not set')
      const app = await buildBareProxy(upstream)
      const url = await app.listen({ port: 0, host: '127.0.0.1' })
      return { url, close: async () => { await app.close() } }
    }
    case 'keygate':
      return await startGateway({ config: loadConfig(process.env) })
    default:
      throw new Error(`unknown role "${role}" (upstream, bare, keygate)`)
  }
}

async function deleteOwnPrefix (): Promise<void> {
  const { REDIS_URL: url, KEYGATE_REDIS_PREFIX: prefix, BENCH_OWNS_PREFIX: owns } = process.env
  if (owns === '1' && url !== undefined && prefix !== undefined) await deletePrefix(url, prefix)
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
    const { user, system } = process.cpuUsage()
    send({ type: 'cpu', id: message.id, user, system })
  } else if (message.type === 'stop') {
    stop()
  }
})

started.then((service) => {
  if (!stopping) send({ type: 'ready', url: service.url, pid: process.pid })
}, (err: unknown) => {
  process.stderr.write(`bench child ${role}: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
  process.exit(1)
})
