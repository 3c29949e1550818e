import { Type, type Static } from '@sinclair/typebox'

// Printable ASCII only: the name travels to upstreams in the x-gateway-key-name header, whose value
// must be plain text, and is signed byte for byte.
export const KEY_NAME_PATTERN = '^[\\x20-\\x7E]{1,100}$'

export const ApiKeyRequest = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100, pattern: KEY_NAME_PATTERN }),
  publicKey: Type.String({ minLength: 1, maxLength: 16_384 }),
  signature: Type.String({ minLength: 1, maxLength: 4096 })
}, { additionalProperties: false })
export type ApiKeyRequest = Static<typeof ApiKeyRequest>

export const ApiKeyResponse = Type.Object({
  message: Type.String(),
  apiKey: Type.String({ description: 'send it in X-API-Key' }),
  name: Type.String()
}, { description: 'The key is registered' })
