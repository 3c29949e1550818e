// The MCP project's own reference server, @modelcontextprotocol/server-everything (npm, a
// devDependency), in its Streamable HTTP mode, as its README starts it (`streamableHttp`, PORT):
// an independent MCP server behind keygate (issue 42, point 9). Started as a child process under
// Node >= 22 (the devDependency `node`; its dependencies ask for it), with PORT=0 and
// test/helpers/loopback-listen.mjs preloaded (it listens on every interface otherwise): on a
// free loopback port, stopped when the test ends. It answers at /mcp, keeps a session per
// initialize, opens a GET stream per session, and streams a long-running tool's progress.
import { spawn, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)

/** Node >= 22 from the devDependency `node` (Node 24), whatever node runs the tests. */
export const NODE_24 = require.resolve('node/bin/node')
const EVERYTHING = require.resolve('@modelcontextprotocol/server-everything/dist/index.js')
const LOOPBACK = fileURLToPath(new URL('./loopback-listen.mjs', import.meta.url))

export interface EverythingServer {
  /** http://127.0.0.1:PORT/mcp */
  url: string
  /** what it logged so far (it logs each request it receives: "Received MCP POST request") */
  output: () => string
  /** kills it (SIGKILL: it keeps nothing) and resolves once it has exited; also done when the test ends */
  stop: () => Promise<void>
}

export async function startEverything (t: { teardown: (fn: () => unknown) => void }): Promise<EverythingServer> {
  const child: ChildProcess = spawn(NODE_24, ['--import', LOOPBACK, EVERYTHING, 'streamableHttp'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve() }))
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  }
  t.teardown(stop)
  child.stdout?.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const port = await new Promise<string>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      const found = /loopback-listen: (\d+)/.exec(output)
      if (found !== null) resolve(found[1] as string)
    })
    void exited.then(() => { reject(new Error(`server-everything exited: ${output}`)) })
  })
  return { url: `http://127.0.0.1:${port}/mcp`, output: () => output, stop }
}
