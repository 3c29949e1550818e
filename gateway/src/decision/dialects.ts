// Where each proxy puts the original request when it asks keygate for a decision, and how that
// becomes the description the auth pipeline judges (auth/described-request.ts). One dialect per
// proxy, each at its own path of the decision listener. A decision request that does not say
// exactly one thing about the original (a header missing, given twice, or two headers that
// disagree) is refused as INVALID_DECISION_REQUEST: keygate never guesses what it is judging.
// docs/decision-mode.md gives each proxy's configuration and this table in words.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { GatewayError } from '../errors.js'
import { METHOD_TOKEN, NO_BODY_METHODS } from '#client/protocol'
import { headersDeclareBody, headersDeclaredLength, UNSEEN_BODY, type DescribedRequest, type UnseenBody } from '../auth/described-request.js'

export const DIALECTS = ['nginx', 'ingress-nginx', 'traefik', 'caddy', 'envoy'] as const
export type Dialect = typeof DIALECTS[number]

/** The decision listener's path of each dialect; Envoy's is a prefix (its path_prefix), the original path follows it. */
export const DECISION_PATH_PREFIX = '/decide/'
export const ENVOY_PATH_PREFIX = '/decide/envoy'

/** The dialect a decision request's target asks in, or undefined. */
export function dialectOf (url: string): Dialect | undefined {
  if (url === ENVOY_PATH_PREFIX || url.startsWith(`${ENVOY_PATH_PREFIX}/`) || url.startsWith(`${ENVOY_PATH_PREFIX}?`)) return 'envoy'
  const query = url.indexOf('?')
  const path = query === -1 ? url : url.slice(0, query)
  return DIALECTS.find((name) => name !== 'envoy' && path === `${DECISION_PATH_PREFIX}${name}`)
}

/** Dialects whose proxy passes only 401 and 403 from a decision (nginx): their refusals are 403 with the real status in a header. */
export const STATUS_IN_HEADER: ReadonlySet<Dialect> = new Set(['nginx', 'ingress-nginx'])

/** What a dialect reads off a decision request, before the client's address and the body are known. */
export interface OriginalRequest {
  method: string
  target: string
  scheme: string
  authority: string
  /** the original request announces body bytes */
  declaresBody: boolean
  declaredLength: number | undefined
  /** the proxy sends the original body as the decision request's body (Envoy with_request_body, Traefik forwardBody) */
  bodySent: boolean
  /**
   * the proxy cannot say whether the original had a body (Caddy: no Content-Length, which a chunked
   * body has not either; Traefik without forwardBody): decided once the route is known (bodyUnknown)
   */
  bodyUnknown?: boolean
}

/** 400 INVALID_DECISION_REQUEST: what is wrong with how the proxy described the original request. */
export function invalidDecisionRequest (dialect: Dialect, detail: string): GatewayError {
  return new GatewayError('INVALID_DECISION_REQUEST', `${dialect} decision request: ${detail}; see docs/decision-mode.md for this proxy's configuration`)
}

/** One header's one value (`name` as the docs spell it): undefined when absent; refused when the proxy sent it twice (two lines, or a list). */
function one (raw: IncomingMessage, dialect: Dialect, name: string, list = false): string | undefined {
  const lines = raw.headersDistinct[name.toLowerCase()]
  if (lines === undefined) return undefined
  if (lines.length > 1) throw invalidDecisionRequest(dialect, `${name} was sent ${lines.length} times; exactly one is needed`)
  const value = lines[0] as string
  if (list && value.includes(',')) throw invalidDecisionRequest(dialect, `${name} holds a list (${JSON.stringify(value)}); exactly one value is needed`)
  return value
}

function required (raw: IncomingMessage, dialect: Dialect, name: string): string {
  const value = one(raw, dialect, name)
  if (value === undefined || value === '') throw invalidDecisionRequest(dialect, `${name} is missing`)
  return value
}

/**
 * Whether a request whose proxy cannot say if it has a body is taken to have one (not shown): one
 * of a method with a body (POST, PUT, PATCH: not one of the protocol core's NO_BODY_METHODS), or
 * of a method the route takes a body on (bodyOnMethods). Any other (GET, HEAD, a DELETE on a route
 * that takes none) is taken to have none: docs/decision-mode.md says what that leaves to the proxy.
 */
export function unknownBodyCounts (method: string, bodyOnMethods: readonly string[]): boolean {
  return !NO_BODY_METHODS.has(method) || bodyOnMethods.includes(method)
}
const DIGITS = /^[0-9]{1,15}$/

function method (dialect: Dialect, value: string, from: string): string {
  if (!METHOD_TOKEN.test(value)) throw invalidDecisionRequest(dialect, `${from} ${JSON.stringify(value)} is not a method`)
  return value
}

/** An origin-form target as the client sent it: the request-target rules judge it further, as inline. */
function target (dialect: Dialect, value: string, from: string): string {
  if (!value.startsWith('/')) throw invalidDecisionRequest(dialect, `${from} must be the request target as the client sent it, starting with /`)
  return value
}

