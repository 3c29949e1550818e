// The parent's side of bench/flood-child.ts: start a flood of requests from another loopback
// address, mark the start of a measurement, stop it and collect what it saw.
import { fork, type ChildProcess } from 'node:child_process'
import { benchModule } from './children.js'
import { sendIfConnected } from './ipc.js'

const CHILD = benchModule('flood-child')
const START_TIMEOUT_MS = 30_000
/** where the flood comes from; the good traffic comes from 127.0.0.1 (Linux routes all of 127/8 to loopback) */
export const FLOOD_ADDRESS = '127.0.0.2'

export interface FloodResult {
  /** answers received since the mark */
  requests: number
  seconds: number
  rps: number
  statuses: Record<string, number>
  /** refusals by status and problem+json code, e.g. "429 RATE_LIMITED" */
  codes: Record<string, number>
  /** connection errors (refused, reset) */
  errors: number
  /** the flooding process's own CPU, % of one core */
  cpuPercent: number
}

export type FloodParentMessage =
  | { type: 'start'; url: string; connections: number; localAddress: string; path: string; headers: Record<string, string> }
  | { type: 'mark' }
  | { type: 'stop' }

export type FloodChildMessage =
  | { type: 'started' }
  | { type: 'result'; result: FloodResult }

export interface Flood {
  /** count from now (the measurement begins) */
  mark: () => void
  /** stop flooding; what it saw since the mark */
  stop: () => Promise<FloodResult>
}

const running = new Set<ChildProcess>()
const gone = (child: ChildProcess): boolean => child.exitCode !== null || child.signalCode !== null || !child.connected

/** Kills every flooder still running (cleanup; also on a synchronous exit). */
export function killAllFloods (): void {
  for (const child of running) child.kill('SIGKILL')
}

export interface FloodOptions {
  url: string
  connections: number
  path: string
  headers: Record<string, string>
}

/** Starts flooding `url` with GETs of `path` with `headers`, from FLOOD_ADDRESS, on `connections` connections. */
export async function startFlood (options: FloodOptions): Promise<Flood> {
  const child = fork(CHILD.entry, [], {
    execArgv: CHILD.execArgv,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    serialization: 'json'
  })
  running.add(child)
  child.once('exit', () => { running.delete(child) })
  const next = async <T extends FloodChildMessage['type']>(type: T): Promise<Extract<FloodChildMessage, { type: T }>> =>
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        done()
        reject(new Error(`the flooder did not answer "${type}" within ${START_TIMEOUT_MS / 1000} s`))
      }, START_TIMEOUT_MS)
      const onMessage = (message: FloodChildMessage): void => {
        if (message.type !== type) return
        done()
        resolve(message as Extract<FloodChildMessage, { type: T }>)
      }
      const onExit = (): void => { done(); reject(new Error('the flooder exited')) }
      function done (): void {
        clearTimeout(timer)
        child.off('message', onMessage)
        child.off('exit', onExit)
      }
      child.on('message', onMessage)
      child.once('exit', onExit)
    })
  const started = next('started')
  sendIfConnected(child, { type: 'start', localAddress: FLOOD_ADDRESS, ...options } satisfies FloodParentMessage)
  try {
    await started
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
  return {
    mark: () => { sendIfConnected(child, { type: 'mark' } satisfies FloodParentMessage) },
    stop: async () => {
      // gone already (Ctrl-C reached it first): there is no result to wait for
      if (gone(child)) throw new Error('the flooder exited')
      const result = next('result')
      sendIfConnected(child, { type: 'stop' } satisfies FloodParentMessage)
      const { result: seen } = await result
      const timer = setTimeout(() => { child.kill('SIGKILL') }, 5000)
      if (child.exitCode === null && child.signalCode === null) await new Promise((resolve) => child.once('exit', resolve))
      clearTimeout(timer)
      return seen
    }
  }
}
