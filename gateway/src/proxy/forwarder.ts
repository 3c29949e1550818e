// The proxy hop: one verified request to its route's upstream, over a keep-alive undici Pool per
// origin, and the upstream's answer back to the client.
//
// Why not @fastify/reply-from: it copies and re-filters the headers, validates the destination and
// wraps each request per request; here the headers are built once, the request goes straight to
// the pool, and a small answer is sent as one buffer (docs/scaling.md has the figures).
//
// The upstream queue, per origin (undici's Pool queues without limit and sends requests whose
// client has gone): at most `connections` sent at once, at most `maxPending` waiting, in order,
// more refused with 503 UPSTREAM_BUSY; a waiting request whose client closes (or half-closes) its
// connection is never sent. The list runs through the handlers: O(1), no allocation.
import type { IncomingHttpHeaders } from 'node:http'
import { pipeline, Readable, type Transform } from 'node:stream'
import type { Socket } from 'node:net'
import type { FastifyReply } from 'fastify'
import { Pool, type Dispatcher } from 'undici'
import { GatewayError } from '../errors.js'
import { connectionListed } from '../lib/http-headers.js'
import type { UpstreamQueueCounts } from '../metrics/metrics.js'
import { isEventStream, untilClientLeaves } from './event-stream.js'
import type { UpstreamRequest } from './upstream-request.js'

/** Answers up to this size (declared by Content-Length) are collected and sent in one write. */
export const BUFFERED_RESPONSE_MAX = 64 * 1024

/** Hop-by-hop response headers (RFC 9110 §7.6.1): they describe the pooled upstream connection. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer'])

export interface ForwarderOptions {
  /** keep-alive connections per upstream origin: at most this many requests are sent to it at once */
  connections: number
  /** requests waiting for one of those connections, per origin; past it, 503 UPSTREAM_BUSY at once */
  maxPending: number
  /** an upstream that accepts no connection within this: 502 UPSTREAM_UNAVAILABLE (nothing was sent) */
  connectTimeoutMs: number
}

/** Retry-After of UPSTREAM_BUSY, in seconds: a full queue drains at the upstream's pace. */
export const UPSTREAM_BUSY_RETRY_AFTER_SECONDS = 1

/** `tag`: what a request was sent for (its route); told, with the seconds waited, when the final answer begins. */
export type AnswerBegins<Tag> = (tag: Tag, seconds: number, span: unknown) => void

/** Told, before the problem is sent, of a request answered without a byte of it sent upstream (busy, no connection). */
export type NotSent = (reply: FastifyReply) => void

/**
 * The upstream call's span (tracing/tracer.ts), when tracing is on: `sent` begins it as the request
 * goes out (and writes its trace context into the request's headers), `ended` ends it with the
 * answer's status or the error. Off, the forwarder checks one field per request and does nothing more.
 */
export interface UpstreamTrace {
  sent: (reply: FastifyReply, request: UpstreamRequest) => unknown
  ended: (span: unknown, status: number, error?: Error) => void
  /** a span's trace id (the latency histogram's exemplar) */
  traceId: (span: unknown) => string
}

/** Connection errors that show the request was never written: nothing reached the upstream. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])

/**
 * Told of the upstream's final answer (its status, and its headers as the client will get them)
 * before any of it reaches the client: a promise holds the answer back until it settles, and a
 * rejection replaces the answer with its error (an MCP session bound before its id is handed out:
 * mcp/sessions.ts). The answer's body waits meanwhile, with back-pressure on the upstream.
 */
export type BeforeAnswer = (status: number, headers: Readonly<Record<string, string | string[]>>) => Promise<void> | undefined

/**
 * A rewriting of an answer's body (without its Content-Length): `whole` collects up to `max` bytes and sends what
 * `whole` returns (an Error, or a body over max: `tooLarge()`, or with `overflow`, all of it piped through that
 * Transform, instead); `stream` pipes it through a Transform.
 */
export type AnswerBody =
  { whole: (body: Buffer) => Buffer | Error, max: number, tooLarge: () => Error, overflow?: () => Transform } | { stream: () => Transform }

/** Told of the final answer's status and headers (as the client will get them): the rewriting of its body, or undefined (as it came). */
export type RewriteAnswer = (status: number, headers: Readonly<Record<string, string | string[]>>) => AnswerBody | undefined

