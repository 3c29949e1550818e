// The seed scheme's body rule: its signing string (timestamp + METHOD + target + body) has no
// separator, so a body whose first byte a target may hold could have been the target's end, and
// one signature would authorize several requests. The rule is the protocol core's (one place for
// the gateway and the client); here it runs first once the body is read, before the signature is
// verified, so such a request costs no verification and is not counted as a failed signature.
import { seedBodyProblem } from '#client/protocol'
import { GatewayError } from '../errors.js'
import { UNSEEN_BODY, unseenBodyError } from './described-request.js'
import type { AuthStage } from './stage.js'

/** 400 AMBIGUOUS_SIGNED_BODY for a seed-signed body that starts with a target byte, unless the route opted out. */
export function seedBodyStage (): AuthStage {
  return {
    name: 'seed-body',
    needsBody: true,
    run (request, state) {
      const body = request.body
      // a bodiless request (every signed GET) ends here, at the cost of one check
      if (body === undefined || body.length === 0) return
      // the seed scheme signs the body's bytes: a body keygate is not shown cannot be verified
      if (body === UNSEEN_BODY) throw unseenBodyError('the seed scheme signs the body\'s bytes, which keygate must see')
      if (state.seedBodyBoundary === 'unchecked') return
      const problem = seedBodyProblem(body)
      if (problem !== undefined) throw new GatewayError('AMBIGUOUS_SIGNED_BODY', problem)
    }
  }
}
