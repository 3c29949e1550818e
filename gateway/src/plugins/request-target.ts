// CONTRACT.md: a request target with characters a URI may not carry unencoded is refused with 400
// before any other check, so the signed target can never run into the body or be read two ways.
// Stricter still, for the path-confusion cases a proxy must not forward differently than it verified:
// only origin-form ("/path?query"), no fragment, well-formed %XX, and no "." or ".." segment,
// plain or percent-encoded (a URL parser would fold them away after verification).
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { GatewayError } from '../errors.js'

// RFC 3986 pchar plus "/" and "?", and "%" checked below. Everything else is refused.
const ORIGIN_FORM = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*$/
const BAD_PERCENT = /%(?![0-9A-Fa-f]{2})/
/** methods that carry no body: refused with one here, and sent upstream without a Content-Length */
export const BODYLESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'TRACE'])

export function requestTargetProblem (target: string): string | undefined {
  if (!ORIGIN_FORM.test(target)) {
    return 'The request target must be "/path" or "/path?query" made of URI characters; percent-encode anything else (space, quotes, braces, non-ASCII, ...)'
  }
  if (BAD_PERCENT.test(target)) return 'The request target has a "%" not followed by two hex digits'
  const path = target.split('?', 1)[0] ?? ''
  let decoded: string
  try {
    decoded = decodeURIComponent(path)
  } catch {
    return 'The request path percent-encodes bytes that are not UTF-8 (e.g. an overlong sequence)'
  }
  // After decoding, so that "%2e%2e%2f" and "..%5c" count too: an upstream that decodes would see
  // them. ".." touching a slash is refused even inside a segment ("/a/..b"): the proxy library
  // refuses those too, and the refusal must come before authentication, not after it.
  const slashed = decoded.replaceAll('\\', '/')
  if (slashed.split('/').some((segment) => segment === '.') || slashed.includes('/..') || slashed.includes('../')) {
    return 'The request path has a "." or ".." segment, or ".." next to a "/" (plain or percent-encoded); send the normalised path'
  }
  return undefined
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
    const headers = request.headers
    if (BODYLESS_METHODS.has(request.method) && (headers['transfer-encoding'] !== undefined || (headers['content-length'] ?? '0') !== '0')) {
      done(new GatewayError('VALIDATION_FAILED', `A ${request.method} request carries no body`))
      return
    }
    done()
  })
}

export const requestTargetPlugin = fp(requestTarget, { name: 'keygate-request-target', fastify: '5.x', dependencies: ['keygate-problems'] })
