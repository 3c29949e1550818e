// Which requests on a connection had a request line that is not exactly METHOD SP target SP
// version. Node's parser (llhttp) reads a run of spaces between the parts as one and says
// nothing: no option refuses it and the raw line is never exposed. So each connection's bytes go
// through this tracker before the parser. It follows HTTP/1.1 request framing just far enough to
// find where each request line starts (head, then a Content-Length or chunked body), and on
// anything it does not follow it stops: it may miss a line, but it never flags a line the
// parser did not read as one. Node's parser still refuses malformed framing itself.
import { IncomingMessage, type Server } from 'node:http'
import type { Socket } from 'node:net'

/**
 * What the tracker read of one request line: a number (method length + 64 x target length)
 * when it was well spaced, the method and target when it had a run of spaces. Node builds its
 * request from the same line, so the two are compared before the tracker's word is taken.
 */
export type RequestLineReading = number | SpacedRequestLine
export interface SpacedRequestLine { method: string; target: string }

const LF = 0x0a
const CR = 0x0d
const SP = 0x20
const HT = 0x09
const COLON = 0x3a
const SEMICOLON = 0x3b
const QUOTE = 0x22
const COMMA = 0x2c

const REQUEST_LINE = 0
const HEADER = 1
const BODY = 2
const CHUNK_SIZE = 3
const CHUNK_DATA = 4
const CHUNK_END = 5
const TRAILER = 6
const STOPPED = 7

/** the method's length is kept below this in a reading; longer is no method llhttp knows */
const METHOD_LIMIT = 64
/** hex digits of a chunk size that stay a safe integer */
const CHUNK_SIZE_DIGITS = 13
/** decimal digits of a Content-Length that stay a safe integer */
const CONTENT_LENGTH_DIGITS = 15

const name = (text: string): Uint8Array => Buffer.from(text, 'latin1')
const CONTENT_LENGTH = name('content-length')
const TRANSFER_ENCODING = name('transfer-encoding')
const CONNECTION = name('connection')
const UPGRADE = name('upgrade')
const CHUNKED = name('chunked')
const CONNECT = name('CONNECT')

/** `want` is lower case: letters match in either case, other bytes exactly */
function matchesAt (buf: Buffer, at: number, want: Uint8Array): boolean {
  for (let i = 0; i < want.length; i++) {
    const b = buf[at + i] as number
    const w = want[i] as number
    if (b !== w && !(w >= 0x61 && w <= 0x7a && (b | 0x20) === w)) return false
  }
  return true
}

/** The header line's name is `want` (lower case), followed by its colon. */
function isHeader (buf: Buffer, start: number, end: number, want: Uint8Array): boolean {
  return end - start > want.length && buf[start + want.length] === COLON && matchesAt(buf, start, want)
}

function hexValue (b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30
  const lower = b | 0x20
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1
}

export class RequestLineTracker {
  /** one reading per request line, in order; Node's messages take them as it builds them */
  private readonly readings: RequestLineReading[] = []
  private state = REQUEST_LINE
  /** a line begun in an earlier chunk */
  private carry: Buffer | undefined
  /** bytes of a Content-Length body or of a chunk still to come */
  private remaining = 0
  // the head being read
  private contentLengths = 0
  private contentLength = 0
  private transferEncodings = 0
  private chunked = false
  private upgrade = false
  private connectionUpgrade = false
  private connect = false
  /** false once a reading did not match the request Node built from it */
  trusted = true

  private readonly maxLineBytes: number

  /** @param maxLineBytes longer lines are past what the parser accepts (its header limit): not followed */
  constructor (maxLineBytes: number) {
    this.maxLineBytes = maxLineBytes
  }

  /** Whether the tracker still follows the connection. */
  get following (): boolean {
    return this.state !== STOPPED
  }

  /** The reading of the next request line, in the order of the connection. */
  take (): RequestLineReading | undefined {
    return this.readings.shift()
  }

  /** Gives up on the connection: later request lines are not read, so none is flagged. */
  stop (): void {
    this.state = STOPPED
    this.carry = undefined
  }

  /** Reads one chunk of the connection's bytes, before the parser does. */
  feed (chunk: Buffer): void {
    let pos = 0
    const end = chunk.length
    while (pos < end) {
      const state = this.state
      if (state === STOPPED) return
      if (state === BODY || state === CHUNK_DATA) {
        const n = Math.min(this.remaining, end - pos)
        pos += n
        this.remaining -= n
        if (this.remaining === 0) this.state = state === BODY ? REQUEST_LINE : CHUNK_END
        continue
      }
      // llhttp skips empty lines before a request line
      if (state === REQUEST_LINE && this.carry === undefined && (chunk[pos] === CR || chunk[pos] === LF)) {
        pos++
        continue
      }
      const lf = chunk.indexOf(LF, pos)
      if (lf === -1) {
        this.keep(chunk, pos, end)
        return
      }
      if (this.carry === undefined) {
        if (lf - pos > this.maxLineBytes) this.stop()
        else this.line(chunk, pos, lf)
      } else {
        const line = Buffer.concat([this.carry, chunk.subarray(pos, lf)])
        this.carry = undefined
        if (line.length > this.maxLineBytes) this.stop()
        else this.line(line, 0, line.length)
      }
      pos = lf + 1
    }
  }

