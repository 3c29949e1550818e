// keygate as a real process tree (main.ts compiled, build.ts): one gateway, or with
// KEYGATE_WORKERS a cluster's primary and its workers. Its JSON log lines are read as they come;
// pino writes every line with the pid of the process that wrote it, so the access-log line of a
// request (matched by x-request-id) says which worker answered it.
import { spawn, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { send, type RawResponse } from './http.js'
import { deletePrefix, freePort, testRedisUrl, uniquePrefix } from './redis.js'
import { PASSWORD } from './stack.js'
import { compiled } from './build.js'
import { TEST_ENV } from './test-env.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const MAIN = await compiled('gateway/src/main.ts')
const WAIT_MS = 20_000

export type LogLine = Record<string, unknown> & { pid: number; msg: string }

export interface Gateway {
  child: ChildProcessWithoutNullStreams
  lines: LogLine[]
  stderr: () => string
  /** the first log line, present or to come, that `match` accepts */
  waitForLine: (match: (line: LogLine) => boolean, what: string) => Promise<LogLine>
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

export function spawnGateway (t: Test, env: Record<string, string>): Gateway {
  const child = spawn(process.execPath, [MAIN], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', PORT: '0', ...TEST_ENV, ...env }
  })
  t.teardown(() => { child.kill('SIGKILL') })
  const lines: LogLine[] = []
  const waiters = new Set<() => void>()
  let buffered = ''
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString()
    const complete = buffered.split('\n')
    buffered = complete.pop() ?? ''
    for (const text of complete) {
      try { lines.push(JSON.parse(text) as LogLine) } catch { /* not a log line */ }
    }
    for (const wake of waiters) wake()
  })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => { resolve({ code, signal }); for (const wake of waiters) wake() })
  })
  const waitForLine = async (match: (line: LogLine) => boolean, what: string): Promise<LogLine> => await new Promise((resolve, reject) => {
    const check = (): void => {
      const found = lines.find(match)
      if (found !== undefined) { done(); resolve(found) } else if (child.exitCode !== null || child.signalCode !== null) {
        done()
        reject(new Error(`the gateway exited before logging ${what}: ${stderr}`))
      }
    }
    const timer = setTimeout(() => { done(); reject(new Error(`no log line ${what} within ${WAIT_MS} ms: ${stderr}`)) }, WAIT_MS)
    const done = (): void => { clearTimeout(timer); waiters.delete(check) }
    waiters.add(check)
    check()
  })
  return { child, lines, stderr: () => stderr, waitForLine, exited }
}

export interface MeasuredGateway {
  child: ChildProcess
  url: string
  port: number
  pid: number
  exited: Promise<unknown>
}

/**
 * One gateway process on a free port, serving /healthz, for a test that measures it from outside
 * (its memory: rssOf). Its output is not read: stderr passes through, stdout is dropped.
 */
export async function startMeasuredGateway (t: Test, env: Record<string, string>): Promise<MeasuredGateway> {
  const port = await freePort()
  const child = spawn(process.execPath, [MAIN], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', PORT: String(port), ...TEST_ENV, ...env },
    stdio: ['ignore', 'ignore', 'inherit']
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(() => { child.kill('SIGKILL') })
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 30_000
  while ((await send(url, '/healthz').catch(() => undefined))?.status !== 200) {
    if (Date.now() > deadline) throw new Error('the gateway did not start')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { child, url, port, pid: child.pid as number, exited }
}

/** A process's resident set size, in bytes (Linux). */
export function rssOf (pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
  return Number(kb) * 1024
}

export interface Cluster extends Gateway {
  url: string
  workers: number[]
}

export async function startCluster (t: Test, env: Record<string, string>): Promise<Cluster> {
  const gateway = spawnGateway(t, { KEYGATE_WORKERS: '2', ...env })
  const ready = await gateway.waitForLine((l) => /^keygate listens on /.test(l.msg), 'saying it listens')
  const url = /^keygate listens on (http:\/\/\S+) /.exec(ready.msg)?.[1] ?? ''
  return { ...gateway, url, workers: ready.workers as number[] }
}

export function isRunning (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

export async function gone (pids: number[]): Promise<boolean> {
  for (let i = 0; i < 100 && pids.some(isRunning); i++) await new Promise((resolve) => setTimeout(resolve, 50))
  return !pids.some(isRunning)
}

/** The pid of the worker that answered, from its access-log line (matched by x-request-id). */
export async function answeredBy (gateway: Gateway, res: RawResponse): Promise<number> {
  const id = res.headers['x-request-id']
  return (await gateway.waitForLine((l) => l.msg === 'request' && l.reqId === id, `for request ${String(id)}`)).pid
}

/** Redis under a prefix of its own, deleted afterwards, and the user alice (PASSWORD) bootstrapped */
export async function redisEnv (t: Test, label: string): Promise<Record<string, string>> {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix(label)
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  return { REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: prefix, KEYGATE_BOOTSTRAP_USERS: `alice:${PASSWORD}` }
}
