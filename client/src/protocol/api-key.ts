/**
 * An apiKey as registration returns it and X-API-Key carries it: the lowercase hex SHA-256 of the
 * key's DER SubjectPublicKeyInfo, so one key has one apiKey whatever its PEM wrapping.
 */
export const API_KEY_PATTERN = /^[0-9a-f]{64}$/

/**
 * The apiKey of a public key, given its DER SubjectPublicKeyInfo and a SHA-256 of the runtime's:
 * synchronous with a synchronous hash (node:crypto), a promise with an asynchronous one (WebCrypto).
 */
export function apiKeyOfSpki<Hex extends string | Promise<string>> (spkiDer: Uint8Array, sha256Hex: (parts: readonly Uint8Array[]) => Hex): Hex {
  return sha256Hex([spkiDer])
}
