import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { markLoggedIn } from '../../auth/authenticate.js'
import { requestUri } from '../../auth/dpop.js'
import { describeInline } from '../../auth/inline-request.js'
import type { DpopVerifier } from '../../dpop/proof.js'
import { GatewayError, isGatewayError } from '../../errors.js'
import type { TokenService } from '../../tokens/token-service.js'
import type { LoginGuard } from '../../users/login-guard.js'
import { TokenRequest, TokenResponse } from '../schemas/token.js'

export interface TokenRoutesOptions {
  tokens: TokenService
  /** the login limits and the password check (users/login-guard.ts) */
  guard: LoginGuard
  /** DPoP proofs (RFC 9449): a login with one gets a token bound to its key; none: a login with a proof is refused */
  dpop?: DpopVerifier | undefined
}

/** RFC 9449 §5, §8: a token endpoint's DPoP errors are 400, with the OAuth `error` a client library acts on */
const TOKEN_ENDPOINT_ERRORS: Readonly<Record<string, string>> = { INVALID_DPOP_PROOF: 'invalid_dpop_proof', USE_DPOP_NONCE: 'use_dpop_nonce' }

/**
 * The thumbprint of the key a login's DPoP proof is signed by (htm POST, htu this endpoint as the
 * client addressed it, no ath, jti once), or undefined without a proof. A bad proof is 400
 * INVALID_DPOP_PROOF, a missing server nonce 400 USE_DPOP_NONCE with DPoP-Nonce: never a Bearer
 * token instead, which would be a downgrade the client did not ask for.
 */
async function loginBinding (request: FastifyRequest, dpop: DpopVerifier | undefined): Promise<string | undefined> {
  const proofs = request.raw.headersDistinct.dpop
  if (proofs === undefined) return undefined
  try {
    if (dpop === undefined) throw new GatewayError('INVALID_DPOP_PROOF', 'This endpoint does not take DPoP proofs here: log in without one')
    const proof = await dpop.verify({ method: request.method, uri: requestUri(describeInline(request)), proofs })
    return proof.thumbprint
  } catch (err) {
    const error = isGatewayError(err) ? TOKEN_ENDPOINT_ERRORS[err.code] : undefined
    if (error === undefined || !isGatewayError(err)) throw err
    throw new GatewayError(err.code, err.message, { status: 400, extra: { error }, ...(err.headers !== undefined && { headers: err.headers }), cause: err })
  }
}

/**
 * POST /v1/auth/token: username + password -> a bearer JWT, behind the login guard (failure
 * counts per username and per address, bounded concurrent password checks): 429 RATE_LIMITED.
 * With a DPoP proof, the token is bound to the proof's key (`cnf.jkt`, tokenType DPoP).
 */
export const tokenRoutes: FastifyPluginAsyncTypebox<TokenRoutesOptions> = async (app, { tokens, guard, dpop }) => {
  app.post('/v1/auth/token', {
    config: {
      authenticates: true,
      problems: ['VALIDATION_FAILED', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', ['INVALID_DPOP_PROOF', 400], ['USE_DPOP_NONCE', 400],
        'INVALID_CREDENTIALS', 'RATE_LIMITED', 'STORE_UNAVAILABLE']
    },
    schema: {
      summary: 'Log in: username and password for a token (bound to a DPoP key when the request carries a proof)',
      description: 'The same answer for an unknown user as for a wrong password. ' +
        'Failed logins are limited per username and per client address (429 with Retry-After). ' +
        'With a `DPoP` header (an RFC 9449 proof: htm POST, htu this endpoint\'s URL, no ath) the token carries `cnf.jkt`, the proof key\'s ' +
        'thumbprint, and `tokenType` is DPoP: every use of it needs a proof by that key. A bad proof: 400 INVALID_DPOP_PROOF ' +
        '(`error`: invalid_dpop_proof); with server nonces on, 400 USE_DPOP_NONCE (`error`: use_dpop_nonce) and the nonce in DPoP-Nonce.',
      tags: ['auth'],
      body: TokenRequest,
      response: { 200: TokenResponse }
    }
  }, async (request, reply) => {
    // the proof first: a login with a bad one spends no password check
    const boundKey = await loginBinding(request, dpop)
    // request.ip: the socket's peer, or behind a trusted proxy the client it reports
    // (http/plugins/client-address.ts); never an address a client chose by a header.
    const user = await guard.login(request.body.username, request.body.password, request.ip)
    markLoggedIn(request)
    reply.header('cache-control', 'no-store')
    // the incarnation and credential of the record whose password was just checked: a token
    // issued while the password changes is one issued before the change
    return await tokens.issue(user.username, user, boundKey)
  })
}
