// Where each proxy puts the original request (gateway/src/decision/dialects.ts): what each
// dialect reads, which header wins, and the decision requests it refuses as ambiguous rather
// than guess. The real proxies' requests are in test/system/decision-*.test.ts.
import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { dialectOf, originalRequest, unknownBodyCounts, type Dialect } from '../../../../gateway/src/decision/dialects.js'
import { GatewayError } from '../../../../gateway/src/errors.js'

/** A decision request's headers as Node gives them: joined, and line by line. */
function raw (lines: Array<[string, string]>, method = 'GET', url = '/decide/test'): IncomingMessage {
  const distinct: Record<string, string[]> = {}
  for (const [name, value] of lines) (distinct[name.toLowerCase()] ??= []).push(value)
  const joined = Object.fromEntries(Object.entries(distinct).map(([name, values]) => [name, values.join(', ')]))
  return { method, url, headers: joined, headersDistinct: distinct } as unknown as IncomingMessage
}

function refusal (dialect: Dialect, lines: Array<[string, string]>): string {
  try {
    originalRequest(dialect, raw(lines))
  } catch (err) {
    if (err instanceof GatewayError && err.code === 'INVALID_DECISION_REQUEST') return err.message
    throw err
  }
  throw new Error('accepted')
}

const NGINX: Array<[string, string]> = [
  ['x-original-method', 'POST'], ['x-original-uri', '/v1/clients/?a=%2F+b'], ['x-forwarded-host', 'api.example.com:8443'],
  ['x-forwarded-proto', 'https'], ['x-original-content-length', '12'], ['host', 'keygate-decision']
]

t.test('nginx: method, target byte for byte, the host the client sent, and whether a body exists', async (t) => {
  t.same(originalRequest('nginx', raw(NGINX)), {
    method: 'POST', target: '/v1/clients/?a=%2F+b', scheme: 'https', authority: 'api.example.com:8443', declaresBody: true, declaredLength: 12, bodySent: false
  })
  const bodiless = originalRequest('nginx', raw([...NGINX.filter(([n]) => n !== 'x-original-content-length'), ['x-original-content-length', '0']]))
  t.equal(bodiless.declaresBody, false)
  const chunked = originalRequest('nginx', raw([...NGINX.filter(([n]) => n !== 'x-original-content-length'),
    ['x-original-content-length', '0'], ['x-original-transfer-encoding', 'chunked']]))
  t.equal(chunked.declaresBody, true, 'chunked: a body of unknown length')
  const noForwardedHost = originalRequest('nginx', raw(NGINX.filter(([n]) => n !== 'x-forwarded-host')))
  t.equal(noForwardedHost.authority, '', 'no X-Forwarded-Host (an HTTP/1.0 request without Host): no host, never the decision request\'s own')
  t.equal(originalRequest('nginx', raw(NGINX.filter(([n]) => n !== 'x-forwarded-proto'))).scheme, 'http')
})