function scheme (dialect: Dialect, value: string | undefined): string {
  if (value === undefined) return 'http'
  const lower = value.toLowerCase()
  if (lower !== 'http' && lower !== 'https') throw invalidDecisionRequest(dialect, `X-Forwarded-Proto ${JSON.stringify(value)} is neither http nor https`)
  return lower
}

/**
 * The host the client sent: the proxy's `header` (X-Forwarded-Host) when it has one, else none (an
 * HTTP/1.0 request without Host, which inline mode also judges with no host); Envoy's is the
 * decision request's own Host, the original's :authority.
 */
function authority (raw: IncomingMessage, dialect: Dialect, header: string | undefined): string {
  if (header !== undefined) return one(raw, dialect, header, true) ?? ''
  const host = one(raw, dialect, 'Host')
  if (host === undefined || host === '') throw invalidDecisionRequest(dialect, 'Host is missing: keygate needs the host the client sent')
  return host
}

/**
 * A proxy that never sends the body sent one: the decision request is not what its configuration
 * makes, and a body here is not the one the upstream gets. Refused rather than judged.
 */
function noBodyExpected (raw: IncomingMessage, dialect: Dialect): void {
  if (headersDeclareBody(raw.headers)) {
    throw invalidDecisionRequest(dialect, 'this proxy sends keygate no body, and this decision request has one (Content-Length or Transfer-Encoding)')
  }
}

/**
 * X-Original-Content-Length, the original's Content-Length the proxy's config sends: a length
 * (0: none), or undefined when the header is absent or empty, which only Caddy's config may leave
 * so (a request without Content-Length); for nginx's it is an error (its map always sends one).
 */
function originalContentLength (raw: IncomingMessage, dialect: Dialect, required: boolean): number | undefined {
  const length = one(raw, dialect, 'X-Original-Content-Length')
  if ((length === undefined || length === '') && !required) return undefined
  if (length === undefined || !DIGITS.test(length)) {
    throw invalidDecisionRequest(dialect, 'X-Original-Content-Length must be the original request\'s Content-Length, 0 when it has none ' +
      `(got ${length === undefined ? 'none' : JSON.stringify(length)}): without it keygate cannot know whether a body it is not shown exists`)
  }
  return Number(length)
}

/** The original's body as a length (0: none) and, for nginx, its Transfer-Encoding describe it: the body itself never comes. */
function announcedBody (length: number, encoding: string | undefined): Pick<OriginalRequest, 'declaresBody' | 'declaredLength'> {
  return { declaresBody: length > 0 || (encoding !== undefined && encoding !== ''), declaredLength: length > 0 ? length : undefined }
}

/** nginx's own headers for the original's body (the config sends both). */
function nginxBody (raw: IncomingMessage, dialect: Dialect): Pick<OriginalRequest, 'declaresBody' | 'declaredLength'> {
  return announcedBody(originalContentLength(raw, dialect, true) as number, one(raw, dialect, 'X-Original-Transfer-Encoding'))
}

/** The decision request's own body headers describe the original's body, which it carries (Envoy, Traefik with forwardBody). */
function carriedBody (headers: IncomingHttpHeaders): Pick<OriginalRequest, 'declaresBody' | 'declaredLength'> {
  return { declaresBody: headersDeclareBody(headers), declaredLength: headersDeclaredLength(headers) }
}

/**
 * What the proxy's configuration says of itself in the decision path's query, which only the
 * operator writes: Traefik's `?forwardBody=true` (its forwardAuth middleware sends every body, so a
 * decision request without one had none).
 */
function saysForwardBody (url: string): boolean {
  const query = url.indexOf('?')
  return query !== -1 && new URLSearchParams(url.slice(query + 1)).get('forwardBody') === 'true'
}

/** Envoy's original target: the decision request's after its path_prefix (a query right after it is the root's). */
function envoyTarget (url: string): string {
  const rest = url.slice(ENVOY_PATH_PREFIX.length)
  return rest.startsWith('/') ? rest : `/${rest}`
}

