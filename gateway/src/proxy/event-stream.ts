// Event streams (text/event-stream) through the forwarder (docs/mcp.md, "Streams"): an answer with
// no end of its own, quiet for minutes at a time, which lasts for as long as its client stays.
import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { mediaTypeOf } from '../lib/http-headers.js'

/** Whether an answer's Content-Type is an event stream's. */
export function isEventStream (type: string | string[] | undefined): boolean {
  return mediaTypeOf(type) === 'text/event-stream'
}

/**
 * Sets up `raw` to carry an event stream. Its status and headers reach the client at once, once
 * Fastify has set them and pipes the stream (Fastify sends a stream's with its first byte, which
 * a quiet upstream may not send for minutes). And it ends when the client leaves: a client that
 * leaves closes its connection, and all keygate sees of that is a FIN until it has written to the
 * connection twice (the upstream's stream held open all that while: the MCP SDK allows a session
 * one GET stream). So, as for a request waiting in the upstream queue, the client's FIN is its
 * leaving: the connection is closed and `leave` called (it closes the upstream's stream), at once
 * if the FIN came already; a client that only half-closed loses the stream. Returns the socket
 * and the listener to take off it when the answer ends, if one was put on.
 */
export function untilClientLeaves (raw: ServerResponse, leave: () => void): [Socket, () => void] | undefined {
  raw.once('pipe', () => { raw.flushHeaders() })
  const socket = raw.socket
  if (socket === null) return undefined
  const gone = (): void => {
    raw.destroy()
    leave()
  }
  if (socket.readableEnded) {
    gone()
    return undefined
  }
  socket.once('end', gone)
  return [socket, gone]
}
