/** The methods a route may allow. CONNECT and TRACE are never forwarded. */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const
export type HttpMethod = (typeof HTTP_METHODS)[number]

/**
 * Methods that carry no body: the gateway refuses one with a body (it would be forwarded with
 * unread bytes, or answered as if they were not there), and sends them upstream without a
 * Content-Length. A client signs them over the empty body.
 */
export const BODYLESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'TRACE'])

/** Why a request of this method may not carry a body anywhere (400 VALIDATION_FAILED), or undefined. */
export function bodylessMethodProblem (method: string): string | undefined {
  return BODYLESS_METHODS.has(method) ? `A ${method} request carries no body` : undefined
}

/** The methods a signed route may take a body on after all (its bodyOnMethods). */
export const BODY_OPTIONAL_METHODS = ['DELETE', 'OPTIONS'] as const

/**
 * Methods whose content has no defined meaning (RFC 9110 §9.3): servers may ignore a body on them
 * or read it, so what was signed and what is done can differ. BODYLESS_METHODS refuse one
 * everywhere; on signed routes BODY_OPTIONAL_METHODS do too, unless the route takes one (bodyOnMethods).
 */
export const NO_BODY_METHODS: ReadonlySet<string> = new Set([...BODYLESS_METHODS, ...BODY_OPTIONAL_METHODS])

/**
 * Why a signed request of this method may not carry a body (400 VALIDATION_FAILED, as a GET with
 * one), or undefined; `bodyOnMethods`: the methods the route takes a body on after all.
 */
export function signedBodyMethodProblem (method: string, bodyOnMethods: readonly string[] = []): string | undefined {
  if (!NO_BODY_METHODS.has(method)) return undefined
  const bodyless = bodylessMethodProblem(method)
  if (bodyless !== undefined || bodyOnMethods.includes(method)) return bodyless
  return `A signed ${method} request carries no body here: a body on ${method} has no defined meaning, so a backend may ignore what was signed ` +
    `or act on it; send the request without one, or give the route bodyOnMethods: [${method}]`
}

/** Methods that change nothing: a repeat of one does no harm, so it is never refused as a replay. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE'])

/** RFC 9110 token characters: what a method name may be made of. */
export const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
