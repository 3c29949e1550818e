// Running the load tool as a user does, in a process of its own: `npm run bench` (bench/cli.ts)
// or `npm run keygate -- bench`. By default the bench compiled (build.ts), its children too: the
// same code on plain node, without tsx's half second of loading in every process; given `entry`,
// from the sources under tsx, as the npm scripts run it. A run that hangs is interrupted (SIGINT,
// as Ctrl-C would) after 50 s, so a test fails instead of waiting for tap's timeout.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { compiled } from './build.js'
import { TEST_SCRYPT_LOG_N } from './test-env.js'
import { TYPESCRIPT_NODE_ARGS } from './typescript-node.js'

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))

export interface BenchRun { code: number | null; stdout: string; stderr: string }

export async function runBench (args: string[], env: NodeJS.ProcessEnv = {}, entry?: string[]): Promise<BenchRun> {
  const command = entry === undefined ? [await compiled('bench/cli.ts')] : [...TYPESCRIPT_NODE_ARGS, ...entry]
  return await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...command, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
    const timer = setTimeout(() => { child.kill('SIGINT') }, 50_000)
    child.on('error', reject)
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }) })
  })
}

/**
 * the smallest settings that still run every step: a second per configuration, no warm-up, one
 * round; and the gateways the bench starts hash passwords at the cost every keygate of the tests
 * has (test-env.ts: the bench's own bootstrap and logins otherwise cost each gateway 2 scrypts at the default)
 */
export const TINY = [
  '--duration', '1', '--warmup', '0', '--rounds', '1', '--connections', '4', '--env', `KEYGATE_PASSWORD_SCRYPT_LOG_N=${TEST_SCRYPT_LOG_N}`
]

/** the process is still running */
export function alive (pid: number): boolean {
  try { process.kill(pid, 0); return true } catch { return false }
}

/** every Redis key under `prefix` (a run must leave none behind) */
export async function keysUnder (url: string, prefix: string): Promise<string[]> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 })
  try { return await client.keys(`${prefix}*`) } finally { client.disconnect() }
}

/** a folder for the reports, removed after the test */
export function outDir (t: { teardown: (fn: () => unknown) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-test-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  return dir
}
