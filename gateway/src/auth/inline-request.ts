// Inline mode's description of a request (described-request.ts): the request keygate is about to
// forward, read from the Fastify request it arrived in. Built once per request, and cheap: each
// part is read from the request when a stage asks for it, and the body is added once it is read.
import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyRequest } from 'fastify'
import { headersDeclareBody, headersDeclaredLength, type DescribedRequest, type UnseenBody } from './described-request.js'

/**
 * The scheme or host a trusted load balancer says the client used: X-Forwarded-Proto/-Host, or
 * proto=/host= of Forwarded's first element (the client-most hop). Undefined without a trusted hop.
 */
function forwardedByTrustedProxy (request: FastifyRequest, name: 'proto' | 'host'): string | undefined {
  const headers = request.proxyHop?.headers
  if (headers === undefined) return undefined
  const first = (value: string): string | undefined => value.split(',')[0]?.trim() || undefined
  const forwardedX = headers[`x-forwarded-${name}`]
  if (forwardedX !== undefined) return first(forwardedX)
  const element = headers.forwarded === undefined ? undefined : first(headers.forwarded)
  const match = element === undefined ? null : new RegExp(`(?:^|;)\\s*${name}=(?:"([^"]*)"|([^;]+))`, 'i').exec(element)
  return match?.[1] ?? match?.[2]?.trim()
}

class InlineRequest implements DescribedRequest {
  body: Buffer | undefined | UnseenBody = undefined
  readonly #request: FastifyRequest
  constructor (request: FastifyRequest) { this.#request = request }
  get method (): string { return this.#request.raw.method ?? '' }
  get target (): string { return this.#request.raw.url ?? '' }
  get headers (): IncomingHttpHeaders { return this.#request.headers }
  field (name: string): string[] | undefined { return this.#request.raw.headersDistinct[name] }
  /** behind a trusted load balancer, the scheme and host it forwarded; else this connection's */
  get scheme (): string { return forwardedByTrustedProxy(this.#request, 'proto') ?? this.#request.protocol }
  get authority (): string { return forwardedByTrustedProxy(this.#request, 'host') ?? this.#request.host }
  get ip (): string { return this.#request.ip }
  get declaresBody (): boolean { return headersDeclareBody(this.#request.headers) }
  get declaredLength (): number | undefined { return headersDeclaredLength(this.#request.headers) }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** the request as the auth pipeline judges it (inline-request.ts); null until authentication starts */
    described: DescribedRequest | null
  }
}

/** This request's description, made on first use. */
export function describeInline (request: FastifyRequest): DescribedRequest {
  return request.described ?? (request.described = new InlineRequest(request))
}

/** Its body, once Fastify has read it: the bytes the signature covers and the upstream receives. */
export function withBody (request: FastifyRequest): DescribedRequest {
  const described = describeInline(request)
  const body = request.body
  described.body = Buffer.isBuffer(body) && body.length > 0 ? body : undefined
  return described
}
