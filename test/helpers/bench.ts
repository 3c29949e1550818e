// Running the load tool as a user does, in a process of its own: `npm run bench` (bench/cli.ts)
// or `npm run keygate -- bench`. A run that hangs is interrupted (SIGINT, as Ctrl-C would) after
// 50 s, so a test fails instead of waiting for tap's timeout.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { TYPESCRIPT_NODE_ARGS } from './typescript-node.js'

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))

export interface BenchRun { code: number | null; stdout: string; stderr: string }

export async function runBench (args: string[], env: NodeJS.ProcessEnv = {}, entry: string[] = ['bench/cli.ts']): Promise<BenchRun> {
  return await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...TYPESCRIPT_NODE_ARGS, ...entry, ...args], {
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
