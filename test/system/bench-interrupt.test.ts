// `npm run bench -- --scenario flood` stopped with Ctrl-C while the flood runs: a terminal sends
// SIGINT to the whole foreground process group, so the bench, the services it started and the
// flooding process all get it at once. The bench then exits 130 having cleaned up, with no
// ERR_IPC_CHANNEL_CLOSED, EPIPE or other error of a child that went away first, and no process of
// its group is left. The bench runs in a process group of its own here, as a shell's job does.
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { outDir, ROOT, TINY } from '../helpers/bench.js'
import { TYPESCRIPT_NODE_ARGS } from '../helpers/typescript-node.js'

/** the processes of process group `group`: pid and command line */
function groupMembers (group: number): Array<{ pid: number, command: string }> {
  const members: Array<{ pid: number, command: string }> = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      // /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(fields[2]) !== group || fields[0] === 'Z') continue
      members.push({ pid: Number(name), command: readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ') })
    } catch { /* gone meanwhile */ }
  }
  return members
}

/** a TCP connection from the flood's address (127.0.0.2) is open: the flood runs, and the measurement under it starts (no warm-up) */
function floodConnected (): boolean {
  // /proc/net/tcp: "sl local_address rem_address st ...", addresses as little-endian hex, 01 = ESTABLISHED
  return readFileSync('/proc/net/tcp', 'utf8').split('\n').some((line) => / 0200007F:[0-9A-F]{4} [0-9A-F:]+ 01 /.test(line))
}

const until = async (what: string, ok: () => boolean, ms: number): Promise<void> => {
  const deadline = Date.now() + ms
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

t.test('Ctrl-C during a flood: exit 130, no IPC error, every child stopped', async (t) => {
  // TINY's settings, but a measurement of 3 s to be interrupted in
  t.same(TINY.slice(0, 2), ['--duration', '1'])
  const args = ['--duration', '3', ...TINY.slice(2), '--scenario', 'flood', '--only', 'd', '--out', outDir(t)]
  // what npm run bench runs: the bench and its children from the sources under tsx (npm itself, in
  // between, dies of the SIGINT it passes on, which a shell shows as 130 too)
  const bench = spawn(process.execPath, [...TYPESCRIPT_NODE_ARGS, 'bench/cli.ts', ...args], { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  const group = bench.pid ?? 0
  t.teardown(() => { try { process.kill(-group, 'SIGKILL') } catch { /* gone */ } })
  let stderr = ''
  let stdout = ''
  bench.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  bench.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    bench.once('exit', (code, signal) => { resolve({ code, signal }) })
  })

  // the flood is on once its process runs and the round under it has begun. Ctrl-C near the round's
  // end: its services and the flooder die at once, and the bench's cleanup (stopping them, waiting
  // for each) is still going when the measurement ends and the round asks the flooder for its counts
  await until('the flood connected', floodConnected, 90_000)
  await new Promise((resolve) => setTimeout(resolve, 2700))
  const before = groupMembers(group)
  t.ok(before.length >= 3, `the bench, its services and the flooder: ${before.length} processes`)

  // Ctrl-C: SIGINT to the whole group
  process.kill(-group, 'SIGINT')
  const { code, signal } = await exited
  t.equal(code, 130, `exit 130 (${signal ?? ''})\n${stderr}`)
  t.match(stderr, /SIGINT: stopping and cleaning up/, 'it says it stops')
  t.notMatch(stderr, /ERR_IPC_CHANNEL_CLOSED|EPIPE|Error|^bench: /m, 'no error of a child that went away first')
  t.equal(stdout, '', 'no report of a run cut short')
  await until('every process of the group gone', () => groupMembers(group).length === 0, 10_000).catch(() => {})
  t.same(groupMembers(group).map((p) => p.command), [], 'no child left running')
})
