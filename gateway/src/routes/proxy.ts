// A business route: the auth pipeline, then @fastify/http-proxy to the route's upstream.
// The body is buffered (up to the route's limit) so the signature is checked over the exact bytes,
// and those same bytes are forwarded. Client-sent identity headers never reach the upstream: the
// gateway drops them and writes its own last.
import type { IncomingHttpHeaders } from 'node:http'
import { Readable } from 'node:stream'
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy'
import type { FastifyReplyFromHooks } from '@fastify/reply-from'
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { runStages, type AuthStage } from '../auth/pipeline.js'
import type { RouteConfig } from '../config.js'
import { GatewayError } from '../errors.js'

export interface ProxyRouteOptions {
  route: RouteConfig
  stages: readonly AuthStage[]
}

export const IDENTITY_HEADERS = { user: 'x-gateway-user', key: 'x-gateway-key', keyName: 'x-gateway-key-name' } as const
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'TRACE'])
/** upstream keep-alive connections per route */
const UPSTREAM_CONNECTIONS = 128

// The exact bytes received, kept for the content-length we send once the body becomes a stream.
const forwardedBodies = new WeakMap<object, Buffer>()

/** Client headers minus anything that could pass for the gateway's word, plus the gateway's identity. */
export const upstreamHeaders: NonNullable<FastifyReplyFromHooks['rewriteRequestHeaders']> = (request, headers) => {
  const out: IncomingHttpHeaders = {}
  for (const name of Object.keys(headers)) {
    if (name.startsWith('x-gateway-') || name === 'authorization' || name === 'x-api-signature' ||
      name === 'content-length' || name === 'transfer-encoding') continue
    out[name] = (headers as IncomingHttpHeaders)[name]
  }
  if (!BODYLESS_METHODS.has(request.method)) out['content-length'] = String(forwardedBodies.get(request)?.length ?? 0)
  const auth = (request as FastifyRequest).auth
  if (auth?.user !== undefined) out[IDENTITY_HEADERS.user] = auth.user
  if (auth?.key !== undefined) {
    out[IDENTITY_HEADERS.key] = auth.key.apiKey
    out[IDENTITY_HEADERS.keyName] = auth.key.name
  }
  return out
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer'])

/**
 * The upstream's answer minus its hop-by-hop headers (RFC 9110 §7.6.1): its `Connection:
 * keep-alive` describes the gateway's pooled connection, not the client's, and must not override
 * the client's own `Connection: close`.
 */
export const clientResponseHeaders: NonNullable<FastifyReplyFromHooks['rewriteHeaders']> = (headers) => {
  const listed = String(headers.connection ?? '').toLowerCase().split(',').map((name) => name.trim())
  const out: IncomingHttpHeaders = {}
  for (const [name, value] of Object.entries(headers)) {
    if (HOP_BY_HOP.has(name) || listed.includes(name)) continue
    out[name] = value as string | string[]
  }
  return out
}

const upstreamFailure: NonNullable<FastifyReplyFromHooks['onError']> = (reply, { error }) => {
  const timedOut = (error as Error & { statusCode?: number }).statusCode === 504
  reply.request.log.warn({ err: error.cause ?? error }, 'upstream request failed')
  reply.send(timedOut
    ? new GatewayError('UPSTREAM_TIMEOUT', 'The upstream service did not answer in time')
    : new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream service could not be reached', { headers: { 'retry-after': '1' } }))
}

export const proxyRoute: FastifyPluginAsync<ProxyRouteOptions> = async (app, { route, stages }) => {
  const beforeBody = stages.filter((stage) => !stage.needsBody)
  const afterBody = stages.filter((stage) => stage.needsBody)

  // Every content type arrives as raw bytes: nothing is parsed, re-encoded or normalised.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: route.bodyLimit }, (_request, body, done) => { done(null, body) })

  app.addHook('onRequest', async (request) => {
    // GET carries no body (and Fastify would not read one): refuse rather than forward unread bytes.
    if (BODYLESS_METHODS.has(request.method) &&
      (request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] ?? '0') !== '0')) {
      throw new GatewayError('VALIDATION_FAILED', `A ${request.method} request carries no body`)
    }
    request.auth = {}
    await runStages(beforeBody, request, request.auth)
  })

  const prefix = route.prefix.endsWith('/') ? route.prefix.slice(0, -1) : route.prefix
  const proxyOptions: FastifyHttpProxyOptions = {
    upstream: route.upstream,
    prefix,
    rewritePrefix: prefix,
    httpMethods: route.methods,
    proxyPayloads: false,
    preHandler: async (request) => {
      await runStages(afterBody, request, request.auth ?? {})
    },
    undici: {
      connections: UPSTREAM_CONNECTIONS,
      pipelining: 1,
      headersTimeout: route.timeoutMs,
      bodyTimeout: route.timeoutMs
    },
    replyOptions: {
      rewriteRequestHeaders: upstreamHeaders,
      rewriteHeaders: clientResponseHeaders,
      onError: upstreamFailure,
      // A gateway that silently re-sends requests can double a side effect: never retry.
      retryDelay: () => null
    },
    handler: (request, reply, dest, options) => {
      const body = request.body
      if (Buffer.isBuffer(body) && body.length > 0) {
        forwardedBodies.set(request, body)
        // reply-from would JSON-encode a Buffer body sent as application/json; a stream passes as is.
        request.body = Readable.from([body])
      } else {
        request.body = undefined
      }
      return reply.from(dest, options)
    }
  }
  await app.register(httpProxy, proxyOptions)
}
