// The request-target rules (the protocol core's requestTargetProblem) enforced before any other
// check: a target the rules refuse is 400 INVALID_TARGET, a bodyless method with a body 400.
import { BODYLESS_METHODS, requestTargetProblem } from '#client/protocol'
import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { GatewayError } from '../../errors.js'

/** Whether a request announces body bytes: a Transfer-Encoding, or a Content-Length other than 0. */
export function declaresBody (headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] ?? '0') !== '0'
}

const requestTarget: FastifyPluginAsync = async (app) => {
  // Callback-style hooks here and in the other per-request plugins: every request runs them, and
  // an async hook costs a promise and a microtask each.
  app.addHook('onRequest', (request, _reply, done) => {
    const problem = requestTargetProblem(request.raw.url ?? '')
    if (problem !== undefined) {
      done(new GatewayError('INVALID_TARGET', problem))
      return
    }
    // GET, HEAD and TRACE carry no body (and Fastify would not read one): refused rather than
    // forwarded with unread bytes or answered as if the bytes were not there, on every path.
    if (BODYLESS_METHODS.has(request.method) && declaresBody(request.headers)) {
      done(new GatewayError('VALIDATION_FAILED', `A ${request.method} request carries no body`))
      return
    }
    done()
  })
}

export const requestTargetPlugin = fp(requestTarget, { name: 'keygate-request-target', fastify: '5.x', dependencies: ['keygate-problems'] })
