// An MCP answer as a `text/event-stream`, rewritten event by event (mcp/list-filter.ts): each
// event passes as soon as its blank line arrives, and only an event whose data is a list's
// response (by id; on a GET stream, by its result's shape) is rewritten, keeping its other fields
// (id, event, retry); every other event passes as it came. The stream is read as the SSE
// standard (WHATWG HTML §9.2.6) reads it, as MCP clients do: lines end at CRLF, LF or CR, a
// leading byte order mark is dropped, `data` lines join with "\n", an empty data is no event.
// Every data is read as one strict JSON value (on a GET stream, only events of the type
// `message` or none, the only ones MCP clients read as messages): one that is not (a list's response hidden in a
// duplicate key or a case variant, or no JSON at all), or an event over MAX_SSE_EVENT_CHARS,
// ends the stream at that event, with a JSON-RPC error (MCP_LIST_UNFILTERABLE) for each list
// asked for in its place: keygate does not pass what it cannot read. Events that carry no data
// (comments, keep-alives) pass unread.
import { StringDecoder } from 'node:string_decoder'
import { Transform, type TransformCallback } from 'node:stream'
import { GatewayError } from '../errors.js'

/** an event (its text, from its first line to its blank line) longer than this ends the stream */
export const MAX_SSE_EVENT_CHARS = 4 * 1024 * 1024

/** a line's end (CR, LF; a CRLF is its CR and the LF after it) */
const LINE_END = /[\r\n]/g

/** What the stream's events are judged by (mcp/list-filter.ts: ListFilter). */
export interface EventJudge {
  /** a message's text: the same bytes when nothing in it is a list's response, else the rewritten text; throws when it cannot be read */
  text: (bytes: Uint8Array) => Uint8Array | string
  /** the JSON-RPC errors that answer the lists asked for in place of their responses */
  errors: (error: GatewayError) => string[]
  /** only events of the type `message` (or none) are read, as MCP clients read only those; else every event with data */
  readonly onlyMessages: boolean
}

export class SseEventFilter extends Transform {
  readonly #judge: EventJudge
  readonly #decoder = new StringDecoder('utf8')
  /** the text not yet passed: the current event, from its first line */
  #buffer = ''
  /** where the current line begins in #buffer, and where to look for its end */
  #line = 0
  #scan = 0
  /** the current event's data lines, and its other lines (kept when its data is rewritten) */
  #data: string[] = []
  #other: string[] = []
  /** the current event's type (its last `event` field) */
  #type = ''
  #first = true
  #ended = false

  constructor (judge: EventJudge) {
    super()
    this.#judge = judge
  }

  override _transform (chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (!this.#ended) this.#read(this.#decoder.write(chunk), false)
    done()
  }

  override _flush (done: TransformCallback): void {
    // an event the stream ends in, without its blank line: read as if it had one, never passed unread
    if (!this.#ended) this.#read(this.#decoder.end(), true)
    if (!this.#ended && this.#buffer.length > 0) this.#read('\n\n', true)
    done()
  }

  #read (text: string, atEnd: boolean): void {
    try {
      this.#buffer += text
      this.#lines(atEnd)
      if (this.#buffer.length > MAX_SSE_EVENT_CHARS) {
        throw new GatewayError('MCP_LIST_UNFILTERABLE',
          `An event of the upstream's event stream is over ${MAX_SSE_EVENT_CHARS} characters, the most keygate reads to filter a list`)
      }
    } catch (err) {
      this.#fail(err)
    }
  }

  /** Each complete line of #buffer; each blank line ends an event. */
  #lines (atEnd: boolean): void {
    for (;;) {
      const buffer = this.#buffer
      // the first CR or LF from #scan, in one pass: two indexOf calls would each search to the end for a
      // byte the text may not hold, for every line (a chunk of many lines: quadratic)
      LINE_END.lastIndex = this.#scan
      const end = LINE_END.exec(buffer)?.index ?? -1
      if (end < 0) {
        this.#scan = buffer.length
        return
      }
      const cr = buffer.charCodeAt(end) === 13
      // a CR that ends the text so far may be the first half of a CRLF
      if (cr && end === buffer.length - 1 && !atEnd) {
        this.#scan = end
        return
      }
      const next = cr && buffer[end + 1] === '\n' ? end + 2 : end + 1
      let line = buffer.slice(this.#line, end)
      if (this.#first) {
        this.#first = false
        if (line.startsWith('\ufeff')) line = line.slice(1)
      }
      this.#line = this.#scan = next
      if (line === '') this.#event(buffer.slice(0, next))
      else this.#field(line)
    }
  }

  #field (line: string): void {
    const colon = line.indexOf(':')
    const name = colon < 0 ? line : line.slice(0, colon)
    if (name !== 'data') {
      if (name === 'event') this.#type = colon < 0 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1)
      this.#other.push(line)
      return
    }
    const value = colon < 0 ? '' : line.slice(colon + 1)
    this.#data.push(value.startsWith(' ') ? value.slice(1) : value)
  }

  /** One event, `raw` its text: passed as it came, or with its data rewritten. */
  #event (raw: string): void {
    const data = this.#data.join('\n')
    const other = this.#other
    this.#buffer = this.#buffer.slice(raw.length)
    this.#line = this.#scan = 0
    const type = this.#type
    this.#data = []
    this.#other = []
    this.#type = ''
    if (data === '' || (this.#judge.onlyMessages && type !== '' && type !== 'message')) {
      this.push(raw)
      return
    }
    const bytes = Buffer.from(data)
    const text = this.#judge.text(bytes)
    if (text === bytes) {
      this.push(raw)
      return
    }
    this.push(`${other.map((line) => `${line}\n`).join('')}data: ${typeof text === 'string' ? text : Buffer.from(text).toString()}\n\n`)
  }

  /** The stream ends here: the lists' errors, then the end; the upstream's stream is cut once they are read. */
  #fail (err: unknown): void {
    this.#ended = true
    const error = err instanceof GatewayError
      ? err
      : new GatewayError('MCP_LIST_UNFILTERABLE', 'keygate could not read the upstream\'s event stream to filter a list', { cause: err })
    for (const text of this.#judge.errors(error)) this.push(`event: message\ndata: ${text}\n\n`)
    this.push(null)
    this.once('end', () => { this.destroy() })
  }
}
