// KEYGATE_PID_FILE: the PID of the process that takes a gateway's signals (one gateway, a cluster's
// primary, npm start's process), in a file, as nginx keeps its pid file: `keygate reload` and
// `keygate stop` (cli/signal-commands.ts), scripts and supervisors signal it without looking it up.
// Written once the process serves and handles its signals, so a SIGHUP sent on its word never
// finds a process without a handler; removed when the process exits. Only a process killed
// outright (SIGKILL) leaves it behind, naming a process that is gone.
import { accessSync, constants, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { ConfigError } from '../config/config-error.js'

export interface PidFile {
  /** writes this process's PID, and removes the file when the process exits */
  write: () => void
}

/**
 * The PID file at `path` (undefined: none; write does nothing). Checked now, before anything
 * listens: a folder that is missing or not writable stops the start.
 */
export function pidFileAt (path: string | undefined): PidFile {
  if (path === undefined) return { write: () => {} }
  try {
    accessSync(dirname(path), constants.W_OK)
  } catch (err) {
    throw new ConfigError(`KEYGATE_PID_FILE: cannot write ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}): ` +
      'use a file in an existing folder this process may write to, such as /run/keygate/keygate.pid')
  }
  return {
    write: () => {
      // whole or not at all: a reader never sees a half-written number
      const partial = `${path}.${process.pid}`
      writeFileSync(partial, `${process.pid}\n`)
      renameSync(partial, path)
      // not when another process has written its own PID there since
      process.once('exit', () => { if (pidIn(path) === process.pid) rmSync(path, { force: true }) })
    }
  }
}

/** The PID in the file at `path`; undefined when there is no such file or it holds no PID. */
export function pidIn (path: string): number | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
  const pid = /^\s*([1-9]\d*)\s*$/.exec(text)?.[1]
  return pid === undefined ? undefined : Number(pid)
}
