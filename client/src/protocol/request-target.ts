// The request-target rules: a target with characters a URI may not carry unencoded is refused
// before any other check, so the signed target can never run into the body or be read two ways.
// Stricter still, for the path-confusion cases a proxy must not forward differently than it
// verified: only origin-form ("/path?query"), no fragment, well-formed %XX, and no "." or ".."
// segment, plain or percent-encoded (a URL parser would fold them away after verification).
// Canonical paths: routes match the raw path but backends normalise it, so no path may hold a
// form a backend reads as another path: an encoded unreserved character (%63 is "c"), an encoded
// "/" or "\", an encoded control character (%00 ends a path in C, %09 is trimmed like a space),
// an empty segment ("//"), or a "." or ".." segment behind matrix parameters (".;x",
// which Tomcat and Spring read as "."). A ";" itself is the route's call (allowMatrixParams), so
// the gateway checks it after matching; the query, after "?", is left as it is.

/**
 * One character a request target may hold: RFC 3986 pchar plus "/" and "?", and "%" (checked
 * below). Everything else is refused. The seed scheme's body rule is derived from it
 * (signing-string.ts): change it here and both follow.
 */
export const TARGET_CHARACTER = /[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]/
const ORIGIN_FORM = new RegExp(`^/${TARGET_CHARACTER.source}*$`)
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
  return canonicalPathProblem(path)
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/
const PERCENT_ENCODED = /%([0-9A-Fa-f]{2})/g

/**
 * Why a path (no query) that passed the other rules is not in canonical form: a form a backend
 * reads as another path. A ";" (matrix parameters) is allowed here: whether a path may carry them
 * is the route's call; but the segment before it is checked as if the ";..." were not there.
 */
function canonicalPathProblem (path: string): string | undefined {
  if (path.includes('%')) {
    for (const [escape, hex] of path.matchAll(PERCENT_ENCODED)) {
      const code = parseInt(hex as string, 16)
      // Servers end a path at a NUL, trim a trailing TAB like a space (IIS), or log a CR LF as a
      // line of its own: an encoded control byte has no meaning in a path that all of them agree on.
      if (code < 0x20 || code === 0x7f) {
        return `The request path has an encoded control character ${escape}, which servers truncate, trim or log as a line break: keygate refuses it`
      }
      if (code === 0x2f || code === 0x5c) {
        const what = code === 0x2f ? '"/"' : '"\\"'
        return `The request path has an encoded ${what} (${escape}), which one server reads as a segment boundary and another as part of a segment: ` +
          'keygate refuses it; send such a value in the query'
      }
      const char = String.fromCharCode(code)
      if (UNRESERVED.test(char)) {
        return `The request path has an encoded unreserved character ${escape} ('${char}'): send it unencoded`
      }
    }
  }
  if (path.includes('//')) return 'The request path has an empty segment ("//"), which servers merge: send the path with single slashes'
  if (path.includes(';')) {
    const segments = path.split('/')
    for (let i = 1; i < segments.length; i++) {
      const segment = segments[i] as string
      const semicolon = segment.indexOf(';')
      if (semicolon === -1) continue
      const name = segment.slice(0, semicolon)
      if (name === '') return 'The request path has a segment of matrix parameters only ("/;..."), which servers read as an empty segment'
      if (name === '.' || name === '..') {
        return `The request path has a "${name}" segment before matrix parameters ("${segment}"), which servers read as "${name}"`
      }
    }
  }
  return undefined
}

/** The path of a request target: everything before the first "?". */
export function pathOf (target: string): string {
  const query = target.indexOf('?')
  return query === -1 ? target : target.slice(0, query)
}
