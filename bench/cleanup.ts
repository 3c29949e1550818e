// Everything a run starts is undone when it ends, also on Ctrl-C or SIGTERM: each step that starts
// something (a child process, a Redis prefix, a temp file, a signing thread) says here how to undo
// it, and cleanup() undoes them, the last first. A second signal quits at once, killing the
// children.
import { killAllServicesNow } from './children.js'
import { killAllFloods } from './flood.js'
import { killAllNginxNow } from './nginx.js'

const cleanups: Array<() => Promise<void>> = []
let cleaning: Promise<void> | undefined
let interrupted = false

/** `step` undoes something just started: run by cleanup(), after the steps registered later */
export function onCleanup (step: () => Promise<void>): void {
  cleanups.push(step)
}

export async function cleanup (): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanups.reverse()) {
      try { await step() } catch (err) { process.stderr.write(`cleanup: ${(err as Error).message}\n`) }
    }
  })()
  await cleaning
}

/** whether a signal stopped the run (its handler then exits the process, once cleaned up) */
export function wasInterrupted (): boolean {
  return interrupted
}

function onSignal (signal: NodeJS.Signals): void {
  if (interrupted) { killAllServicesNow(); process.exit(1) }
  interrupted = true
  process.stderr.write(`\n${signal}: stopping and cleaning up (again to quit at once)\n`)
  cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143))
}

/** SIGINT and SIGTERM clean up; on exit, however it comes, no child is left running */
export function cleanUpOnSignals (): void {
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  process.on('exit', killAllServicesNow)
  process.on('exit', killAllFloods)
  process.on('exit', killAllNginxNow)
}
