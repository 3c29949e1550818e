// What a decision-mode proxy hands the upstream, against what keygate inline hands it for the same
// request (decision-nginx and decision-caddy tests): the header names a recorder received.
import type { Test } from 'tap'
import { send } from './http.js'
import type { Recorder, RecordedRequest } from './recorder.js'

/**
 * Headers a client adds to a signed request that inline mode never forwards (docs/routes.md, "What
 * the upstream receives"), each spelt as a client might, beside two it forwards as sent.
 */
export const HOSTILE_EXTRAS: Readonly<Record<string, string>> = {
  accept: 'application/json',
  'x-custom': 'kept',
  'X-Gateway-User': 'mallory',
  'x-gateway-scopes': 'admin',
  'X-Gateway-Agent': 'https://forged.example',
  'X-Keygate-Identity': 'forged.jwt.token',
  'x-keygate-content-digest': 'sha-256=:forged:',
  'X-Keygate-Status': '200',
  'x-keygate-problem': '{}',
  RateLimit: '"forged";r=9;t=1',
  'RateLimit-Policy': '"forged";q=9;w=1',
  'X-HTTP-Method-Override': 'DELETE',
  'x-http-method': 'DELETE',
  'x-method-override': 'DELETE',
  'x-original-url': '/admin',
  'x-rewrite-url': '/admin',
  Forwarded: 'for=192.0.2.66;host=evil.example',
  'X-Forwarded-Host': 'evil.example',
  'X-Forwarded-Proto': 'https',
  'X-Forwarded-For': '192.0.2.66',
  'X-Real-IP': '192.0.2.66'
}

/** Of the connection, not the request: undici (keygate inline) sends `connection: keep-alive`, a proxy its own or none. */
export const CONNECTION_HEADERS: readonly string[] = ['connection', 'keep-alive']

/** The header names (lower case, sorted, each once) the upstream received, but those of the connection and `except`. */
export function headerNames (request: RecordedRequest | undefined, except: readonly string[] = []): string[] {
  if (request === undefined) return []
  const names = request.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase())
  return [...new Set(names)].filter((name) => !CONNECTION_HEADERS.includes(name) && !except.includes(name)).sort()
}

/** The values of `names` the upstream received that a client sent in HOSTILE_EXTRAS (forged values that got through). */
export function forgedValues (request: RecordedRequest | undefined): string[] {
  const forged = new Set(Object.values(HOSTILE_EXTRAS).filter((value) => value !== 'application/json' && value !== 'kept'))
  const values = request?.rawHeaders.filter((_, i) => i % 2 === 1) ?? []
  return values.filter((value) => forged.has(value))
}

/**
 * keygate's own API and portal through a proxy configured as its page says (the portal, a refused
 * login): keygate's public port answers, and nothing of it reaches the application.
 */
export async function ownApiThroughProxy (t: Test, proxyUrl: string, application: Recorder): Promise<void> {
  const portal = await send(proxyUrl, '/portal/')
  t.equal(portal.status, 200)
  t.match(portal.headers['content-security-policy'], /default-src 'none'/, 'keygate\'s portal')
  const wrong = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":"alice","password":"wrong"}' }
  const refused = await send(proxyUrl, '/v1/auth/token', wrong)
  t.equal(refused.status, 401, 'a wrong password: keygate\'s own 401, not a decision\'s')
  t.equal(refused.json<{ code: string }>().code, 'INVALID_CREDENTIALS')
  const own = (url: string): boolean => ['/v1/auth/', '/v1/api-keys', '/portal/'].some((prefix) => url.startsWith(prefix))
  t.notOk(application.requests.some((r) => own(r.url)), 'none reached the application')
}
