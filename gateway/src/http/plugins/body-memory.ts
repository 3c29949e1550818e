// The request bodies every request of a process buffers at once, bounded (KEYGATE_BODY_MEMORY_LIMIT):
// the refusal past the bound, and the count for keygate's own JSON endpoints (token, key
// registration), whose bodies Fastify's JSON parser buffers. Business routes count theirs as they
// read them (http/routes/proxy.ts).
import type { preParsingHookHandler } from 'fastify'
import { GatewayError } from '../../errors.js'
import type { ByteBudget } from '../../lib/byte-budget.js'

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
