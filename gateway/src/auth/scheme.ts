// Which of the two signature schemes a request on a signed route uses, and the stages that run
// for one scheme only. The seed's X-API-* headers and their stages stay exactly as they were; a
// request carrying Signature-Input (RFC 9421) and no X-API-Signature takes the RFC 9421 stages,
// when the route takes them (its `signature` option: any, the default, seed or rfc9421).
import type { DescribedRequest } from './described-request.js'
import type { AuthStage, AuthState, SignatureScheme } from './stage.js'

/**
 * The scheme of a request: the route's, when it takes one only; else RFC 9421 when the request
 * carries Signature-Input and no X-API-Signature, the seed's otherwise. A request with both is
 * verified by the seed's scheme (its headers win, so a client of the seed's scheme is never
 * affected by an RFC 9421 signature a proxy on the way adds).
 */
export function schemeOf (request: DescribedRequest, state: AuthState): SignatureScheme {
  const policy = state.signaturePolicy ?? 'any'
  if (policy !== 'any') return policy
  return request.headers['signature-input'] !== undefined && request.headers['x-api-signature'] === undefined ? 'rfc9421' : 'seed'
}

/** Sets state.scheme: the first stage of a signed request's checks of who sent it. */
export function signatureSchemeStage (): AuthStage {
  return {
    name: 'signature-scheme',
    needsBody: false,
    run (request, state) {
      state.scheme = schemeOf(request, state)
    }
  }
}

/** One stage per scheme, in one place of the pipeline (both read the body, or neither). */
export function perScheme (stages: Readonly<Record<SignatureScheme, AuthStage>>): AuthStage {
  const { seed, rfc9421 } = stages
  if (seed.needsBody !== rfc9421.needsBody) throw new Error(`stages ${seed.name} and ${rfc9421.name} run in different phases`)
  return {
    name: seed.name === rfc9421.name ? seed.name : `${seed.name}|${rfc9421.name}`,
    needsBody: seed.needsBody,
    run: (request, state) => (state.scheme === 'rfc9421' ? rfc9421 : seed).run(request, state)
  }
}

/** A stage that runs for one scheme only. */
export function onlyFor (scheme: SignatureScheme, stage: AuthStage): AuthStage {
  return {
    name: stage.name,
    needsBody: stage.needsBody,
    run: (request, state) => (state.scheme ?? 'seed') === scheme ? stage.run(request, state) : undefined
  }
}
