// The proxy hop: one verified request to its route's upstream, over a keep-alive undici Pool per
// origin, and the upstream's answer back to the client.
//
// Why not @fastify/reply-from (what @fastify/http-proxy uses): measured on a 2-core machine under
// the same load, a bare @fastify/http-proxy costs 65-80 us of CPU per small GET, and this hop
// 35-42 us. reply-from copies and re-filters the headers several times, resolves and validates
// the destination per request, wraps each request in a retry closure and an AsyncResource, and
// always streams the answer; here the headers are built once (by the caller), the request is
// dispatched straight to the pool, and an answer of known small length is collected and sent as
// one buffer. Larger or unknown-length answers (downloads, event streams) are streamed with
// back-pressure. See docs/scaling.md for the figures.
import type { IncomingHttpHeaders } from 'node:http'
import { Readable } from 'node:stream'
import type { FastifyReply } from 'fastify'
import { Pool, type Dispatcher } from 'undici'
import { GatewayError } from '../errors.js'
import { connectionListed } from '../lib/http-headers.js'
import type { UpstreamRequest } from './upstream-request.js'

/** Answers up to this size (declared by Content-Length) are collected and sent in one write. */
export const BUFFERED_RESPONSE_MAX = 64 * 1024

/** Hop-by-hop response headers (RFC 9110 §7.6.1): they describe the pooled upstream connection. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer'])

export interface ForwarderOptions {
  /** keep-alive connections per upstream origin */
  connections: number
}

/**
 * `tag` names what a request was sent for (the proxy: its route); told, with the seconds it
 * waited, when the upstream's final answer begins. One function for all requests: no closure each.
 */
export type AnswerBegins<Tag> = (tag: Tag, seconds: number) => void

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
  return new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream service could not be reached', { cause: error, headers: { 'retry-after': '1' } })
}

/** One request's trip: collects a small answer, or streams a large one, into the Fastify reply. */
class ForwardHandler<Tag> implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | undefined
  #status = 0
  #headers: Record<string, string | string[]> | undefined
  /** buffered mode: the chunks so far; streaming mode: undefined */
  #chunks: Buffer[] | undefined
  #stream: Readable | undefined
  #done = false

  readonly #sentAt = performance.now()

  constructor (
    private readonly reply: FastifyReply,
    private readonly method: string,
    private readonly answerBegins: AnswerBegins<Tag> | undefined,
    private readonly tag: Tag
  ) {}

  /** The client went away: nothing to answer, free the upstream connection. */
  readonly clientGone = (): void => {
    if (!this.#done && !this.reply.raw.writableFinished) this.#controller?.abort(new Error('the client closed the connection'))
  }

  onRequestStart (controller: Dispatcher.DispatchController): void {
    this.#controller = controller
  }

  onResponseStart (controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return // 1xx: informational, the final answer follows
    this.answerBegins?.(this.tag, (performance.now() - this.#sentAt) / 1000)
    this.#status = statusCode
    this.#headers = clientResponseHeaders(headers)
    const declared = headers['content-length']
    const length = declared === undefined ? NaN : Number(declared)
    if (this.method === 'HEAD' || statusCode === 204 || statusCode === 304 || length <= BUFFERED_RESPONSE_MAX) {
      this.#chunks = []
      return
    }
    const stream = this.#stream = new Readable({ read: () => { controller.resume() } })
    this.#send(stream)
  }

  onResponseData (controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#chunks !== undefined) this.#chunks.push(chunk)
    else if (this.#stream !== undefined && !this.#stream.push(chunk)) controller.pause()
  }

  onResponseEnd (): void {
    this.#done = true
    this.reply.raw.off('close', this.clientGone)
    const chunks = this.#chunks
    if (chunks !== undefined) this.#send(chunks.length === 1 ? chunks[0] as Buffer : Buffer.concat(chunks))
    else this.#stream?.push(null)
  }

  onResponseError (_controller: Dispatcher.DispatchController, error: Error): void {
    this.#done = true
    this.reply.raw.off('close', this.clientGone)
    if (this.#stream !== undefined) {
      // the answer has begun: all that can be done is to cut it, so the client sees it is incomplete
      this.#stream.destroy(error)
      return
    }
    if (this.reply.raw.destroyed) return
    this.reply.request.log.warn({ err: error }, 'upstream request failed')
    this.reply.send(upstreamError(error))
  }

  #send (payload: Buffer | Readable): void {
    if (this.reply.raw.destroyed) {
      if (payload instanceof Readable) payload.destroy()
      return
    }
    this.reply.code(this.#status).headers(this.#headers ?? {}).send(payload)
  }
}

export class Forwarder<Tag = undefined> {
  readonly #pools = new Map<string, Pool>()

  constructor (private readonly options: ForwarderOptions & { onAnswerBegins?: AnswerBegins<Tag> }) {}

  #pool (origin: string): Pool {
    let pool = this.#pools.get(origin)
    if (pool === undefined) {
      // pipelining 1: one request at a time per connection; a slow answer never holds up another
      pool = new Pool(origin, { connections: this.options.connections, pipelining: 1 })
      this.#pools.set(origin, pool)
    }
    return pool
  }

  /**
   * Sends `request` (its timeoutMs bounds the wait for the answer's headers, then each gap between
   * its body chunks) and answers `reply` with the upstream's answer, or with a problem.
   */
  forward (request: UpstreamRequest, reply: FastifyReply, tag: Tag): void {
    const handler = new ForwardHandler(reply, request.method, this.options.onAnswerBegins, tag)
    reply.raw.once('close', handler.clientGone)
    this.#pool(request.origin).dispatch({
      method: request.method as Dispatcher.HttpMethod,
      path: request.path,
      headers: request.headers,
      body: request.body ?? null,
      headersTimeout: request.timeoutMs,
      bodyTimeout: request.timeoutMs
    }, handler)
  }

  async close (): Promise<void> {
    const pools = [...this.#pools.values()]
    this.#pools.clear()
    await Promise.all(pools.map(async (pool) => { await pool.close() }))
  }
}
