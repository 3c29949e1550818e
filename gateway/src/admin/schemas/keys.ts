// The admin API's key resource: what it takes and answers (TypeBox; the OpenAPI document is made from these).
import { Type, type Static } from '@sinclair/typebox'
import { ApiKeyView, ScopeList } from '../../http/schemas/api-keys.js'
import { PageOf, PageQuery } from '../../http/schemas/paging.js'

export const KeyParams = Type.Object({
  apiKey: Type.String({ description: 'the hex SHA-256 of the key\'s DER SubjectPublicKeyInfo (64 characters)' })
})
export type KeyParams = Static<typeof KeyParams>

export const KeyQuery = Type.Composite([Type.Object({
  user: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'only this user\'s keys' }))
}), PageQuery], { additionalProperties: false })
export type KeyQuery = Static<typeof KeyQuery>

/** A key as operators see it: its owner, and what the owner sees (GET /v1/api-keys). */
export const OperatorKey = Type.Composite([Type.Object({ owner: Type.String() }), ApiKeyView])

export const OperatorKeyDetail = Type.Composite([OperatorKey, Type.Object({
  publicKey: Type.Optional(Type.String({ description: 'PEM (SPKI); absent once the revoked key is a tombstone (`prunedAt`)' }))
})])

export const KeyList = PageOf(OperatorKey, 'newest first, revoked and expired ones included (not those past KEYGATE_REVOKED_KEY_RETENTION_DAYS)')

export const KeyRevocation = Type.Composite([OperatorKey, Type.Object({
  alreadyRevoked: Type.Boolean({ description: 'true: the key was revoked before this call, at `revokedAt`' })
})], { description: 'The key is revoked: every gateway on the store refuses it within a second' })

/** PATCH /v1/keys/{apiKey}: what changes; what is absent stays */
export const KeyPatchBody = Type.Object({
  scopes: Type.Optional(ScopeList('the key\'s scopes, replacing its own: some of its owner\'s (VALIDATION_FAILED names any other)')),
  expiresAt: Type.Optional(Type.Union([Type.String({ description: 'ISO 8601 with a time zone, in the future, within 5 years' }), Type.Null()], {
    description: 'when the key stops signing; null: it never expires'
  }))
}, { additionalProperties: false })
export type KeyPatchBody = Static<typeof KeyPatchBody>
