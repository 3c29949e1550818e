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
