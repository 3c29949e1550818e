// The request bodies every request of a process buffers at once, bounded (KEYGATE_BODY_MEMORY_LIMIT):
// the refusal past the bound; the count for keygate's own JSON endpoints (token, key
// registration), whose bodies Fastify's JSON parser buffers; and the raw-body parser of business
// requests (the proxy, and decisions whose proxy sends the body), which counts as it reads.
import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyRequest, preParsingHookHandler } from 'fastify'
import { MAX_BODY_LIMIT } from '../../config/env.js'
import { GatewayError } from '../../errors.js'
import type { ByteBudget } from '../../lib/byte-budget.js'
import { tooLarge } from '../../proxy/admission.js'

/** Retry-After of BODY_MEMORY_EXHAUSTED, in seconds: bodies in flight finish within a request's time. */
export const BODY_MEMORY_RETRY_AFTER_SECONDS = 1

export function bodyMemoryExhausted (limit: number): GatewayError {
  return new GatewayError('BODY_MEMORY_EXHAUSTED', `The gateway already holds ${limit} bytes of request bodies, its limit ` +
    '(KEYGATE_BODY_MEMORY_LIMIT); nothing was forwarded: retry shortly', { headers: { 'retry-after': String(BODY_MEMORY_RETRY_AFTER_SECONDS) } })
}

/**
 * A preParsing hook for routes whose bodies a Fastify parser buffers (up to `bodyLimit`): the
 * declared length (a chunked body: the whole limit) is taken before the body is read, and given
 * back when the answer ends, however it ends.
 */
export function countBodyMemory (budget: ByteBudget, bodyLimit: number): preParsingHookHandler {
  return (request, reply, payload, done) => {
    const declared = request.headers['content-length']
    const chunked = request.headers['transfer-encoding'] !== undefined
    // a declared length over the limit is Fastify's 413 to give, before a byte is read
    const bytes = chunked ? bodyLimit : Math.min(Number(declared ?? 0), bodyLimit)
    if (!(bytes > 0) || reply.raw.destroyed) {
      done(null, payload)
      return
    }
    if (!budget.tryTake(bytes)) {
      done(bodyMemoryExhausted(budget.limit))
      return
    }
    reply.raw.once('close', () => { budget.give(bytes) })
    done(null, payload)
  }
}

/** the client's answer of each request whose body the parser below reads: its end (sent, failed or cut) frees the body's bytes */
const answers = new WeakMap<FastifyRequest, ServerResponse>()

/** Call in onRequest for a request that declares a body: the parser gives its bytes back when this answer ends. */
export function rememberAnswer (request: FastifyRequest, answer: ServerResponse): void {
  answers.set(request, answer)
}

/**
 * Every content type arrives as raw bytes, never parsed or re-encoded, up to the route's limit
 * (`limitOf`: known before the body is read). Bodies count against the body memory of all
 * requests together (KEYGATE_BODY_MEMORY_LIMIT), so slow senders cannot make the gateway hold
 * more: a declared Content-Length is taken whole before a byte is read (a body let in can always
 * finish: partial bodies never fill the memory so that none can complete), a chunked body chunk by
 * chunk. The bytes are given back when the answer ends (rememberAnswer), however it ends (sent,
 * failed, or the connection cut).
 */
export function parseRawBodies (app: FastifyInstance, bodyMemory: ByteBudget, limitOf: (request: FastifyRequest) => number): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { bodyLimit: MAX_BODY_LIMIT }, (request, payload, done) => {
    const limit = limitOf(request)
    let chunks: Buffer[] = []
    let size = 0
    let held = 0
    let finished = false
    const giveBack = (): void => {
      bodyMemory.give(held)
      held = 0
    }
    const answer = answers.get(request)
    answer?.once('close', giveBack)
    // checked against the route's limit before the body was read (proxy/admission.ts)
    const declared = Number(request.headers['content-length'] ?? 0)
    if (declared > 0) {
      if (!bodyMemory.tryTake(declared)) {
        done(bodyMemoryExhausted(bodyMemory.limit), undefined)
        return
      }
      held = declared
    }
    const finish = (err: Error | null, body?: Buffer): void => {
      if (finished) return
      finished = true
      payload.removeAllListeners('data')
      // a refused body is dropped now, not when the answer ends; so is one whose answer ended already
      // (its client went away): no 'close' would come to give its bytes back
      if (err !== null || answer === undefined || answer.destroyed) {
        chunks = []
        giveBack()
      }
      done(err, body)
    }
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) finish(tooLarge(limit))
      else if (declared === 0 && !bodyMemory.tryTake(chunk.length)) finish(bodyMemoryExhausted(bodyMemory.limit))
      else {
        if (declared === 0) held += chunk.length
        chunks.push(chunk)
      }
    })
    payload.on('end', () => { finish(null, Buffer.concat(chunks, size)) })
    // A client that goes away mid-body is the client's doing, not an internal error.
    payload.on('error', (err) => {
      finish(new GatewayError('MALFORMED_HTTP', 'The request body ended before its declared length', { cause: err }))
    })
  })
}
