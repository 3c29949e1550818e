import { Type, type Static } from '@sinclair/typebox'
import { MAX_PASSWORD_LENGTH } from '../../users/user-service.js'

export const TokenRequest = Type.Object({
  username: Type.String({ minLength: 1, maxLength: 256 }),
  password: Type.String({ minLength: 1, maxLength: MAX_PASSWORD_LENGTH })
}, { additionalProperties: false })
export type TokenRequest = Static<typeof TokenRequest>

export const TokenResponse = Type.Object({
  token: Type.String(),
  tokenType: Type.Literal('Bearer'),
  expiresIn: Type.Integer({ description: 'seconds until the token expires; it ends sooner when the user changes password or is removed' })
}, { description: 'A bearer token, for `Authorization: Bearer <token>`' })
