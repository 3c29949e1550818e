/**
 * The header names a `Connection` header lists, lower-cased: hop-by-hop headers of that one
 * connection, which a proxy never passes on. Empty without one.
 */
export function connectionListed (value: string | string[] | undefined): string[] {
  if (value === undefined) return []
  return String(value).toLowerCase().split(',').map((name) => name.trim())
}

/**
 * A media type's parts (RFC 9110 §8.3.1): the type/subtype, then each parameter, trimmed and in
 * lower case. `[]` for none, and for a field sent twice (Node joins it into an array): two
 * Content-Types give no one reading.
 */
export function mediaTypeParts (value: string | string[] | undefined): string[] {
  if (typeof value !== 'string') return []
  return value.split(';').map((part) => part.trim().toLowerCase())
}

/** A media type's type/subtype, in lower case: '' for none (mediaTypeParts). */
export function mediaTypeOf (value: string | string[] | undefined): string {
  return typeof value === 'string' ? (value.split(';', 1)[0] as string).trim().toLowerCase() : ''
}

const PLAIN_AUTHORITY = /^(?:[A-Za-z0-9._~-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/

/**
 * Whether a Host (or a forwarded host) is one host[:port] and nothing else: a name or a bracketed
 * address, and a port. Only such a value may be put in a URL as it is: userinfo, a path, a query or
 * a fragment would move where a URL parser reads the host (`good.example#` then `/other`).
 */
export function isPlainAuthority (value: string): boolean {
  return PLAIN_AUTHORITY.test(value)
}
