// A reader that stops early (`keygate call GET /v1/clients/ | head -c 100`) closes the pipe, and
// the next write to it fails with EPIPE. Unix commands die of SIGPIPE there, quietly, and the shell
// reports 128 + 13; Node.js ignores SIGPIPE, so the failed write would surface instead as an
// unhandled 'error' event: a stack trace.
import { constants } from 'node:os'

/** the exit status of a command that a closed pipe ended: what a shell reports for SIGPIPE */
export const CLOSED_PIPE_EXIT_STATUS = 128 + constants.signals.SIGPIPE

/** A write to `streams` (stdout and stderr) that meets a closed pipe ends the process quietly with CLOSED_PIPE_EXIT_STATUS. */
export function endQuietlyOnClosedPipe (streams: NodeJS.WritableStream[] = [process.stdout, process.stderr]): void {
  for (const stream of streams) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(CLOSED_PIPE_EXIT_STATUS)
      throw err
    })
  }
}
