// What a run says on stderr while it goes: a line that each next one overwrites on a terminal
// (line), a line that stays (done), and the setup's steps (log; with --json, only on a terminal).
import type { BenchOptions } from './args.js'

export interface Progress {
  line: (text: string) => void
  done: (text: string) => void
  log: (text: string) => void
}

export function progress (options: BenchOptions): Progress {
  const tty = process.stderr.isTTY
  return {
    line: (text) => { if (tty) process.stderr.write(`\r\x1b[K${text}`) },
    done: (text) => { process.stderr.write(tty ? `\r\x1b[K${text}\n` : `${text}\n`) },
    log: (text) => { if (!options.json || tty) process.stderr.write(`${text}\n`) }
  }
}