/** Headers the gateway writes on an upstream's answer, over the upstream's own (undefined: removed). */
export type AnswerHeaders = Readonly<Record<string, string | undefined>>

/**
 * The upstream's headers minus its hop-by-hop ones and any it names in `Connection`: its
 * `Connection: keep-alive` describes the gateway's pooled connection, not the client's, and must
 * not override the client's own `Connection: close`.
 */
export function clientResponseHeaders (headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = connectionListed(headers.connection)
  const out: Record<string, string | string[]> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined || HOP_BY_HOP.has(name) || (listed.length > 0 && listed.includes(name))) continue
    out[name] = value
  }
  return out
}

function upstreamError (error: Error): GatewayError {
  const code = (error as Error & { code?: string }).code
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new GatewayError('UPSTREAM_TIMEOUT', 'The upstream service did not answer in time', { cause: error })
  }
  // The request was never written: as unreachable as a refused connection, and as safe to retry.
  const detail = code === 'UND_ERR_CONNECT_TIMEOUT'
    ? 'The upstream service did not accept a connection in time; the request was not sent'
    : 'The upstream service could not be reached'
  return new GatewayError('UPSTREAM_UNAVAILABLE', detail, { cause: error, headers: { 'retry-after': '1' } })
}

function upstreamBusy (detail: string): GatewayError {
  // a refusal that sheds load: its stack trace says nothing and would cost ~10 us (see errors.ts)
  const stackTraceLimit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return new GatewayError('UPSTREAM_BUSY', detail, { headers: { 'retry-after': String(UPSTREAM_BUSY_RETRY_AFTER_SECONDS) } })
  } finally {
    Error.stackTraceLimit = stackTraceLimit
  }
}

/** One upstream origin: its pool, and keygate's account of the requests sent to it and waiting. */
class Upstream<Tag> implements UpstreamQueueCounts {
  readonly pool: Pool
  /** requests sent and not yet finished: at most `connections` */
  running = 0
  pending = 0
  refused = 0
  #head: ForwardHandler<Tag> | undefined
  #tail: ForwardHandler<Tag> | undefined

  readonly origin: string
  readonly options: ForwarderOptions

  constructor (origin: string, options: ForwarderOptions) {
    this.origin = origin
    this.options = options
    // pipelining 1: one request at a time per connection; a slow answer never holds up another
    this.pool = new Pool(origin, { connections: options.connections, pipelining: 1, connect: { timeout: options.connectTimeoutMs } })
  }

  /** Sends `handler`'s request now, queues it, or refuses it (UPSTREAM_BUSY). */
  admit (handler: ForwardHandler<Tag>, clientEnded: boolean): void {
    if (this.running < this.options.connections) {
      handler.send()
    } else if (clientEnded) {
      // a client that has closed its sending side may be gone: never queue what it may not wait for
      this.refuse(handler, 'The upstream service is busy and the client had closed its side of the connection; the request was not sent')
    } else if (this.pending < this.options.maxPending) {
      this.pending++
      handler.prev = this.#tail
      if (this.#tail === undefined) this.#head = handler
      else this.#tail.next = handler
      this.#tail = handler
      handler.wait()
    } else {
      this.refuse(handler, 'The upstream service is busy: every connection to it is in use and its queue is full; the request was not sent')
    }
  }

  refuse (handler: ForwardHandler<Tag>, detail: string): void {
    this.refused++
    handler.fail(upstreamBusy(detail))
  }

  /** Takes a waiting handler out of the queue (its client went away, or its turn came). */
  leave (handler: ForwardHandler<Tag>): void {
    const { prev, next } = handler
    if (prev === undefined) this.#head = next
    else prev.next = next
    if (next === undefined) this.#tail = prev
    else next.prev = prev
    handler.prev = handler.next = undefined
    this.pending--
  }

  /** A sent request finished: its connection goes to the oldest waiting request. */
  finished (): void {
    this.running--
    const next = this.#head
    if (next === undefined) return
    this.leave(next)
    next.send()
  }
}

/** One request's trip: waits for a connection, is sent, and collects a small answer, or streams a large one, into the reply. */
class ForwardHandler<Tag> implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | undefined
  #status = 0
  #headers: Record<string, string | string[]> | undefined
  /** buffered mode: the chunks so far; streaming mode: undefined */
  #chunks: Buffer[] | undefined
  #stream: Readable | undefined
  /** new -> (waiting ->) sent -> done; or new/waiting -> done, never sent */
  #state: 'new' | 'waiting' | 'sent' | 'done' = 'new'
  #sentAt = 0
  /** the CLIENT span, when tracing is on */
  #span: unknown
  /** rewriteAnswer's `whole` rewriting of this answer, and the bytes collected for it */
  #whole: Extract<AnswerBody, { whole: unknown }> | undefined
  #size = 0
  /** what beforeAnswer asked the answer to wait for, until it settles */
  #gate: Promise<void> | undefined
  /** the socket whose end (the client's FIN) takes a waiting request out of the queue, or ends an event stream, and that listener */
  #socket: Socket | null = null
  #onEnd: (() => void) | undefined
  /** the neighbours in the upstream's queue, while waiting */
  prev: ForwardHandler<Tag> | undefined
  next: ForwardHandler<Tag> | undefined

