// A keygate process started by a test as an operator starts it (npm start, keygate serve, keygate
// demo): given only PATH, PORT=0 and `env`; resolved once its startup line names its URL.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))

export interface Listening { child: ChildProcessWithoutNullStreams; url: string; stdout: () => string; stderr: () => string }

/** `script` and `args` run under tsx from the repository root. */
export async function startListening (script: string, args: string[], env: Record<string, string>): Promise<Listening> {
  const child = spawn(process.execPath, ['--conditions=keygate-source', '--import', 'tsx', script, ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', PORT: '0', ...env }
  })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const match = /keygate listens on (http:\/\/[0-9.:]+)/.exec(stdout)
      if (match !== null) resolve(match[1] as string)
    })
    child.on('exit', (code) => { reject(new Error(`${[script, ...args].join(' ')} exited with ${code}: ${stderr}`)) })
  })
  return { child, url, stdout: () => stdout, stderr: () => stderr }
}

/** Sends `signal` and resolves with the exit code. */
export async function exitOn (child: ChildProcessWithoutNullStreams, signal: NodeJS.Signals): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  child.kill(signal)
  return await exited
}
