// DPoP (RFC 9449) on routes that take tokens: a constraint on the principal the bearer stage
// found, not another identity. A token bound to a key (`cnf.jkt`, from any issuer) passes only
// with the DPoP scheme and a proof by that key for this very request (dpop/proof.ts); a route or
// resource with `dpop: required` takes no other token. No downgrade: a bound token sent as Bearer,
// or without its proof, is refused. A bearer token on a route that allows it costs one comparison.
import { pathOf } from '#client/protocol'
import type { DpopVerifier } from '../dpop/proof.js'
import { GatewayError } from '../errors.js'
import { isPlainAuthority } from '../lib/http-headers.js'
import { invalidTokenError } from '../tokens/token-service.js'
import type { ProtectedResource } from '../resources/resource.js'
import type { DescribedRequest } from './described-request.js'
import type { AuthStage } from './stage.js'

/**
 * The request's URI as its client addressed it: the scheme and host a trusted balancer forwarded
 * (inline) or the proxy described (decision), and the path. A Host that is not one host[:port]
 * gives no URI (every proof is then refused), so that `Host: good.example#` cannot turn a proof
 * made for another path into one for this request.
 */
export function requestUri (request: DescribedRequest): string {
  const authority = request.authority
  return isPlainAuthority(authority) ? `${request.scheme}://${authority}${pathOf(request.target)}` : ''
}

/** a resource's origin (scheme://host[:port]), read once per resource */
const ORIGINS = new WeakMap<ProtectedResource, string>()

/**
 * The URI a proof on a route of `resource` must name: the resource's own origin (its id's, which is
 * where its clients address it: the metadata says so) and the request's path, whatever Host the
 * request carries. Without it, a proof a client made for another server, replayed here with that
 * server's name in Host, would match. Routes without a resource take requestUri's.
 */
export function resourceRequestUri (resource: ProtectedResource, request: DescribedRequest): string {
  let origin = ORIGINS.get(resource)
  if (origin === undefined) {
    origin = new URL(resource.id).origin
    ORIGINS.set(resource, origin)
  }
  return `${origin}${pathOf(request.target)}`
}

/** Before the token is read: the verifier whose algorithms a refusal's DPoP challenge names (resources/challenge.ts). */
export function dpopOfferStage (verifier: DpopVerifier): AuthStage {
  return { name: 'dpop-offer', needsBody: false, run (_request, state) { state.dpop = verifier } }
}

/** After the bearer stage: the proof of a bound token (or of every token, where DPoP is required). */
export function dpopStage (verifier: DpopVerifier): AuthStage {
  return {
    name: 'dpop',
    needsBody: false,
    run (request, state) {
      const bound = state.bearer?.boundKey
      if (state.tokenScheme !== 'dpop') {
        // the hot path: a bearer token where bearer tokens are taken
        if (bound === undefined && state.dpopRequired !== true) return
        throw new GatewayError('DPOP_REQUIRED', bound !== undefined
          ? 'The token is DPoP-bound (its cnf.jkt): send it as "Authorization: DPoP <token>" with a DPoP proof signed by its key, never as Bearer'
          : 'This route takes DPoP-bound tokens only: get a token bound to your key (send a DPoP proof to the token endpoint) and send it as ' +
            '"Authorization: DPoP <token>" with a proof')
      }
      if (bound === undefined) {
        throw invalidTokenError('The token is not DPoP-bound (it has no cnf.jkt): send it as "Authorization: Bearer <token>", or get a bound one')
      }
      const header = request.headers.authorization ?? ''
      return verifier.verify({
        method: request.method,
        uri: state.resource !== undefined ? resourceRequestUri(state.resource, request) : requestUri(request),
        proofs: request.field('dpop'),
        accessToken: header.slice(5).trim(),
        boundKey: bound
      }).then((proof) => { state.dpopKey = proof.thumbprint })
    }
  }
}
