// What the auth pipeline judges: a description of one client request, not the HTTP request it
// arrived in. Inline mode describes the request it is about to forward (http/inline-request.ts);
// decision mode the request a proxy in front tells it about (decision/dialects.ts). Every stage
// reads only this, so no stage is written twice and none knows which mode it runs in.
import type { IncomingHttpHeaders } from 'node:http'
import { GatewayError } from '../errors.js'

/** A body the judge cannot see: the proxy in front does not send it (decision mode, nginx and Caddy). */
export const UNSEEN_BODY = 'unseen'
export type UnseenBody = typeof UNSEEN_BODY

export interface DescribedRequest {
  /** the method as the client sent it */
  readonly method: string
  /** the request target as the client sent it, byte for byte: path, and ?query when there is one */
  readonly target: string
  /** the client's header fields, as Node joins them (lower-case names) */
  readonly headers: IncomingHttpHeaders
  /** one field's lines, each as received (RFC 9421 component values) */
  field: (name: string) => string[] | undefined
  /** the scheme and host[:port] the client used (RFC 9421's @target-uri, @authority, @scheme) */
  readonly scheme: string
  readonly authority: string
  /** the client's address (the failed-signature budget, address rate limits) */
  readonly ip: string
  /** the request announces body bytes (a Transfer-Encoding, or a Content-Length other than 0) */
  readonly declaresBody: boolean
  /** its Content-Length, when it has one */
  readonly declaredLength: number | undefined
  /**
   * The body: its bytes once read (none: undefined or empty); UNSEEN_BODY when the request has one
   * that the judge is not shown. Set by the mode before the stages that need the body run.
   */
  body: Buffer | undefined | UnseenBody
}

const EMPTY = Buffer.alloc(0)

/** The body's bytes as the signature schemes read them: empty when there are none. Not for an unseen body. */
export function bodyBytes (request: DescribedRequest): Buffer {
  const body = request.body
  return body === undefined || body === UNSEEN_BODY ? EMPTY : body
}

/** Whether the request has body bytes, seen or not. */
export function hasBody (request: DescribedRequest): boolean {
  const body = request.body
  return body === UNSEEN_BODY || (body !== undefined && body.length > 0)
}

/** The Content-Length headers give, when they give one. */
export function headersDeclaredLength (headers: IncomingHttpHeaders): number | undefined {
  const length = headers['content-length']
  return length === undefined ? undefined : Number(length)
}

/** Whether headers announce body bytes: a Transfer-Encoding, or a Content-Length other than 0. */
export function headersDeclareBody (headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] ?? '0') !== '0'
}

/**
 * 400 UNSEEN_BODY: a request whose body keygate is not shown, so cannot vouch for, and `why` it
 * may not pass anyway. The detail names the ways it could.
 */
export function unseenBodyError (why: string): GatewayError {
  return new GatewayError('UNSEEN_BODY', `This request has a body that keygate is not shown, and ${why}. ` +
    'nginx, ingress-nginx and Caddy send an auth service no body; Envoy (ext_authz with_request_body) and Traefik ' +
    '(forwardAuth forwardBody) do, and keygate inline (as the proxy) sees every body. A route with unseenBody: digest ' +
    'lets an RFC 9421 signature that covers content-digest pass, and the upstream checks the digest (docs/decision-mode.md)')
}
