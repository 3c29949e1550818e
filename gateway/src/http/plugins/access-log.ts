// One log line per request, written when the response is done: who (client address, user, key),
// what (and the business route that took it), the outcome and, for a denial, the reason code.
// Never a header value, token, signature or body; a credential in the query string is redacted
// (lib/redact-url.ts). reqId, on every line, is the x-request-id of the answer.
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { redactUrl } from '../../lib/redact-url.js'

/** pino's loggers (and the lazy request logger) have it; Fastify's logger type does not say so */
type LevelChecking = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }

export interface AccessLogOptions {
  /** with tracing on: the request's trace and SERVER span ids (tracing/tracer.ts) */
  traceIds?: ((request: FastifyRequest) => { traceId: string; spanId: string } | undefined) | undefined
}

const accessLog: FastifyPluginAsync<AccessLogOptions> = async (app, { traceIds }) => {
  app.addHook('onResponse', (request, reply, done) => {
    // below LOG_LEVEL=info the line is dropped: not built (nor its URL redacted) for nothing
    if ((request.log as LevelChecking).isLevelEnabled?.('info') === false) {
      done()
      return
    }
    const auth = request.auth
    const ids = traceIds?.(request)
    request.log.info({
      method: request.method,
      // the client's address (behind a trusted proxy, the one it reports): an IP address, never header text
      ip: request.ip,
      url: redactUrl(request.url),
      route: request.forward?.route.name,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      user: auth?.user,
      apiKey: auth?.key?.apiKey,
      reason: request.denialReason ?? undefined,
      trace_id: ids?.traceId,
      span_id: ids?.spanId
    }, 'request')
    done()
  })
}

export const accessLogPlugin = fp(accessLog, { name: 'keygate-access-log', fastify: '5.x', dependencies: ['keygate-problems'] })
