// A keygate process started by a test as an operator starts it (npm start, keygate serve, keygate
// demo): given only PATH, PORT=0 and `env`; resolved once its startup line names its URL.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { connect } from 'node:net'
import { fileURLToPath } from 'node:url'
import { TEST_ENV } from './test-env.js'
import { TYPESCRIPT_NODE_ARGS } from './typescript-node.js'

const root = fileURLToPath(new URL('../..', import.meta.url))

export interface Listening {
  child: ChildProcessWithoutNullStreams
  /** the first group of what `ready` matched: where it listens */
  url: string
  /** all that `ready` matched */
  match: RegExpExecArray
  stdout: () => string
  stderr: () => string
}

/** keygate's startup line (JSON or readable), with its URL */
const KEYGATE_LISTENS = /keygate listens on (http:\/\/[0-9.:]+)/

/** `script` and `args` run under tsx from the repository root. */
export async function startListening (script: string, args: string[], env: Record<string, string>): Promise<Listening> {
  return await startCommand(process.execPath, [...TYPESCRIPT_NODE_ARGS, script, ...args], env, root)
}

/**
 * Any command that starts keygate (an installed `keygate serve`, say), run in `cwd`; resolved once
 * its stdout matches `ready` (by default keygate's startup line), whose first group is the URL.
 * `detached`: in a process group of its own, as a terminal runs a command (see `interruptGroup`).
 */
export async function startCommand (command: string, args: string[], env: Record<string, string>, cwd: string,
  { detached = false, ready = KEYGATE_LISTENS }: { detached?: boolean; ready?: RegExp } = {}): Promise<Listening> {
  const child = spawn(command, args, { cwd, detached, env: { PATH: process.env.PATH ?? '', PORT: '0', ...TEST_ENV, ...env } })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const found = ready.exec(stdout)
      if (found !== null) resolve(found)
    })
    child.on('exit', (code) => { reject(new Error(`${[command, ...args].join(' ')} exited with ${code}: ${stderr}`)) })
  })
  return { child, url: match[1] as string, match, stdout: () => stdout, stderr: () => stderr }
}

/** Sends `signal` and resolves with the exit code. */
export async function exitOn (child: ChildProcessWithoutNullStreams, signal: NodeJS.Signals): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  child.kill(signal)
  return await exited
}

/**
 * Ctrl-C in a terminal: SIGINT (or `signal`) to the child's whole process group (started
 * `detached`); resolves with its exit code, at once when it has already exited.
 */
export async function interruptGroup (child: ChildProcessWithoutNullStreams, signal: NodeJS.Signals = 'SIGINT'): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  process.kill(-(child.pid as number), signal)
  return await exited
}

/** Whether something accepts connections at `url`'s host and port. */
export async function portAnswers (url: string): Promise<boolean> {
  const { hostname, port } = new URL(url)
  return await new Promise((resolve) => {
    const socket = connect(Number(port), hostname)
    socket.once('connect', () => { socket.destroy(); resolve(true) })
    socket.once('error', () => { resolve(false) })
  })
}
