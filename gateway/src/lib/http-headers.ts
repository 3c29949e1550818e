/**
 * The header names a `Connection` header lists, lower-cased: hop-by-hop headers of that one
 * connection, which a proxy never passes on. Empty without one.
 */
export function connectionListed (value: string | string[] | undefined): string[] {
  if (value === undefined) return []
  return String(value).toLowerCase().split(',').map((name) => name.trim())
}
