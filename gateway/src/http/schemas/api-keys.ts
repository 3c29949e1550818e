import { Type, type Static, type TArray, type TString } from '@sinclair/typebox'
import { PageOf } from './paging.js'
import { MAX_SCOPES, SCOPE_RULE } from '../../users/scopes.js'

/**
 * A list of scopes in a request body (registration, the admin API's users and keys): each checked
 * by the scope rule in the service (users/scopes.ts), whose answer names the bad one; here only
 * what bounds the body.
 */
export const ScopeList = (description: string): TArray<TString> =>
  Type.Array(Type.String({ maxLength: 200, description: `a scope: ${SCOPE_RULE}` }), { uniqueItems: true, maxItems: MAX_SCOPES, description })

// Printable ASCII only: the name travels to upstreams in the x-gateway-key-name header, whose value
// must be plain text, and is signed byte for byte.
export const KEY_NAME_PATTERN = '^[\\x20-\\x7E]{1,100}$'

export const ApiKeyRequest = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100, pattern: KEY_NAME_PATTERN }),
  publicKey: Type.String({ minLength: 1, maxLength: 16_384 }),
  signature: Type.String({ minLength: 1, maxLength: 4096 }),
  // ISO 8601 with a time zone, in the future, at most 5 years ahead (checked by the registry)
  expiresAt: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  // each a scope (checked by the registry, whose answer names the bad one and the rule)
  scopes: Type.Optional(ScopeList('what the key may do: some of your user\'s scopes; absent: all of them (as they are now)'))
}, { additionalProperties: false })
export type ApiKeyRequest = Static<typeof ApiKeyRequest>

export const ApiKeyResponse = Type.Object({
  message: Type.String(),
  apiKey: Type.String({ description: 'send it in X-API-Key (or as keyid in RFC 9421 Signature-Input)' }),
  name: Type.String(),
  expiresAt: Type.Optional(Type.String({ description: 'ISO 8601 (UTC); absent: the key does not expire' })),
  scopes: Type.Array(Type.String(), { description: 'the key\'s scopes' })
}, { description: 'The key is registered' })

/** One of the caller's keys, as GET /v1/api-keys lists it. */
export const ApiKeyView = Type.Object({
  apiKey: Type.String(),
  name: Type.String(),
  createdAt: Type.String({ description: 'ISO 8601' }),
  lastUsedAt: Type.Union([Type.String(), Type.Null()], { description: 'ISO 8601, to the minute; null: never used' }),
  status: Type.Union([Type.Literal('active'), Type.Literal('revoked'), Type.Literal('expired')]),
  keyType: Type.Optional(Type.Union([Type.Literal('rsa'), Type.Literal('ed25519'), Type.Literal('p256')], {
    description: 'the key\'s type, which says how it signs: rsa (RSA-SHA256), ed25519, p256 (ECDSA P-256 SHA-256)'
  })),
  expiresAt: Type.Optional(Type.String({ description: 'ISO 8601; absent: the key does not expire' })),
  revokedAt: Type.Optional(Type.String({ description: 'ISO 8601; present once revoked' })),
  prunedAt: Type.Optional(Type.String({
    description: 'ISO 8601 (the admin API\'s GET /v1/keys/{apiKey} only): the revoked key was cut down to a tombstone after KEYGATE_REVOKED_KEY_RETENTION_DAYS'
  })),
  scopes: Type.Union([Type.Array(Type.String()), Type.Null()], {
    description: 'the key\'s scopes (of them, a request may use those its user still has); null: every scope of its user (a key registered before scopes)'
  })
})

export const ApiKeyList = PageOf(ApiKeyView, 'newest first')

export const ApiKeyParams = Type.Object({
  apiKey: Type.String()
})