  /** A line without its LF so far: kept (copied, rare) until the rest arrives. */
  private keep (chunk: Buffer, from: number, to: number): void {
    const part = chunk.subarray(from, to)
    this.carry = this.carry === undefined ? Buffer.from(part) : Buffer.concat([this.carry, part])
    if (this.carry.length > this.maxLineBytes) this.stop()
  }

  /** One line, `lf` its LF's index (a CR before it is dropped: llhttp itself insists on CRLF). */
  private line (buf: Buffer, start: number, lf: number): void {
    const end = lf > start && buf[lf - 1] === CR ? lf - 1 : lf
    switch (this.state) {
      case REQUEST_LINE:
        this.requestLine(buf, start, end)
        return
      case HEADER:
        if (end === start) this.endOfHead()
        else this.header(buf, start, end)
        return
      case CHUNK_SIZE:
        this.chunkSize(buf, start, end)
        return
      case CHUNK_END:
        // the CRLF after a chunk's data, nothing else
        if (end === start) this.state = CHUNK_SIZE
        else this.stop()
        return
      case TRAILER:
        if (end === start) this.state = REQUEST_LINE
        else if (buf[start] === SP || buf[start] === HT) this.stop()
    }
  }

  private requestLine (buf: Buffer, start: number, end: number): void {
    let i = start
    while (i < end && buf[i] !== SP) i++
    const methodEnd = i
    while (i < end && buf[i] === SP) i++
    const targetStart = i
    let spaced = targetStart - methodEnd > 1
    while (i < end && buf[i] !== SP) i++
    const targetEnd = i
    while (i < end && buf[i] === SP) i++
    spaced ||= i - targetEnd > 1
    const methodLength = methodEnd - start
    if (methodLength === 0 || methodLength >= METHOD_LIMIT || targetStart === end) {
      // not a request line llhttp reads (a leading space, no target): it refuses the connection
      this.stop()
      return
    }
    this.readings.push(spaced
      ? { method: buf.toString('latin1', start, methodEnd), target: buf.toString('latin1', targetStart, targetEnd) }
      : methodLength + METHOD_LIMIT * (targetEnd - targetStart))
    if (i === end) {
      // no version (HTTP/0.9): what llhttp makes of the lines after it is not followed
      this.stop()
      return
    }
    this.contentLengths = 0
    this.contentLength = 0
    this.transferEncodings = 0
    this.chunked = false
    this.upgrade = false
    this.connectionUpgrade = false
    this.connect = buf.compare(CONNECT, 0, CONNECT.length, start, methodEnd) === 0
    this.state = HEADER
  }

  private header (buf: Buffer, start: number, end: number): void {
    const first = buf[start] as number
    if (first === SP || first === HT) {
      // a value folded over lines (llhttp refuses it)
      this.stop()
      return
    }
    switch (first | 0x20) {
      case 0x63: // c
        if (isHeader(buf, start, end, CONTENT_LENGTH)) this.contentLengthValue(buf, start + CONTENT_LENGTH.length + 1, end)
        else if (isHeader(buf, start, end, CONNECTION)) this.connectionUpgrade ||= this.includesUpgrade(buf, start + CONNECTION.length + 1, end)
        return
      case 0x74: // t
        if (isHeader(buf, start, end, TRANSFER_ENCODING)) this.transferEncodingValue(buf, start + TRANSFER_ENCODING.length + 1, end)
        return
      case 0x75: // u
        if (isHeader(buf, start, end, UPGRADE)) this.upgrade = true
    }
  }

  private contentLengthValue (buf: Buffer, from: number, to: number): void {
    let i = from
    while (i < to && (buf[i] === SP || buf[i] === HT)) i++
    let value = 0
    const digits = i
    while (i < to && (buf[i] as number) >= 0x30 && (buf[i] as number) <= 0x39) value = value * 10 + (buf[i++] as number) - 0x30
    const count = i - digits
    while (i < to && (buf[i] === SP || buf[i] === HT)) i++
    if (++this.contentLengths > 1 || count === 0 || count > CONTENT_LENGTH_DIGITS || i !== to) {
      // two of them, or not digits: llhttp refuses the request, or reads it in a way not followed here
      this.stop()
      return
    }
    this.contentLength = value
  }

