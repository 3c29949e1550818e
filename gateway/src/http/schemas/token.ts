import { Type, type Static } from '@sinclair/typebox'
import { MAX_PASSWORD_LENGTH } from '../../users/user-service.js'

export const TokenRequest = Type.Object({
  username: Type.String({ minLength: 1, maxLength: 256 }),
  password: Type.String({ minLength: 1, maxLength: MAX_PASSWORD_LENGTH })
}, { additionalProperties: false })
export type TokenRequest = Static<typeof TokenRequest>

export const TokenResponse = Type.Object({
  token: Type.String(),
  tokenType: Type.Union([Type.Literal('Bearer'), Type.Literal('DPoP')], {
    description: 'Bearer, for `Authorization: Bearer <token>`; DPoP when the login sent a DPoP proof: the token is bound to its key (`cnf.jkt`), ' +
      'and each use is `Authorization: DPoP <token>` with a new proof by that key'
  }),
  expiresIn: Type.Integer({ description: 'seconds until the token expires; it ends sooner when the user changes password or is removed' })
}, { description: 'A token: a bearer one, or one bound to the login\'s DPoP key (RFC 9449)' })
