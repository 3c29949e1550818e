// nginx for --scenario decision: found (with the auth_request module the decision configuration
// needs), given its configuration, run in the foreground as one process (master_process off,
// worker_processes 1: its CPU time is that one process's, as keygate's is) with a prefix of its own
// in a temp dir, and stopped and removed when the bench ends, also on Ctrl-C.
//   g: nginx alone in front of the example service, as the decision configuration's application
//      location is, without the decision
//   h: the decision configuration operators are given (docs/decision/nginx.md, "The
//      configuration"), read from that page as it is, with its three `# EDIT:` lines made to
//      point at this run's listen port, keygate's decision listener and the example service
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { processCpuMicros } from './proc.js'

export const DEFAULT_NGINX = '/usr/sbin/nginx'
/** the page (the checkout's, from bench/ or, compiled for the tests, from dist/bench/), its section and the fence of the configuration (h) */
export const DECISION_PAGE = fileURLToPath(new URL(`${import.meta.url.endsWith('.ts') ? '..' : '../..'}/docs/decision/nginx.md`, import.meta.url))
const DECISION_HEADING = '## The configuration'
const READY_TIMEOUT_MS = 10_000
const INSTALL = 'install it (Debian, Ubuntu: apt-get install nginx-light; nginx.org\'s packages have the module too)'

/** The nginx to run: `path` (--nginx), else Debian's, else one on PATH; it must have auth_request. Throws saying how to get one. */
export function findNginx (path: string | undefined): string {
  const candidates = path !== undefined ? [path] : [DEFAULT_NGINX, 'nginx']
  for (const candidate of candidates) {
    const built = spawnSync(candidate, ['-V'], { encoding: 'utf8' })
    if (built.error !== undefined || built.status !== 0) continue
    if (!`${built.stderr}${built.stdout}`.includes('--with-http_auth_request_module')) {
      throw new Error(`--scenario decision: ${candidate} was built without the auth_request module (nginx -V shows no ` +
        `--with-http_auth_request_module), which the decision configuration needs: ${INSTALL}, or name another with --nginx PATH`)
    }
    return candidate
  }
  throw new Error(`--scenario decision needs nginx (g, h), and there is none ${path !== undefined ? `at ${path}` : `at ${DEFAULT_NGINX} or on PATH`}: ` +
    `${INSTALL}, or name one with --nginx PATH; or run keygate inline alone: --scenario decision --only d`)
}

/** host:port of a URL, as nginx's `server` and `listen` take it */
const address = (url: string): string => new URL(url).host

/** The decision configuration for this run's listen port, keygate's decision listener and the service. */
export type DecisionConfig = (listen: number, decisionUrl: string, serviceUrl: string) => string

/**
 * The decision configuration of docs/decision/nginx.md (the `nginx` block under "The
 * configuration"), its `# EDIT:` lines to be made to point here. Throws when the page no longer
 * has it in that shape, rather than measure another configuration.
 */
