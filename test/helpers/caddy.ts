// A real Caddy (Debian's) in front of keygate, as platform teams run it: /usr/bin/caddy, installed
// once with apt-get when missing and the tests run as root. The package enables and starts its own
// service (caddy.service: :80, and the admin endpoint on :2019) where systemd runs: after installing
// it here, that service is stopped and disabled, so nothing of it keeps running. Each Caddy runs in
// the foreground (`caddy run`) as one process with the test's Caddyfile, its env placeholders
// ({$NAME}) filled from the environment given, and its home, config and data in a temp dir; it is
// stopped and the dir removed when the test ends.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { installedWithApt, type Found } from './apt.js'
import { portAnswers } from './listening.js'
import { freePort } from './redis.js'

export const CADDY_BINARY = '/usr/bin/caddy'

interface Teardown { teardown: (fn: () => unknown) => void }

let found: Found | undefined

/**
 * Caddy's path, installing it once per test process when missing (and then stopping the service
 * the package starts); else why there is none, for the tests to skip with (only where it cannot be
 * installed: not root, no apt-get, the install failed).
 */
export function findCaddy (): Found {
  found ??= installedWithApt(CADDY_BINARY, () => existsSync(CADDY_BINARY) ? CADDY_BINARY : undefined, ['caddy'], undefined,
    ['caddy.service', 'caddy-api.service'])
  return found
}

export interface Caddy {
  /** http://127.0.0.1:PORT, the address CADDY_LISTEN was set to */
  url: string
  /** what Caddy wrote so far (its log, JSON lines) */
  output: () => string
}

/**
 * Caddy running `caddyfile` (the adapter `caddyfile`), with `env` for its placeholders and
 * CADDY_LISTEN set to a free port of 127.0.0.1 (the site address the Caddyfile reads it into);
 * resolved once that port answers.
 */
export async function runCaddy (t: Teardown, path: string, caddyfile: string, env: Record<string, string>): Promise<Caddy> {
  const dir = await mkdtemp(join(tmpdir(), 'keygate-caddy-'))
  let stop = async (): Promise<void> => {}
  t.teardown(async () => {
    await stop()
    await rm(dir, { recursive: true, force: true })
  })
  const port = await freePort()
  const file = join(dir, 'Caddyfile')
  await writeFile(file, caddyfile)
  // HOME and XDG_*: where Caddy would keep its autosaved config and data (certificates), not the user's
  const child = spawn(path, ['run', '--config', file, '--adapter', 'caddyfile'], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_CONFIG_HOME: dir, XDG_DATA_HOME: dir, CADDY_LISTEN: `127.0.0.1:${port}`, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve() }))
  stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      await exited
    }
  }
  const url = `http://127.0.0.1:${port}`
  for (let attempt = 0; attempt < 100 && !await portAnswers(url); attempt++) {
    if (child.exitCode !== null) throw new Error(`caddy exited with ${child.exitCode}: ${output}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  if (!await portAnswers(url)) throw new Error(`caddy does not listen on ${url} after 10 s: ${output}`)
  return { url, output: () => output }
}
