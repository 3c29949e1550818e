// A real nginx (Debian's) in front of keygate, as operators run it: /usr/sbin/nginx, installed
// once with apt-get (nginx-light, else nginx) when missing and the tests run as root. Each nginx
// runs in the foreground as one process on a free port, with its own prefix in a temp dir (config,
// pid, logs, temp files), and is stopped and removed when the test ends.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { installedWithApt, type Found } from './apt.js'
import { portAnswers } from './listening.js'
import { freePort } from './redis.js'

export const NGINX_BINARY = '/usr/sbin/nginx'

interface Teardown { teardown: (fn: () => unknown) => void }

let found: Found | undefined

/**
 * nginx's path, installing it once per test process when missing (nginx-light, else nginx); else
 * why there is none, for the tests to skip with (only where it cannot be installed: not root, no
 * apt-get, the install failed).
 */
export function findNginx (): Found {
  found ??= installedWithApt(NGINX_BINARY, () => existsSync(NGINX_BINARY) ? NGINX_BINARY : undefined, ['nginx-light'], ['nginx'])
  return found
}

export interface Nginx {
  url: string
  /** its access log so far ($remote_addr, the request, the status, the X-Forwarded-For it received) */
  accessLog: () => Promise<string>
}

/** The temp-file directives of the modules this nginx has (nginx-light leaves some out). */
function tempPaths (path: string, dir: string): string {
  const built = spawnSync(path, ['-V'], { encoding: 'utf8' }).stderr ?? ''
  return ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .filter((module) => module === 'client_body' || !built.includes(`--without-http_${module}_module`))
    .map((module) => `  ${module}_temp_path ${join(dir, module)};`)
    .join('\n')
}

/**
 * nginx on a free port of 127.0.0.1 proxying everything to `upstream` (keygate), with the usual
 * `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for` and X-Forwarded-Proto and -Host.
 */
export async function startNginx (t: Teardown, path: string, upstream: string): Promise<Nginx> {
  return await runNginx(t, path, (port) => `
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass ${upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
    }
  }`)
}

/**
 * nginx running `servers` (what goes in its `http` block: upstreams and servers), made for a free
 * port of 127.0.0.1 that the servers listen on; `scheme` https when they listen with TLS.
 */
export async function runNginx (t: Teardown, path: string, servers: (port: number) => string, scheme: 'http' | 'https' = 'http'): Promise<Nginx> {
  const dir = await mkdtemp(join(tmpdir(), 'keygate-nginx-'))
  let stop = async (): Promise<void> => {}
  t.teardown(async () => {
    await stop()
    await rm(dir, { recursive: true, force: true })
  })
  const port = await freePort()
  const config = `
daemon off;
master_process off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 256; }
http {
  log_format proxied '$remote_addr "$request" $status "$http_x_forwarded_for"';
  access_log ${join(dir, 'access.log')} proxied;
${tempPaths(path, dir)}
${servers(port)}
}
`
  await writeFile(join(dir, 'nginx.conf'), config)
  // -e: the error log before the config is read (else /var/log/nginx/error.log)
  const child = spawn(path, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve() }))
  stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      await exited
    }
  }
  const url = `${scheme}://127.0.0.1:${port}`
  for (let attempt = 0; attempt < 100 && !await portAnswers(url); attempt++) {
    if (child.exitCode !== null) {
      const log = await readFile(join(dir, 'error.log'), 'utf8').catch(() => '')
      throw new Error(`nginx exited with ${child.exitCode}: ${stderr}${log}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  if (!await portAnswers(url)) throw new Error(`nginx does not listen on ${url} after 10 s: ${stderr}`)
  return { url, accessLog: async () => await readFile(join(dir, 'access.log'), 'utf8').catch(() => '') }
}
