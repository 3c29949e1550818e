import { createHash } from 'node:crypto'

/** Lowercase hex SHA-256 of the parts, hashed in turn (no copy of a large body). */
export function sha256Hex (parts: readonly Uint8Array[]): string {
  const hash = createHash('sha256')
  for (const part of parts) hash.update(part)
  return hash.digest('hex')
}

/** base64url SHA-256 of a string: a bounded, key-safe stand-in for any text (43 characters) */
export function sha256Base64url (text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('base64url')
}
