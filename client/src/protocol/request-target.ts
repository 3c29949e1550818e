// The request-target rules: a target with characters a URI may not carry unencoded is refused
// before any other check, so the signed target can never run into the body or be read two ways.
// Stricter still, for the path-confusion cases a proxy must not forward differently than it
// verified: only origin-form ("/path?query"), no fragment, well-formed %XX, and no "." or ".."
// segment, plain or percent-encoded (a URL parser would fold them away after verification).

// RFC 3986 pchar plus "/" and "?", and "%" checked below. Everything else is refused.
const ORIGIN_FORM = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*$/
const BAD_PERCENT = /%(?![0-9A-Fa-f]{2})/

/** Why the gateway refuses this request target (400 INVALID_TARGET), or undefined when it accepts it. */
export function requestTargetProblem (target: string): string | undefined {
  if (!ORIGIN_FORM.test(target)) {
    return 'The request target must be "/path" or "/path?query" made of URI characters; percent-encode anything else (space, quotes, braces, non-ASCII, ...)'
  }
  if (BAD_PERCENT.test(target)) return 'The request target has a "%" not followed by two hex digits'
  const path = pathOf(target)
  let decoded: string
  try {
    decoded = decodeURIComponent(path)
  } catch {
    return 'The request path percent-encodes bytes that are not UTF-8 (e.g. an overlong sequence)'
  }
  // After decoding, so that "%2e%2e%2f" and "..%5c" count too: an upstream that decodes would see
  // them. ".." touching a slash is refused even inside a segment ("/a/..b"): the proxy library
  // refuses those too, and the refusal must come before authentication, not after it.
  const slashed = decoded.replaceAll('\\', '/')
  if (slashed.split('/').some((segment) => segment === '.') || slashed.includes('/..') || slashed.includes('../')) {
    return 'The request path has a "." or ".." segment, or ".." next to a "/" (plain or percent-encoded); send the normalised path'
  }
  return undefined
}

/** The path of a request target: everything before the first "?". */
export function pathOf (target: string): string {
  const query = target.indexOf('?')
  return query === -1 ? target : target.slice(0, query)
}
