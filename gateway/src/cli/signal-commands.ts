// `keygate reload` and `keygate stop`: SIGHUP or SIGTERM to the gateway whose PID file
// KEYGATE_PID_FILE names (process/pid-file.ts), as `nginx -s reload` finds nginx by its pid file.
// Run with the gateway's environment; no PID to look up, whether the gateway was started by
// `keygate serve`, npm or a supervisor. stop waits until the gateway has exited.
import { pidIn } from '../process/pid-file.js'

export const SIGNAL_COMMANDS = { reload: 'SIGHUP', stop: 'SIGTERM' } as const
export type SignalCommand = keyof typeof SIGNAL_COMMANDS

/** how often stop looks whether the gateway has exited */
const POLL_MS = 50
/**
 * how much longer than the gateway's grace period stop waits: past its grace a gateway exits by
 * itself (a cluster's primary 2 s after its workers' grace)
 */
const STOP_MARGIN_MS = 5000

/** The gateway's PID from `pidFile`, signalled; stop then waits up to `graceMs` and the margin for it to exit. */
export async function signalGateway (command: SignalCommand, pidFile: string, graceMs: number, stdout: NodeJS.WritableStream): Promise<void> {
  const pid = pidIn(pidFile)
  if (pid === undefined) {
    throw new Error(`no PID in ${pidFile}: is a gateway running with KEYGATE_PID_FILE=${pidFile}? (it writes the file once it serves)`)
  }
  const signal = SIGNAL_COMMANDS[command]
  try {
    process.kill(pid, signal)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ESRCH') throw new Error(`process ${pid} of ${pidFile} is not running: the file outlived a gateway that was killed outright`)
    if (code === 'EPERM') throw new Error(`not allowed to signal process ${pid} of ${pidFile}: run as the gateway's user`)
    throw err
  }
  if (command === 'reload') {
    stdout.write(`${signal} sent to keygate (pid ${pid}): it re-reads its route file, issuers file and agents file, all or nothing; ` +
      'a file it refuses is logged (configuration reload refused) and every file in force stays\n')
    return
  }
  const deadline = Date.now() + graceMs + STOP_MARGIN_MS
  // gone once no such process is left, or once the file no longer names it (removed as it exited;
  // its parent may not have collected it yet)
  while (isRunning(pid) && pidIn(pidFile) === pid) {
    if (Date.now() > deadline) throw new Error(`${signal} sent to keygate (pid ${pid}), which is still running after ${graceMs + STOP_MARGIN_MS} ms`)
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
  stdout.write(`${signal} sent to keygate (pid ${pid}): it has exited\n`)
}

function isRunning (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
