// Debian packages a test needs from the machine (a server, a language's toolchain): found, or
// installed once per test process with apt-get when missing and the tests run as root; else why
// not, naming the packages to install.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'

export type Found = { path: string } | { reason: string }

function aptGet (args: string[]): { ok: boolean; output: string } {
  const result = spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=120', ...args], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    encoding: 'utf8',
    timeout: 240_000
  })
  return { ok: result.status === 0, output: `${result.stderr ?? ''}${result.error?.message ?? ''}`.trim().split('\n').slice(-3).join(' / ') }
}

/**
 * What `find` finds (a path or a command); when it finds nothing, `packages` installed with
 * apt-get (after an `apt-get update` when the package lists are missing or stale; then
 * `otherwise`, when given and that failed too) and `find` asked again. `what` names the thing in
 * the reason given when there is none. A server's package enables and starts its own service where
 * systemd runs: `services` (its units) are stopped and disabled after installing it here, so
 * nothing of the package keeps running beside the tests.
 */
export function installedWithApt (
  what: string, find: () => string | undefined, packages: readonly string[], otherwise?: readonly string[], services: readonly string[] = []
): Found {
  const present = find()
  if (present !== undefined) return { path: present }
  const install = `apt-get install ${packages.join(' ')}`
  if (process.getuid?.() !== 0) return { reason: `no ${what}, and not root to install it (${install})` }
  if (spawnSync('apt-get', ['--version']).status !== 0) return { reason: `no ${what}, and no apt-get to install it with (Debian: ${install})` }
  let attempt = aptGet(['install', '-y', '-qq', ...packages])
  if (!attempt.ok) {
    aptGet(['update', '-qq'])
    attempt = aptGet(['install', '-y', '-qq', ...packages])
    if (!attempt.ok && otherwise !== undefined) attempt = aptGet(['install', '-y', '-qq', ...otherwise])
  }
  const installed = find()
  if (installed !== undefined) {
    stopServices(services)
    return { path: installed }
  }
  return { reason: `no ${what}, and ${install} ${attempt.ok ? 'did not bring one' : `failed: ${attempt.output}`}` }
}

/** Stops and disables systemd units where systemd runs (no-op elsewhere). */
function stopServices (units: readonly string[]): void {
  if (units.length === 0 || !existsSync('/run/systemd/system')) return
  spawnSync('systemctl', ['disable', '--now', ...units], { stdio: 'ignore', timeout: 30_000 })
}

/** `command` when it runs with `args` and exits 0 (e.g. `python3 -c 'import x'`), else undefined. */
export function runs (command: string, args: readonly string[]): string | undefined {
  return spawnSync(command, args, { stdio: 'ignore', timeout: 30_000 }).status === 0 ? command : undefined
}
