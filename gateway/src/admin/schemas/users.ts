// The admin API's user resource: what it takes and answers (TypeBox; the OpenAPI document is made from these).
import { Type, type Static } from '@sinclair/typebox'
import { ScopeList } from '../../http/schemas/api-keys.js'
import { PageOf } from '../../http/schemas/paging.js'
import { MAX_PASSWORD_LENGTH } from '../../users/user-service.js'

// The rules for names and passwords are the user service's (validateNewUser), applied there for
// the admin API and the operator CLI alike: not repeated here, where they would answer otherwise.
export const UserParams = Type.Object({
  name: Type.String({ description: '1-64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit' })
})
export type UserParams = Static<typeof UserParams>

/** PUT /v1/users/{name}: every field the operator sets on a user (more join it as users gain settings) */
export const UserPutBody = Type.Object({
  password: Type.Optional(Type.String({
    description: `8 to ${MAX_PASSWORD_LENGTH} characters; required for a new user, absent: an existing user keeps theirs`
  })),
  scopes: Type.Optional(ScopeList('the user\'s scopes, replacing theirs (every key of theirs keeps only those it has among these); ' +
      'absent: a new user has none, an existing one keeps theirs'))
}, { additionalProperties: false })
export type UserPutBody = Static<typeof UserPutBody>

export const UserSummary = Type.Object({
  username: Type.String(),
  createdAt: Type.String({ description: 'ISO 8601' }),
  updatedAt: Type.String({ description: 'ISO 8601: when the password was last set' }),
  activeKeys: Type.Integer({ description: 'keys neither revoked nor expired' }),
  keys: Type.Integer({ description: 'every key of the user, revoked and expired ones included' }),
  scopes: Type.Array(Type.String(), { description: 'what the user may do: each of their keys has some of these' })
})

export const UserList = PageOf(UserSummary, 'by name')

export const UserRemoval = Type.Object({
  username: Type.String(),
  revokedKeyCount: Type.Integer({ description: 'how many keys this removal revoked' }),
  revokedKeys: Type.Array(Type.String(), { description: 'their apiKeys (keys revoked before are not listed)' })
}, { description: 'The user is removed and its keys revoked: every gateway refuses them within a second' })
