// The messages between the bench and the processes it starts (bench/child.ts, bench/flood-child.ts),
// and the one way either side sends them. A process may go away at any moment (Ctrl-C reaches
// every process of the terminal's group at once): a message to one that is gone, or going, is
// dropped, never an ERR_IPC_CHANNEL_CLOSED thrown nor an EPIPE emitted as an 'error' nobody handles.
import type { ChildProcess, Serializable } from 'node:child_process'

export type ParentMessage =
  | { type: 'cpu'; id: number }
  | { type: 'stop' }

export type ChildMessage =
  | { type: 'ready'; url: string; pid: number; decisionUrl?: string }
  | { type: 'cpu'; id: number; user: number; system: number }

/** what can send over an IPC channel: a ChildProcess (to the child), or `process` (to the parent) */
type Channel = Pick<ChildProcess, 'connected'> & { send?: (message: Serializable, callback: (err: Error | null) => void) => boolean }

/**
 * Sends `message` if the other side is still connected; whether it was sent. An error of the
 * channel on the way (the other side exited meanwhile: EPIPE, ERR_IPC_CHANNEL_CLOSED) goes to the
 * callback, which drops it: the exit itself is what the sender notices, by its 'exit' or
 * 'disconnect' event.
 */
export function sendIfConnected (channel: Channel, message: Serializable): boolean {
  if (channel.send === undefined || !channel.connected) return false
  try {
    channel.send(message, () => {})
    return true
  } catch {
    // closed between the check and the send
    return false
  }
}