  /** chunked when the value's last coding is `chunked` (llhttp's rule, the last header's value deciding) */
  private transferEncodingValue (buf: Buffer, from: number, to: number): void {
    this.transferEncodings++
    let tokenStart = from
    for (let i = from; i < to; i++) {
      const b = buf[i]
      if (b === QUOTE) {
        this.stop()
        return
      }
      if (b === COMMA) tokenStart = i + 1
    }
    while (tokenStart < to && (buf[tokenStart] === SP || buf[tokenStart] === HT)) tokenStart++
    let tokenEnd = to
    while (tokenEnd > tokenStart && (buf[tokenEnd - 1] === SP || buf[tokenEnd - 1] === HT)) tokenEnd--
    this.chunked = tokenEnd - tokenStart === CHUNKED.length && matchesAt(buf, tokenStart, CHUNKED)
  }

  /** whether `upgrade` appears anywhere in the value, any case (wider than llhttp's token match: stopping is safe) */
  private includesUpgrade (buf: Buffer, from: number, to: number): boolean {
    for (let i = from; i + UPGRADE.length <= to; i++) {
      if (((buf[i] as number) | 0x20) === 0x75 && matchesAt(buf, i, UPGRADE)) return true
    }
    return false
  }

  private endOfHead (): void {
    if (this.connect || (this.upgrade && this.connectionUpgrade)) {
      // the rest of the connection is another protocol's (Node reads no further request)
      this.stop()
    } else if (this.transferEncodings > 0) {
      // chunked must be the last coding and comes without Content-Length, or llhttp refuses it
      if (this.chunked && this.contentLengths === 0) this.state = CHUNK_SIZE
      else this.stop()
    } else if (this.contentLength > 0) {
      this.remaining = this.contentLength
      this.state = BODY
    } else {
      this.state = REQUEST_LINE
    }
  }

  /** chunk-size [ ";" extensions ]: the size in hex, then the end of the line or `;` (llhttp refuses whitespace there) */
  private chunkSize (buf: Buffer, start: number, end: number): void {
    let i = start
    let size = 0
    for (; i < end; i++) {
      const digit = hexValue(buf[i] as number)
      if (digit === -1) break
      size = size * 16 + digit
    }
    if (i === start || i - start > CHUNK_SIZE_DIGITS || (i < end && buf[i] !== SEMICOLON)) {
      this.stop()
      return
    }
    if (size === 0) {
      this.state = TRAILER
    } else {
      this.remaining = size
      this.state = CHUNK_DATA
    }
  }
}

const TRACKER = Symbol('keygate.requestLineTracker')
type TrackedSocket = Socket & { [TRACKER]?: RequestLineTracker }

/**
 * The server's request class (Fastify's `http.IncomingMessage` option): Node builds one per
 * request head it parses, in order, so each takes the next reading of its connection's tracker.
 */
export class TrackedIncomingMessage extends IncomingMessage {
  requestLine: RequestLineReading | undefined

  constructor (socket: Socket) {
    super(socket)
    this.requestLine = (socket as TrackedSocket)[TRACKER]?.take()
  }
}

/**
 * Puts every connection of `server` through a tracker. Node's HTTP server hands a socket's reads
 * to its parser natively, out of JavaScript's sight; a 'data' listener makes it read them in
 * JavaScript instead (Node's own socket wrapper does that), and prepended, this one sees each
 * chunk before the parser. Node's 'connection' listener is the server's first, so it has run.
 */
export function trackRequestLines (server: Server, maxLineBytes: number): void {
  server.on('connection', (socket: TrackedSocket) => {
    const tracker = new RequestLineTracker(maxLineBytes)
    socket[TRACKER] = tracker
    socket.prependListener('data', (chunk: Buffer) => { tracker.feed(chunk) })
  })
}

/**
 * Whether `request`'s line had a run of spaces between its parts, as Node read the same
 * request. A reading that does not match Node's request (method and target) means the tracker
 * lost the connection's framing: it then trusts none of its readings on that connection.
 */
export function hasSpacedRequestLine (request: IncomingMessage): boolean {
  if (!(request instanceof TrackedIncomingMessage)) return false
  const reading = request.requestLine
  if (reading === undefined) return false
  const method = request.method ?? ''
  const target = request.url ?? ''
  if (typeof reading === 'number') {
    if (reading % METHOD_LIMIT === method.length && Math.floor(reading / METHOD_LIMIT) === target.length) return false
  } else if (reading.method === method && reading.target === target) {
    return (request.socket as TrackedSocket)[TRACKER]?.trusted === true
  }
  const tracker = (request.socket as TrackedSocket | null)?.[TRACKER]
  if (tracker !== undefined) {
    tracker.trusted = false
    tracker.stop()
  }
  return false
}
