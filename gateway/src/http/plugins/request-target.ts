// The request line and the request-target rules (the protocol core's requestTargetProblem)
// enforced before any other check: single spaces in the request line, HTTP/1.0 or HTTP/1.1 only,
// one Host (and one on HTTP/1.1), else 400 MALFORMED_HTTP; a target the rules refuse is 400
// INVALID_TARGET; a bodyless method with a body 400.
import type { IncomingMessage } from 'node:http'
import { bodylessMethodProblem, requestTargetProblem } from '#client/protocol'
import type { FastifyPluginAsync, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { headersDeclareBody } from '../../auth/described-request.js'
import { GatewayError } from '../../errors.js'
import { hasSpacedRequestLine } from '../../lib/request-line-tracker.js'

/**
 * What Node's parser lets through that keygate refuses, or undefined: a run of spaces between
 * the request line's parts (the listener's request-line tracker saw it; a proxy in front may read
 * such a line otherwise), an HTTP/0.9 request line (no version: it has no headers, so no
 * credentials, and would be forwarded as HTTP/1.1) or a version other than 1.0 and 1.1 (HTTP/2.0
 * in an HTTP/1 request line); no Host on HTTP/1.1, or two Host lines (RFC 9112 §3.2: a proxy in
 * front and keygate could each read another one).
 */
export function requestLineProblem (raw: IncomingMessage): string | undefined {
  if (hasSpacedRequestLine(raw)) {
    return 'The request line has more than one space between its parts; RFC 9112 §3 allows exactly one (METHOD SP target SP HTTP-version)'
  }
  if (raw.httpVersionMajor !== 1 || (raw.httpVersionMinor !== 1 && raw.httpVersionMinor !== 0)) {
    return raw.httpVersionMajor === 0
      ? 'The request line has no HTTP version (HTTP/0.9): keygate takes HTTP/1.1 and HTTP/1.0 only'
      : `HTTP/${raw.httpVersion} is not accepted: keygate takes HTTP/1.1 and HTTP/1.0 only`
  }
  let hosts = 0
  const raws = raw.rawHeaders
  for (let i = 0; i < raws.length; i += 2) {
    const name = raws[i] as string
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++
  }
  if (hosts > 1) return 'The request has more than one Host header; RFC 9112 allows exactly one'
  if (hosts === 0 && raw.httpVersionMinor === 1) return 'An HTTP/1.1 request must have a Host header (RFC 9112 §3.2)'
  return undefined
}

/** The request-line check alone, as a hook (the admin API's listener). */
export const refuseMalformedRequestLine: onRequestHookHandler = (request, _reply, done) => {
  const problem = requestLineProblem(request.raw)
  done(problem === undefined ? undefined : new GatewayError('MALFORMED_HTTP', problem))
}

/**
 * The refusal of a request (whichever mode described it) whose target the request-target rules
 * refuse (400 INVALID_TARGET), or that declares a body on a method that carries none (400
 * VALIDATION_FAILED); undefined when neither.
 */
export function targetRefusal (method: string, target: string, declaresBody: boolean): GatewayError | undefined {
  const problem = requestTargetProblem(target)
  if (problem !== undefined) return new GatewayError('INVALID_TARGET', problem)
  // (the problem's text is made only for a request that declares a body: a GET costs no string)
  const bodyless = declaresBody ? bodylessMethodProblem(method) : undefined
  return bodyless === undefined ? undefined : new GatewayError('VALIDATION_FAILED', bodyless)
}

const requestTarget: FastifyPluginAsync = async (app) => {
  // Callback-style hooks here and in the other per-request plugins: every request runs them, and
  // an async hook costs a promise and a microtask each.
  app.addHook('onRequest', (request, _reply, done) => {
    const lineProblem = requestLineProblem(request.raw)
    if (lineProblem !== undefined) {
      done(new GatewayError('MALFORMED_HTTP', lineProblem))
      return
    }
    // GET, HEAD and TRACE carry no body (and Fastify would not read one): refused rather than
    // forwarded with unread bytes or answered as if the bytes were not there, on every path.
    done(targetRefusal(request.method, request.raw.url ?? '', headersDeclareBody(request.headers)))
  })
}

export const requestTargetPlugin = fp(requestTarget, { name: 'keygate-request-target', fastify: '5.x', dependencies: ['keygate-problems'] })
