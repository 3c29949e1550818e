import { createHash } from 'node:crypto'

/** Lowercase hex SHA-256 of the parts, hashed in turn (no copy of a large body). */
export function sha256Hex (parts: readonly Uint8Array[]): string {
  const hash = createHash('sha256')
  for (const part of parts) hash.update(part)
  return hash.digest('hex')
}
