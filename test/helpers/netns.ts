// Where a test's hostile network cases run: a network namespace with only loopback (unshare -n,
// brought up with ip), so that a faulty guard fails the test instead of reaching a metadata
// service, a private network or the internet. The cases are a script the test re-executes there
// (with this process's Node.js and tsx), printing one JSON line per case for the test to judge.
// It needs root; unshare (util-linux) and ip (iproute2) are installed with apt-get when missing.
// KEYGATE_TEST_NO_NETNS=1 skips such cases where no namespace can be made.
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { installedWithApt, runs } from './apt.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** KEYGATE_TEST_NO_NETNS=1: the explicit opt-out, where no namespace can be made */
export const netnsOptedOut = (): boolean => process.env.KEYGATE_TEST_NO_NETNS === '1'

/**
 * Why this machine cannot make a network namespace with only loopback, or undefined when it can:
 * unshare (util-linux) and ip (iproute2), installed once when missing, as root.
 */
export function noNamespace (): string | undefined {
  for (const [command, args, pkg] of [['unshare', ['--version'], 'util-linux'], ['ip', ['-V'], 'iproute2']] as const) {
    const found = installedWithApt(command, () => runs(command, args), [pkg])
    if ('reason' in found) return found.reason
  }
  const tried = spawnSync('unshare', ['-n', 'sh', '-c', 'ip link set lo up'], { encoding: 'utf8', timeout: 10_000 })
  if (tried.status !== 0) return `unshare -n failed (it needs root): ${tried.error?.message ?? tried.stderr.trim()}`
  return undefined
}

export interface NamespaceRun {
  /** the script's exit status (null: killed, e.g. by the timeout) */
  status: number | null
  stderr: string
  /** its JSON lines, by their "case" */
  results: Map<string, Record<string, unknown>>
}

/** Runs the TypeScript `script` (a path) in a new network namespace whose loopback is up, from the repository's root. */
export function runInNamespace (script: string, timeoutMs = 60_000): NamespaceRun {
  const inside = 'ip link set lo up && exec "$0" --conditions=keygate-source --import tsx "$1"'
  const run = spawnSync('unshare', ['-n', 'sh', '-c', inside, process.execPath, script], { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs })
  const results = new Map<string, Record<string, unknown>>()
  for (const line of (run.stdout ?? '').split('\n').filter((line) => line.startsWith('{'))) {
    const result = JSON.parse(line) as Record<string, unknown> & { case: string }
    results.set(result.case, result)
  }
  return { status: run.status, stderr: `${run.stderr ?? ''}${run.error?.message ?? ''}`, results }
}
