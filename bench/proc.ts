// CPU time of processes the bench did not start as Node children (nginx), and of a process's
// descendants (keygate's cluster workers), from Linux's /proc: utime and stime of
// /proc/<pid>/stat, in clock ticks (10 ms: against seconds per measurement).
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** clock ticks per second, the unit of /proc/<pid>/stat's CPU times */
let clockTicks: number | undefined
export function ticksPerSecond (): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
    } catch {
      clockTicks = 100
    }
    if (!Number.isInteger(clockTicks) || clockTicks <= 0) clockTicks = 100
  }
  return clockTicks
}

/** ppid, and user and system CPU time in clock ticks, of /proc/<pid>/stat's text */
export function parseStat (text: string): { ppid: number; user: number; system: number } {
  // pid (comm) state ppid ... utime stime: comm may hold spaces and parentheses
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { ppid: Number(fields[1]), user: Number(fields[11]), system: Number(fields[12]) }
}

/** CPU time (user + system) of one process so far, microseconds; it throws once the process is gone. */
export function processCpuMicros (pid: number): number {
  const { user, system } = parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  return (user + system) * (1e6 / ticksPerSecond())
}