/** The original request as `dialect` describes it in the decision request `raw` (its target at `raw.url`). */
export function originalRequest (dialect: Dialect, raw: IncomingMessage): OriginalRequest {
  const url = raw.url ?? '/'
  switch (dialect) {
    case 'nginx': {
      // the documented auth_request config: X-Original-URI ($request_uri) and X-Original-Method
      noBodyExpected(raw, dialect)
      return {
        method: method(dialect, required(raw, dialect, 'X-Original-Method'), 'X-Original-Method'),
        target: target(dialect, required(raw, dialect, 'X-Original-URI'), 'X-Original-URI'),
        scheme: scheme(dialect, one(raw, dialect, 'X-Forwarded-Proto', true)),
        authority: authority(raw, dialect, 'X-Forwarded-Host'),
        ...nginxBody(raw, dialect),
        bodySent: false
      }
    }
    case 'ingress-nginx': {
      // auth-url: X-Original-URL (scheme://host/target) and X-Original-Method; X-Original-URI, when
      // sent too, must be the same target
      noBodyExpected(raw, dialect)
      const url = required(raw, dialect, 'X-Original-URL')
      const parsed = /^(https?):\/\/([^/?#\s]+)(\/[^#\s]*)?$/i.exec(url)
      if (parsed === null) throw invalidDecisionRequest(dialect, `X-Original-URL ${JSON.stringify(url.slice(0, 200))} is not scheme://host/target`)
      const [, urlScheme, urlHost, urlTarget = '/'] = parsed as unknown as [string, string, string, string | undefined]
      const uri = one(raw, dialect, 'X-Original-URI')
      if (uri !== undefined && uri !== urlTarget) throw invalidDecisionRequest(dialect, 'X-Original-URI and X-Original-URL name different targets')
      return {
        method: method(dialect, required(raw, dialect, 'X-Original-Method'), 'X-Original-Method'),
        target: target(dialect, urlTarget, 'X-Original-URL'),
        scheme: scheme(dialect, urlScheme),
        authority: urlHost,
        ...nginxBody(raw, dialect),
        bodySent: false
      }
    }
    case 'caddy': {
      // X-Forwarded-Method/-Uri/-Host/-Proto; Caddy asks with GET and never sends the body. Its
      // config sends the original's Content-Length as X-Original-Content-Length (Caddy cannot send
      // Transfer-Encoding): without one, a chunked body is as possible as none
      noBodyExpected(raw, dialect)
      const length = originalContentLength(raw, dialect, false)
      return {
        method: method(dialect, required(raw, dialect, 'X-Forwarded-Method'), 'X-Forwarded-Method'),
        target: target(dialect, required(raw, dialect, 'X-Forwarded-Uri'), 'X-Forwarded-Uri'),
        scheme: scheme(dialect, one(raw, dialect, 'X-Forwarded-Proto', true)),
        authority: authority(raw, dialect, 'X-Forwarded-Host'),
        ...announcedBody(length ?? 0, undefined),
        bodySent: false,
        bodyUnknown: length === undefined
      }
    }
    case 'traefik': {
      // X-Forwarded-Method/-Uri/-Host/-Proto, and with forwardBody the original body as the
      // decision request's. Traefik sends no header of the original's body: without a body here, a
      // POST, PUT or PATCH may still have had one (forwardBody off), so its body counts as not shown,
      // unless the configuration says forwardBody is on (?forwardBody=true): then none is none.
      const forwardedMethod = method(dialect, required(raw, dialect, 'X-Forwarded-Method'), 'X-Forwarded-Method')
      const sent = headersDeclareBody(raw.headers)
      return {
        method: forwardedMethod,
        target: target(dialect, required(raw, dialect, 'X-Forwarded-Uri'), 'X-Forwarded-Uri'),
        scheme: scheme(dialect, one(raw, dialect, 'X-Forwarded-Proto', true)),
        authority: authority(raw, dialect, 'X-Forwarded-Host'),
        ...(sent ? carriedBody(raw.headers) : { declaresBody: false, declaredLength: undefined }),
        bodySent: sent,
        bodyUnknown: !sent && !saysForwardBody(url)
      }
    }
    case 'envoy': {
      // ext_authz's HTTP service: the original method and headers, path_prefix + the original path
      // (query included); the body, with with_request_body, as the decision request's body
      return {
        method: method(dialect, raw.method ?? '', 'the method'),
        target: envoyTarget(url),
        scheme: scheme(dialect, one(raw, dialect, 'X-Forwarded-Proto', true)),
        authority: authority(raw, dialect, undefined),
        ...carriedBody(raw.headers),
        bodySent: true
      }
    }
  }
}

/** The description the pipeline judges: the original request, its client's address, its body once known. */
export class DecisionRequest implements DescribedRequest {
  body: Buffer | undefined | UnseenBody
  readonly method: string
  readonly target: string
  readonly scheme: string
  readonly authority: string
  declaresBody: boolean
  readonly declaredLength: number | undefined
  readonly headers: IncomingHttpHeaders
  readonly ip: string
  readonly #raw: IncomingMessage
  readonly #bodyUnknown: boolean
  constructor (original: OriginalRequest, raw: IncomingMessage, ip: string) {
    this.#bodyUnknown = original.bodyUnknown === true
    this.method = original.method
    this.target = original.target
    this.scheme = original.scheme
    this.authority = original.authority
    this.declaresBody = original.declaresBody
    this.declaredLength = original.declaredLength
    this.headers = raw.headers
    this.ip = ip
    this.#raw = raw
    // a body the proxy does not send is one keygate is not shown; one it sends is read before the body stages
    this.body = original.declaresBody && !original.bodySent ? UNSEEN_BODY : undefined
  }

  field (name: string): string[] | undefined { return this.#raw.headersDistinct[name] }

  /** Once the route is known: a body the proxy could not report counts as one not shown where the request may carry one (unknownBodyCounts). */
  settleUnknownBody (bodyOnMethods: readonly string[]): void {
    if (!this.#bodyUnknown || !unknownBodyCounts(this.method, bodyOnMethods)) return
    this.declaresBody = true
    this.body = UNSEEN_BODY
  }
}