t.test('nginx: refused as ambiguous or incomplete, never guessed', async (t) => {
  const without = (name: string) => NGINX.filter(([n]) => n !== name)
  t.match(refusal('nginx', without('x-original-uri')), /X-Original-URI is missing/)
  t.match(refusal('nginx', without('x-original-method')), /X-Original-Method is missing/)
  t.match(refusal('nginx', without('x-original-content-length')), /X-Original-Content-Length must be/)
  t.match(refusal('nginx', [...without('x-original-content-length'), ['x-original-content-length', '']]), /X-Original-Content-Length/)
  t.match(refusal('nginx', [...NGINX, ['x-original-uri', '/other']]), /X-Original-URI was sent 2 times/)
  t.match(refusal('nginx', [...without('x-forwarded-host'), ['x-forwarded-host', 'a.example, b.example']]), /holds a list/)
  t.match(refusal('nginx', [...without('x-original-uri'), ['x-original-uri', 'http://evil/v1/clients/']]), /starting with \//)
  t.match(refusal('nginx', [...without('x-original-method'), ['x-original-method', 'GET /x']]), /is not a method/)
  t.match(refusal('nginx', [...without('x-forwarded-proto'), ['x-forwarded-proto', 'gopher']]), /neither http nor https/)
  t.match(refusal('nginx', [...NGINX, ['content-length', '5']]), /sends keygate no body, and this decision request has one/)
  t.match(refusal('nginx', [...NGINX, ['transfer-encoding', 'chunked']]), /sends keygate no body/)
})

t.test('ingress-nginx: X-Original-URL, and X-Original-URI only when it names the same target', async (t) => {
  const lines: Array<[string, string]> = [['x-original-method', 'GET'], ['x-original-url', 'https://api.example.com/v1/clients/?q=1'], ['x-original-content-length', '0']]
  t.same(originalRequest('ingress-nginx', raw(lines)), {
    method: 'GET', target: '/v1/clients/?q=1', scheme: 'https', authority: 'api.example.com', declaresBody: false, declaredLength: undefined, bodySent: false
  })
  t.equal(originalRequest('ingress-nginx', raw([...lines, ['x-original-uri', '/v1/clients/?q=1']])).target, '/v1/clients/?q=1')
  t.match(refusal('ingress-nginx', [...lines, ['x-original-uri', '/v1/clients/?q=2']]), /name different targets/)
  t.match(refusal('ingress-nginx', lines.map(([n, v]) => [n, n === 'x-original-url' ? 'api.example.com/v1/' : v])), /is not scheme:\/\/host\/target/)
  t.match(refusal('ingress-nginx', lines.filter(([n]) => n !== 'x-original-content-length')), /X-Original-Content-Length/)
})

t.test('Caddy: X-Forwarded-*; no X-Original-Content-Length is a body that may or may not exist', async (t) => {
  const lines: Array<[string, string]> = [['x-forwarded-method', 'PUT'], ['x-forwarded-uri', '/v1/clients/7'], ['x-forwarded-host', 'api.example.com']]
  const unknown = originalRequest('caddy', raw(lines))
  t.equal(unknown.bodyUnknown, true)
  t.equal(unknown.declaresBody, false)
  const empty = originalRequest('caddy', raw([...lines, ['x-original-content-length', '']]))
  t.equal(empty.bodyUnknown, true, 'Caddy sends the placeholder empty when the client sent no Content-Length')
  const known = originalRequest('caddy', raw([...lines, ['x-original-content-length', '5']]))
  t.same([known.bodyUnknown, known.declaresBody, known.declaredLength], [false, true, 5])
  t.match(refusal('caddy', [...lines, ['x-original-content-length', '5, 6']]), /X-Original-Content-Length must be the original request's Content-Length/)
  t.match(refusal('caddy', [...lines, ['x-forwarded-uri', '/v1/clients/8']]), /sent 2 times/)
  t.match(refusal('caddy', [...lines, ['content-length', '3']]), /sends keygate no body/)
})

t.test('Traefik: a body sent is the body; none sent is unknown', async (t) => {
  const lines: Array<[string, string]> = [['x-forwarded-method', 'POST'], ['x-forwarded-uri', '/v1/clients/'], ['x-forwarded-host', 'api.example.com']]
  const withBody = originalRequest('traefik', raw([...lines, ['content-length', '14']], 'POST'))
  t.same([withBody.bodySent, withBody.declaresBody, withBody.declaredLength, withBody.bodyUnknown], [true, true, 14, false])
  const chunked = originalRequest('traefik', raw([...lines, ['transfer-encoding', 'chunked']], 'POST'))
  t.same([chunked.bodySent, chunked.declaresBody], [true, true], 'Traefik before v3.6.24 sends the body chunked')
  const none = originalRequest('traefik', raw(lines))
  t.same([none.bodySent, none.bodyUnknown], [false, true])
  const told = originalRequest('traefik', raw(lines, 'GET', '/decide/traefik?forwardBody=true'))
  t.same([told.bodySent, told.bodyUnknown, told.declaresBody], [false, false, false], 'forwardBody on, said in the address: no body is none')
  t.equal(originalRequest('traefik', raw(lines, 'GET', '/decide/traefik')).bodyUnknown, true, 'not said: unknown')
  t.equal(originalRequest('traefik', raw(lines, 'GET', '/decide/traefik?forwardBody=false')).bodyUnknown, true, 'said off: unknown')
})

t.test('Envoy: the decision request\'s own method, host and body; the path after the prefix', async (t) => {
  t.same(originalRequest('envoy', raw([['host', 'api.example.com'], ['content-length', '3'], ['x-forwarded-proto', 'https']], 'PATCH',
    '/decide/envoy/v1/clients/7?x=1')), {
    method: 'PATCH', target: '/v1/clients/7?x=1', scheme: 'https', authority: 'api.example.com', declaresBody: true, declaredLength: 3, bodySent: true
  })
  t.equal(originalRequest('envoy', raw([['host', 'a.test']], 'GET', '/decide/envoy')).target, '/', 'the prefix alone: the root')
  t.equal(originalRequest('envoy', raw([['host', 'a.test']], 'GET', '/decide/envoy?x=1')).target, '/?x=1', 'a query right after it: the root\'s')
  t.match(refusal('envoy', [['host', ''], ['content-length', '0']]), /Host is missing/)
})

t.test('the dialect of a decision request is its path; Envoy\'s a prefix', async (t) => {
  t.equal(dialectOf('/decide/nginx'), 'nginx')
  t.equal(dialectOf('/decide/caddy?'), 'caddy', 'Caddy may leave an empty query')
  t.equal(dialectOf('/decide/ingress-nginx'), 'ingress-nginx')
  t.equal(dialectOf('/decide/envoy/v1/clients/'), 'envoy')
  t.equal(dialectOf('/decide/envoy?x=1'), 'envoy')
  t.equal(dialectOf('/decide/envoyx/v1'), undefined)
  t.equal(dialectOf('/decide/nginx/extra'), undefined)
  t.equal(dialectOf('/decide/NGINX'), undefined)
  t.equal(dialectOf('/'), undefined)
})

t.test('a body the proxy cannot report counts where the request may carry one', async (t) => {
  for (const method of ['POST', 'PUT', 'PATCH']) t.equal(unknownBodyCounts(method, []), true, method)
  for (const method of ['GET', 'HEAD', 'DELETE', 'OPTIONS']) t.equal(unknownBodyCounts(method, []), false, method)
  t.equal(unknownBodyCounts('DELETE', ['DELETE']), true, 'a route that takes a body on DELETE')
})