export function loadDecisionConfig (page = DECISION_PAGE): DecisionConfig {
  let text: string
  try {
    text = readFileSync(page, 'utf8')
  } catch (err) {
    throw new Error(`--scenario decision runs the nginx configuration of ${page}: ${(err as Error).message}`)
  }
  const lines = text.split('\n')
  const heading = lines.indexOf(DECISION_HEADING)
  const open = lines.findIndex((line, i) => heading >= 0 && i > heading && line.trim() === '```nginx')
  const close = lines.findIndex((line, i) => open >= 0 && i > open && line.trim() === '```')
  if (open < 0 || close < 0 || lines.slice(heading + 1, open).some((line) => /^#{1,2} /.test(line))) {
    throw new Error(`${page}: no \`\`\`nginx block under "${DECISION_HEADING}", the configuration --scenario decision runs`)
  }
  // each `# EDIT:` line: what it sets (listen, or the upstream whose server it names)
  let upstream = ''
  const block = lines.slice(open + 1, close).map((line) => {
    upstream = /^\s*upstream\s+(\S+)\s*\{/.exec(line)?.[1] ?? upstream
    if (!line.includes('# EDIT:')) return { line }
    const directive = line.trim().split(/\s+/)[0]
    const edit = directive === 'listen' ? 'listen' : directive === 'server' ? upstream : `${directive ?? ''} in ${upstream}`
    if (!['listen', 'keygate_decision', 'app'].includes(edit)) throw new Error(`${page}: an \`# EDIT:\` line --scenario decision cannot fill: ${line.trim()}`)
    return { line, edit, indent: /^\s*/.exec(line)?.[0] ?? '' }
  })
  for (const edit of ['listen', 'keygate_decision', 'app']) {
    if (block.filter((l) => l.edit === edit).length !== 1) {
      throw new Error(`${page}: the configuration has not one \`# EDIT:\` line for ${edit === 'listen' ? 'its listen address' : `upstream ${edit}`}`)
    }
  }
  return (listen, decisionUrl, serviceUrl) => block.map(({ line, edit, indent }) =>
    edit === 'listen'
      ? `${indent}listen 127.0.0.1:${listen};`
      : edit === 'keygate_decision'
        ? `${indent}server ${address(decisionUrl)};`
        : edit === 'app' ? `${indent}server ${address(serviceUrl)};` : line).join('\n')
}

/** (g): nginx alone in front of the service: the decision configuration's `upstream app` and `location /`, without the decision. */
export function plainConfig (listen: number, serviceUrl: string): string {
  return `
upstream bench_service {
    server ${address(serviceUrl)};
    keepalive 128;
}
server {
    listen 127.0.0.1:${listen};
    location / {
        proxy_pass http://bench_service;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $http_host;
    }
}
`
}

/** A port nothing listens on now (nginx is told its ports; there is a moment in which another could take it). */
export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => { resolve(port) })
    })
  })
}

async function answers (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve(true) })
    socket.once('error', () => { resolve(false) })
  })
}

/** The temp-file directives of the modules this nginx has (nginx-light leaves some out). */
function tempPaths (binary: string, dir: string): string {
  const built = spawnSync(binary, ['-V'], { encoding: 'utf8' }).stderr ?? ''
  return ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .filter((module) => module === 'client_body' || !built.includes(`--without-http_${module}_module`))
    .map((module) => `    ${module}_temp_path ${join(dir, module)};`)
    .join('\n')
}

export interface RunningNginx {
  pid: number
  /** CPU time so far, microseconds (user + system) */
  cpuMicros: () => Promise<number>
  stop: () => Promise<void>
}

const running = new Set<ChildProcess>()

/**
 * nginx running `servers` (what goes in its `http` block) on `ports`, once it answers on all of
 * them. No access log: keygate logs no line per request at the bench's log level either. The
 * decision configuration is written for nginx's `http` block, and goes in it as it is.
 */
export async function startNginx (binary: string, servers: string, ports: number[], connections: number): Promise<RunningNginx> {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-nginx-'))
  const errorLog = join(dir, 'error.log')
  writeFileSync(join(dir, 'nginx.conf'), `
daemon off;
master_process off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${errorLog} warn;
events { worker_connections ${Math.max(1024, connections * 4)}; }
http {
    access_log off;
    # the load generator's connections last the run, as they do to keygate inline (Node's server
    # has no such limit); nginx's default, 1000, would close each one every 1000 requests
    keepalive_requests 1000000;
${tempPaths(binary, dir)}
${servers}
}
`)
  // -e: the error log before the configuration is read (else /var/log/nginx/error.log)
  const child = spawn(binary, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', errorLog], { stdio: ['ignore', 'ignore', 'pipe'] })
  running.add(child)
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const exited = new Promise<void>((resolve) => child.once('exit', () => { running.delete(child); resolve() }))
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => { child.kill('SIGKILL') }, 5000)
      await exited
      clearTimeout(timer)
    }
    rmSync(dir, { recursive: true, force: true })
  }
  const log = (): string => { try { return readFileSync(errorLog, 'utf8') } catch { return '' } }
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop()
      throw new Error(`nginx exited at its start (${child.signalCode ?? `code ${child.exitCode}`}): ${`${stderr}${log()}`.trim()}`)
    }
    if ((await Promise.all(ports.map(answers))).every(Boolean)) break
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`nginx does not listen on ${ports.join(', ')} after ${READY_TIMEOUT_MS / 1000} s: ${`${stderr}${log()}`.trim()}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const pid = child.pid as number
  return { pid, cpuMicros: async () => processCpuMicros(pid), stop }
}

/** Last resort on a synchronous exit: SIGKILL any nginx still running (its temp dir stays). */
export function killAllNginxNow (): void {
  for (const child of running) child.kill('SIGKILL')
}
