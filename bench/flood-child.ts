// The flood of `--scenario flood`, in a process of its own so that its CPU is not the load
// generator's: one request on each of N keep-alive connections, the next as soon as its answer is
// in (as fast as the gateway answers), over sockets bound to another loopback address than the good
// traffic's (autocannon cannot bind its sockets; undici's Pool can). Started by bench/flood.ts:
//   parent -> { type: 'start', ... }   begin flooding, answer { type: 'started' }
//   parent -> { type: 'mark' }         the measurement begins: count from now
//   parent -> { type: 'stop' }         stop, answer { type: 'result', ... } and exit
// It exits too when the parent goes away (the IPC channel closes).
import { Pool } from 'undici'
import type { FloodChildMessage, FloodParentMessage, FloodResult } from './flood.js'
import { sendIfConnected } from './ipc.js'

interface Counting {
  since: number
  cpu: NodeJS.CpuUsage
  requests: number
  errors: number
  statuses: Record<string, number>
  codes: Record<string, number>
}
const fresh = (): Counting => ({ since: performance.now(), cpu: process.cpuUsage(), requests: 0, errors: 0, statuses: {}, codes: {} })
const state: { stopped: boolean; pool: Pool | undefined } = { stopped: false, pool: undefined }
let counting = fresh()

function send (message: FloodChildMessage): void {
  sendIfConnected(process, message)
}

async function loop (pool: Pool, path: string, headers: Record<string, string>): Promise<void> {
  while (!state.stopped) {
    try {
      const res = await pool.request({ path, method: 'GET', headers })
      const text = await res.body.text()
      const status = String(res.statusCode)
      counting.requests++
      counting.statuses[status] = (counting.statuses[status] ?? 0) + 1
      if (res.statusCode >= 400) {
        let code = ''
        try { code = String((JSON.parse(text) as { code?: unknown }).code ?? '') } catch {}
        const key = code === '' ? status : `${status} ${code}`
        counting.codes[key] = (counting.codes[key] ?? 0) + 1
      }
    } catch {
      if (state.stopped) return
      counting.errors++
      // a refused or reset connection: do not spin
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
}

function result (): FloodResult {
  const seconds = (performance.now() - counting.since) / 1000
  const cpu = process.cpuUsage(counting.cpu)
  return {
    requests: counting.requests,
    seconds: Math.round(seconds * 1000) / 1000,
    rps: Math.round((counting.requests / seconds) * 10) / 10,
    statuses: counting.statuses,
    codes: counting.codes,
    errors: counting.errors,
    cpuPercent: Math.round(((cpu.user + cpu.system) / 1e6 / seconds) * 1000) / 10
  }
}

const loops: Array<Promise<void>> = []
process.on('message', (message: FloodParentMessage) => {
  if (message.type === 'start') {
    const pool = state.pool = new Pool(message.url, { connections: message.connections, pipelining: 1, localAddress: message.localAddress })
    for (let i = 0; i < message.connections; i++) loops.push(loop(pool, message.path, message.headers))
    send({ type: 'started' })
  } else if (message.type === 'mark') {
    counting = fresh()
  } else if (message.type === 'stop') {
    state.stopped = true
    send({ type: 'result', result: result() })
    // answers still held by the gateway need not be waited for
    const pool = state.pool
    if (pool === undefined) process.exit(0)
    else pool.destroy().catch(() => {}).finally(() => process.exit(0))
  }
})
process.on('disconnect', () => { process.exit(0) })
