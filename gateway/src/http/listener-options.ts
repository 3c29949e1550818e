// What the listeners that judge requests (the public port: app.ts; the decision listener:
// decision/server.ts) share of Fastify's options, so each protection holds on both: one access-log
// line per request instead of Fastify's two; slowloris limits (headers, then the whole request,
// within these times; idle keep-alive connections closed after keepAliveTimeout); each request
// taking what the request-line tracker read of its line; a missing Host refused by the
// request-target check as problem+json (Node's own refusal is a bare 400); problem+json for
// Fastify's own errors and for the shutdown (not Node's bare 503); a request's logger made only
// when the request first logs.
import { randomUUID } from 'node:crypto'
import { LogController } from 'fastify'
import type { ServerLimits } from '../config/env.js'
import { lazyChildLoggerFactory } from '../lib/lazy-child-logger.js'
import { TrackedIncomingMessage } from '../lib/request-line-tracker.js'
import { clientErrorHandler, frameworkErrors } from './plugins/problems.js'

export function listenerOptions (limits: Pick<ServerLimits, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs'>, maxHeaderSize: number) {
  return {
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      maxHeaderSize,
      connectionsCheckingInterval: 1000,
      requireHostHeader: false,
      IncomingMessage: TrackedIncomingMessage
    },
    return503OnClosing: false,
    frameworkErrors,
    childLoggerFactory: lazyChildLoggerFactory,
    clientErrorHandler
  }
}
