// The parent's side of bench/child.ts: start a service in its own process, sample its CPU time,
// stop it. Every child started here is registered for cleanup, which kills what is left.
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { sendIfConnected, type ChildMessage, type ParentMessage } from './ipc.js'

/** this module runs from its TypeScript source (npm run bench), or compiled (the tests run the bench compiled, as they do the gateway) */
const FROM_SOURCE = import.meta.url.endsWith('.ts')

/**
 * The bench's module `name` (child, flood-child) beside this one, to fork, and the Node.js flags
 * it needs: from the sources, its .ts under tsx (resolved from here: the children load TypeScript
 * whatever the working directory) with the keygate-source condition; compiled, its .js on plain node.
 */
export function benchModule (name: string): { entry: string; execArgv: string[] } {
  return {
    entry: fileURLToPath(new URL(`./${name}${FROM_SOURCE ? '.ts' : '.js'}`, import.meta.url)),
    execArgv: FROM_SOURCE ? ['--conditions=keygate-source', '--import', import.meta.resolve('tsx')] : []
  }
}

const CHILD = benchModule('child')
const READY_TIMEOUT_MS = 30_000
const STDERR_TAIL_BYTES = 8192

export type Role = 'upstream' | 'bare' | 'mcp' | 'keygate'

export interface Service {
  name: string
  url: string
  /** keygate started with KEYGATE_DECISION_PORT: its decision listener */
  decisionUrl: string | undefined
  pid: number
  /** CPU time so far, microseconds (user + system): the whole process, and its cluster workers if it has any */
  cpuMicros: () => Promise<number>
  stop: () => Promise<void>
}

const running = new Set<ChildProcess>()

/** Starts `role` with exactly `env` (plus PATH-like basics the parent has) and waits until it listens. */
/** `nodeArgs`: more Node.js flags for the child (e.g. --cpu-prof). */
export async function startService (name: string, role: Role, env: NodeJS.ProcessEnv, nodeArgs: string[] = []): Promise<Service> {
  const child = fork(CHILD.entry, [role], {
    env,
    execArgv: [...CHILD.execArgv, ...nodeArgs],
    // stdout (the gateway's log lines) is dropped, so logging costs the child what it costs in
    // production and nothing here; stderr is kept to explain a failed start
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    serialization: 'json'
  })
  running.add(child)
  child.once('exit', () => { running.delete(child) })
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => { stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES) })

  const ready = await new Promise<{ url: string; pid: number; decisionUrl: string | undefined }>((resolve, reject) => {
    const timer = setTimeout(() => { fail(new Error(`did not start within ${READY_TIMEOUT_MS / 1000} s`)) }, READY_TIMEOUT_MS)
    const onMessage = (message: ChildMessage): void => {
      if (message.type !== 'ready') return
      clearTimeout(timer)
      child.off('exit', onExit)
      resolve({ url: message.url, pid: message.pid, decisionUrl: message.decisionUrl })
    }
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      fail(new Error(`exited before it listened (${signal ?? `code ${code}`})`))
    }
    function fail (err: Error): void {
      clearTimeout(timer)
      child.off('message', onMessage)
      child.kill('SIGKILL')
      // stderr may still be arriving: give it a moment
      setTimeout(() => { reject(new Error(`${name}: ${err.message}${stderr.trim() === '' ? '' : `\n${stderr.trim()}`}`)) }, 100)
    }
    child.on('message', onMessage)
    child.once('exit', onExit)
  })

  let nextId = 0
  const pending = new Map<number, (micros: number) => void>()
  child.on('message', (message: ChildMessage) => {
    if (message.type !== 'cpu') return
    pending.get(message.id)?.(message.user + message.system)
    pending.delete(message.id)
  })
  const cpuMicros = async (): Promise<number> => await new Promise((resolve, reject) => {
    const id = ++nextId
    pending.set(id, resolve)
    if (!sendIfConnected(child, { type: 'cpu', id } satisfies ParentMessage)) {
      pending.delete(id)
      reject(new Error(`${name} is gone${stderr.trim() === '' ? '' : `: ${stderr.trim()}`}`))
    }
  })
  return { name, url: ready.url, decisionUrl: ready.decisionUrl, pid: ready.pid, cpuMicros, stop: async () => { await stopChild(child) } }
}

async function stopChild (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve() }))
  if (!sendIfConnected(child, { type: 'stop' } satisfies ParentMessage)) child.kill('SIGTERM')
  const timer = setTimeout(() => { child.kill('SIGKILL') }, 5000)
  await exited
  clearTimeout(timer)
}

/** Stops every child still running (cleanup, also on Ctrl-C). */
export async function stopAllServices (): Promise<void> {
  await Promise.all([...running].map(stopChild))
}

/** Last resort on a synchronous exit: no waiting possible, so SIGKILL whatever is left. */
export function killAllServicesNow (): void {
  for (const child of running) child.kill('SIGKILL')
}
