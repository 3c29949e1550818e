// Bytes without Buffer: only what every runtime the client supports has (TextEncoder, btoa, atob,
// WebCrypto's digest).

/** Bytes over an ArrayBuffer of their own: what WebCrypto and fetch take, in every runtime's typings. */
export type Bytes = Uint8Array<ArrayBuffer>

const encoder = new TextEncoder()

export function utf8 (text: string): Bytes {
  return encoder.encode(text)
}

/** A Uint8Array (a Node.js Buffer is one), from this realm or another. */
export function isUint8Array (value: unknown): value is Uint8Array {
  return value instanceof Uint8Array || Object.prototype.toString.call(value) === '[object Uint8Array]'
}

export function isArrayBuffer (value: unknown): value is ArrayBuffer {
  return value instanceof ArrayBuffer || Object.prototype.toString.call(value) === '[object ArrayBuffer]'
}

/** The bytes as they are when they sit in an ArrayBuffer (no copy), else a copy (a SharedArrayBuffer's). */
export function ownBytes (bytes: Uint8Array): Bytes {
  return isArrayBuffer(bytes.buffer) ? bytes as Bytes : bytes.slice()
}

export function concatBytes (parts: readonly Uint8Array[]): Bytes {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

const CHUNK = 0x8000

/** Standard base64, one line, padded. */
export function toBase64 (bytes: Uint8Array): string {
  let binary = ''
  for (let at = 0; at < bytes.length; at += CHUNK) binary += String.fromCharCode(...bytes.subarray(at, at + CHUNK))
  return btoa(binary)
}

/** Standard base64 (whitespace ignored) to bytes; undefined when it is not base64. */
export function fromBase64 (text: string): Bytes | undefined {
  const compact = text.replace(/\s+/g, '')
  if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) return undefined
  const binary = atob(compact)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

export function toHex (bytes: Uint8Array): string {
  let hex = ''
  for (const byte of bytes) hex += byte.toString(16).padStart(2, '0')
  return hex
}

/** WebCrypto, or an error saying why this runtime has none. */
export function subtle (): typeof globalThis.crypto.subtle {
  const found = (globalThis as { crypto?: { subtle?: typeof globalThis.crypto.subtle } }).crypto?.subtle
  if (found === undefined) {
    throw new Error('@keygate/client needs WebCrypto (globalThis.crypto.subtle), which this runtime does not offer: ' +
      'browsers offer it on https:// pages and on http://localhost only; Node.js from version 20')
  }
  return found
}

/** Lowercase hex SHA-256 of the parts, in order. */
export async function sha256Hex (parts: readonly Uint8Array[]): Promise<string> {
  const whole = parts.length === 1 ? ownBytes(parts[0] as Uint8Array) : concatBytes(parts)
  return toHex(new Uint8Array(await subtle().digest('SHA-256', whole)))
}
