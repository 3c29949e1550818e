import { GatewayError } from '../errors.js'
import type { TokenService } from '../tokens/token-service.js'
import type { AuthStage } from './stage.js'

/** Authorization: Bearer <jwt> -> the user (the token's subject). */
export function bearerTokenStage (tokens: TokenService): AuthStage {
  return {
    name: 'bearer',
    needsBody: false,
    run (request, state) {
      const user = verifyBearer(tokens, request.headers.authorization)
      // a token this process has verified before: no promise
      if (typeof user === 'string') state.user = user
      else return user.then((subject) => { state.user = subject })
    }
  }
}

/** The token's subject: synchronous for a token verified before; throws MISSING_TOKEN at once. */
export function verifyBearer (tokens: TokenService, header: string | undefined): string | Promise<string> {
  // Parsed by hand: a regex with a lazy group over a 16 KiB header is a ReDoS.
  const scheme = header?.slice(0, 7).toLowerCase()
  const token = header !== undefined && (scheme === 'bearer ' || scheme === 'bearer\t') ? header.slice(7).trim() : ''
  if (token === '') {
    throw new GatewayError('MISSING_TOKEN', 'Send "Authorization: Bearer <token>" with a token from POST /v1/auth/token', {
      headers: { 'www-authenticate': 'Bearer realm="keygate"' }
    })
  }
  // Anything after "Bearer " is the token: a malformed one is INVALID_TOKEN, not a missing one.
  return tokens.verify(token)
}
