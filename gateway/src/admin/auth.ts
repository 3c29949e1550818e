// The admin API's one credential: `Authorization: Bearer <KEYGATE_ADMIN_TOKEN>` on every request,
// unknown paths and /docs/json included, checked before anything else (no body is read for a
// caller without it). The comparison takes the same time whatever the token sent: both sides are
// hashed to 32 bytes first, so neither their length nor a shared prefix shows in the timing.
// A refusal is logged with the caller's address and the reason, never with what was sent (a token
// in the query string included: the URL is logged redacted).
import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import { GatewayError } from '../errors.js'
import { redactUrl } from '../lib/redact-url.js'

export const ADMIN_REALM = 'keygate-admin'

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest()

/** `Bearer <token>`, the scheme in any case (RFC 9110), one space or more; undefined when absent or another scheme */
function bearerOf (header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header)
  return match?.[1]
}

/** The onRequest hook that refuses every request without the admin token: 401 MISSING_TOKEN or INVALID_TOKEN. */
export function adminTokenCheck (token: string): onRequestHookHandler {
  const expected = digest(token)
  return async function checkAdminToken (request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const sent = bearerOf(request.headers.authorization)
    const missing = sent === undefined
    // always one comparison, so an absent token and a wrong one cost the same
    const matches = timingSafeEqual(digest(sent ?? ''), expected) && !missing
    if (matches) return
    request.log.warn({ admin: { refused: missing ? 'MISSING_TOKEN' : 'INVALID_TOKEN', ip: request.ip, method: request.method, url: redactUrl(request.url) } },
      'admin API: request refused without a valid admin token')
    throw missing
      ? new GatewayError('MISSING_TOKEN', 'The admin API needs "Authorization: Bearer <KEYGATE_ADMIN_TOKEN>"', {
        headers: { 'www-authenticate': `Bearer realm="${ADMIN_REALM}"` }
      })
      : new GatewayError('INVALID_TOKEN', 'The bearer token is not this gateway\'s KEYGATE_ADMIN_TOKEN', {
        headers: { 'www-authenticate': `Bearer realm="${ADMIN_REALM}", error="invalid_token"` }
      })
  }
}