  private readonly reply: FastifyReply
  private readonly request: UpstreamRequest
  readonly upstream: Upstream<Tag>
  private readonly answerBegins: AnswerBegins<Tag> | undefined
  private readonly notSent: NotSent | undefined
  private readonly tag: Tag
  private readonly answerHeaders: AnswerHeaders | undefined
  private readonly trace: UpstreamTrace | undefined
  private readonly beforeAnswer: BeforeAnswer | undefined
  private readonly rewriteAnswer: RewriteAnswer | undefined

  constructor (
    reply: FastifyReply,
    request: UpstreamRequest,
    upstream: Upstream<Tag>,
    answerBegins: AnswerBegins<Tag> | undefined,
    notSent: NotSent | undefined,
    tag: Tag,
    answerHeaders: AnswerHeaders | undefined,
    trace: UpstreamTrace | undefined,
    beforeAnswer: BeforeAnswer | undefined,
    rewriteAnswer: RewriteAnswer | undefined
  ) {
    this.reply = reply
    this.request = request
    this.upstream = upstream
    this.answerBegins = answerBegins
    this.notSent = notSent
    this.tag = tag
    this.answerHeaders = answerHeaders
    this.trace = trace
    this.beforeAnswer = beforeAnswer
    this.rewriteAnswer = rewriteAnswer
  }

  /** The client's connection closed. Waiting: leave the queue, never sent. Sent: free the upstream connection. */
  readonly clientGone = (): void => {
    if (this.#state === 'waiting') {
      this.#stopWaiting()
      this.#state = 'done'
    } else if (this.#state === 'sent' && !this.reply.raw.writableFinished) {
      this.#controller?.abort(new Error('the client closed the connection'))
    }
  }

  /**
   * The client closed its sending side while the request waited: it may be gone (a FIN is all a
   * closed connection shows until something is written to it), so the request leaves the queue
   * unsent; a client that only half-closed still reads the answer.
   */
  #clientEnded (): void {
    if (this.#state !== 'waiting') return
    this.#stopWaiting()
    this.upstream.refuse(this, 'The upstream service is busy and the client closed its side of the connection while the request waited; ' +
      'the request was not sent')
  }

  /** Into the queue: listen for the client going away or half-closing meanwhile (made only here: most requests never wait). */
  wait (): void {
    this.#state = 'waiting'
    this.#socket = this.reply.raw.socket
    this.#onEnd = () => { this.#clientEnded() }
    this.#socket?.once('end', this.#onEnd)
  }

