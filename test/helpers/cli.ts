// `keygate ...` as an operator runs it: the compiled command (build.ts) in a child process with
// only the given environment (and PATH), `stdin` written and closed; or runCli in this process
// (inProcess).
import { spawn } from 'node:child_process'
import { PassThrough } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { runCli } from '../../gateway/src/cli/keygate.js'
import { compiled } from './build.js'
import { TEST_ENV } from './test-env.js'

const root = fileURLToPath(new URL('../..', import.meta.url))

export interface CliResult { code: number | null; stdout: string; stderr: string }

export async function keygateCli (args: string[], stdin: string, env: Record<string, string>): Promise<CliResult> {
  const child = spawn(process.execPath, [await compiled('gateway/src/cli/keygate.ts'), ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...TEST_ENV, ...env }
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  child.stdin.end(stdin)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  return { code, stdout, stderr }
}

/** `text` as one word of a bash command line */
const quoted = (text: string): string => `'${text.replaceAll("'", "'\\''")}'`

export interface PipedResult { code: number; stderr: string; readerStdout: Buffer }

/**
 * `keygate ARGS | READER` in bash (the compiled command): keygate's exit status and its stderr, and what the
 * reader (a command and its arguments, e.g. head -c 100) printed.
 */
export async function keygatePiped (args: string[], reader: string[], env: Record<string, string>): Promise<PipedResult> {
  const keygate = [process.execPath, await compiled('gateway/src/cli/keygate.ts'), ...args].map(quoted).join(' ')
  // fd 1: the reader's output; fd 3: keygate's stderr; fd 2: keygate's exit status
  const script = `${keygate} 2>&3 | ${reader.map(quoted).join(' ')}; echo "\${PIPESTATUS[0]}" >&2`
  const child = spawn('bash', ['-c', script], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...TEST_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'pipe']
  })
  const stdout: Buffer[] = []
  let status = ''
  let stderr = ''
  const output = (fd: number): NodeJS.ReadableStream => child.stdio[fd] as NodeJS.ReadableStream
  output(1).on('data', (chunk: Buffer) => { stdout.push(chunk) })
  output(2).on('data', (chunk: Buffer) => { status += chunk.toString() })
  output(3).on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  await new Promise((resolve) => child.on('close', resolve))
  return { code: Number(status.trim()), stderr, readerStdout: Buffer.concat(stdout) }
}

/** runCli in this process, with `env` as its environment: what it printed, or the error it threw */
export async function inProcess (args: string[], env: Record<string, string>): Promise<{ stdout: string; error: Error | undefined }> {
  const out = new PassThrough()
  let stdout = ''
  out.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  try {
    await runCli(args, { stdin: process.stdin, stdout: out as unknown as typeof process.stdout, env: { ...TEST_ENV, ...env } })
    return { stdout, error: undefined }
  } catch (err) {
    return { stdout, error: err as Error }
  }
}
