/** The methods a route may allow. CONNECT and TRACE are never forwarded. */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const
export type HttpMethod = (typeof HTTP_METHODS)[number]

/**
 * Methods that carry no body: the gateway refuses one with a body (it would be forwarded with
 * unread bytes, or answered as if they were not there), and sends them upstream without a
 * Content-Length. A client signs them over the empty body.
 */
export const BODYLESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'TRACE'])

/** Methods that change nothing: a repeat of one does no harm, so it is never refused as a replay. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE'])

/** RFC 9110 token characters: what a method name may be made of. */
export const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