  #stopWaiting (): void {
    this.upstream.leave(this)
    this.#forgetSocket()
  }

  #forgetSocket (): void {
    if (this.#socket !== null && this.#onEnd !== undefined) this.#socket.off('end', this.#onEnd)
    this.#socket = null
    this.#onEnd = undefined
  }

  /** Onto a connection: the request's turn has come. */
  send (): void {
    if (this.#socket !== null) this.#forgetSocket()
    this.#state = 'sent'
    this.upstream.running++
    this.#sentAt = performance.now()
    const request = this.request
    if (this.trace !== undefined) this.#span = this.trace.sent(this.reply, request)
    this.upstream.pool.dispatch({
      method: request.method as Dispatcher.HttpMethod,
      path: request.path,
      headers: request.headers,
      body: request.body ?? null,
      headersTimeout: request.timeoutMs,
      bodyTimeout: request.idleMs
    }, this)
  }

  /** Never sent: answers with `error` (UPSTREAM_BUSY), if the client is still there to read it. */
  fail (error: GatewayError): void {
    this.#state = 'done'
    this.reply.raw.off('close', this.clientGone)
    this.notSent?.(this.reply)
    if (!this.reply.raw.destroyed) this.reply.send(error)
  }

  /** The sent request is over, answered or not: its connection is free for the next. */
  #finish (): void {
    if (this.#state !== 'sent') return
    this.#state = 'done'
    if (this.#socket !== null) this.#forgetSocket()
    this.reply.raw.off('close', this.clientGone)
    this.upstream.finished()
  }

  onRequestStart (controller: Dispatcher.DispatchController): void {
    this.#controller = controller
  }

  onResponseStart (controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return // 1xx: informational, the final answer follows
    this.answerBegins?.(this.tag, (performance.now() - this.#sentAt) / 1000, this.#span)
    this.#status = statusCode
    const answer = this.#headers = clientResponseHeaders(headers)
    if (this.answerHeaders !== undefined) {
      for (const name in this.answerHeaders) {
        const value = this.answerHeaders[name]
        if (value === undefined) delete answer[name]
        else answer[name] = value
      }
    }
    if (this.beforeAnswer !== undefined) {
      try {
        this.#gate = this.beforeAnswer(statusCode, answer)
      } catch (err) {
        this.#gate = Promise.reject(err)
      }
    }
    const rewrite = this.rewriteAnswer?.(statusCode, answer)
    if (rewrite !== undefined) delete answer['content-length']
    const declared = headers['content-length']
    const length = declared === undefined ? NaN : Number(declared)
    if (rewrite !== undefined && 'whole' in rewrite) this.#whole = rewrite
    const small = this.request.method === 'HEAD' || statusCode === 204 || statusCode === 304 || length <= BUFFERED_RESPONSE_MAX
    if (this.#whole !== undefined || (rewrite === undefined && small)) {
      this.#chunks = []
      return
    }
    const stream = this.#open(controller)
    if (isEventStream(headers['content-type'])) {
      const watch = untilClientLeaves(this.reply.raw, () => { this.#controller?.abort(new Error('the client left an event stream')) })
      if (watch !== undefined) [this.#socket, this.#onEnd] = watch
    }
    this.#send(rewrite === undefined || 'whole' in rewrite ? stream : pipeline(stream, rewrite.stream(), () => {}))
  }

  #open (controller: Dispatcher.DispatchController): Readable {
    const stream = this.#stream = new Readable({
      read: () => { controller.resume() },
      // cut before the upstream's end (a rewriting Transform ended the answer): the upstream's answer is not wanted either
      destroy: (error, done) => {
        if (this.#state === 'sent') controller.abort(error ?? new Error('the answer was cut'))
        done(error)
      }
    })
    stream.on('error', () => {}) // destroyed before Fastify pipes it: #send answers, never an unhandled 'error' (which ends the process)
    return stream
  }

  onResponseData (controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const whole = this.#whole
    if (whole !== undefined && this.#chunks !== undefined && (this.#size += chunk.length) > whole.max) {
      const held = this.#chunks
      this.#chunks = undefined
      if (whole.overflow === undefined) { controller.abort(whole.tooLarge()); return }
      // too large to rewrite whole: what was held, and the rest as it comes, through the overflow's Transform
      const stream = this.#open(controller)
      for (const part of held) stream.push(part)
      stream.push(chunk)
      this.#send(pipeline(stream, whole.overflow(), () => {}))
    } else if (this.#chunks !== undefined) this.#chunks.push(chunk)
    else if (this.#stream !== undefined && !this.#stream.push(chunk)) controller.pause()
  }

  onResponseEnd (): void {
    this.#finish()
    if (this.#span !== undefined) this.trace?.ended(this.#span, this.#status)
    const chunks = this.#chunks
    const body = chunks === undefined ? undefined : chunks.length === 1 ? chunks[0] as Buffer : Buffer.concat(chunks)
    if (body === undefined) this.#stream?.push(null)
    else this.#send(this.#whole === undefined ? body : this.#whole.whole(body))
  }

  onResponseError (_controller: Dispatcher.DispatchController, error: Error): void {
    this.#finish()
    if (this.#span !== undefined) this.trace?.ended(this.#span, this.#status, error)
    if (this.#stream !== undefined) {
      // the answer has begun: all that can be done is to cut it, so the client sees it is incomplete.
      // Unless none of it has reached the client yet (headers included: Fastify sends a stream's with
      // its first byte): then Fastify answers the stream's error, which must be a problem of ours
      // (504 for a body that never came), not an unexpected error (500)
      this.#stream.destroy(this.reply.raw.headersSent || error instanceof GatewayError ? error : upstreamError(error))
      return
    }
    if (NOT_CONNECTED.has((error as Error & { code?: string }).code ?? '')) this.notSent?.(this.reply)
    if (this.reply.raw.destroyed) return
    this.reply.request.log.warn({ err: error }, 'upstream request failed')
    // a GatewayError: the answer's rewriting refused it (AnswerBody's tooLarge)
    this.reply.send(error instanceof GatewayError ? error : upstreamError(error))
  }

  #send (payload: Buffer | Readable | Error): void {
    const gate = this.#gate
    if (gate !== undefined) {
      this.#gate = undefined
      gate.then(() => { this.#send(payload) }, (err: unknown) => { this.#refuseAnswer(payload, err) })
      return
    }
    if (payload instanceof Readable && payload.destroyed && !this.reply.raw.destroyed) {
      // the answer broke off while it was held back: nothing of it was sent, so say so
      this.reply.send(upstreamError(new Error('the upstream\'s answer broke off')))
      return
    }
    if (this.reply.raw.destroyed) {
      if (payload instanceof Readable) payload.destroy()
      return
    }
    if (payload instanceof Error) this.reply.send(payload)
    else this.reply.code(this.#status).headers(this.#headers ?? {}).send(payload)
  }

  /** beforeAnswer refused the answer: none of it reaches the client, which gets the error instead. */
  #refuseAnswer (payload: Buffer | Readable | Error, err: unknown): void {
    if (payload instanceof Readable) {
      payload.destroy()
      if (this.#state === 'sent') this.#controller?.abort(new Error('the answer was refused'))
    }
    if (!this.reply.raw.destroyed) this.reply.send(err)
  }
}

export class Forwarder<Tag = undefined> {
  readonly #upstreams = new Map<string, Upstream<Tag>>()

  private readonly options: ForwarderOptions & { onAnswerBegins?: AnswerBegins<Tag>; onNotSent?: NotSent; trace?: UpstreamTrace }

  constructor (options: ForwarderOptions & { onAnswerBegins?: AnswerBegins<Tag>; onNotSent?: NotSent; trace?: UpstreamTrace }) {
    this.options = options
  }

  #upstream (origin: string): Upstream<Tag> {
    let upstream = this.#upstreams.get(origin)
    if (upstream === undefined) {
      upstream = new Upstream(origin, this.options)
      this.#upstreams.set(origin, upstream)
    }
    return upstream
  }

  /**
   * Sends `request` when its upstream has a free connection, or queues it until one frees, or
   * refuses it (503 UPSTREAM_BUSY) when the queue is full; its timeoutMs bounds the wait for the
   * answer's headers once sent, then its idleMs each gap between its body chunks. Answers `reply` with the
   * upstream's answer, or with a problem. `answerHeaders`: the gateway's own headers on the
   * upstream's answer (lower-case names), replacing the upstream's of the same name; undefined
   * values remove the upstream's. `beforeAnswer`: told of the answer before the client sees any of it (BeforeAnswer).
   * `rewriteAnswer`: the rewriting of the answer's body, chosen per answer (RewriteAnswer).
   */
  forward (request: UpstreamRequest, reply: FastifyReply, tag: Tag, answerHeaders?: AnswerHeaders, beforeAnswer?: BeforeAnswer,
    rewriteAnswer?: RewriteAnswer): void {
    const handler = new ForwardHandler(reply, request, this.#upstream(request.origin), this.options.onAnswerBegins, this.options.onNotSent, tag, answerHeaders,
      this.options.trace, beforeAnswer, rewriteAnswer)
    reply.raw.once('close', handler.clientGone)
    handler.upstream.admit(handler, reply.raw.socket?.readableEnded === true)
  }

  /** Each upstream origin's queue, for the metrics. */
  queues (): Iterable<UpstreamQueueCounts> {
    return this.#upstreams.values()
  }

  async close (): Promise<void> {
    const upstreams = [...this.#upstreams.values()]
    this.#upstreams.clear()
    await Promise.all(upstreams.map(async ({ pool }) => { await pool.close() }))
  }
}
