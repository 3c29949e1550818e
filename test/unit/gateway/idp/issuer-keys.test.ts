// An issuer's keys found by discovery: each way a discovery document can be wrong is refused with
// a message naming the URL and what was wrong, and a failed discovery answers the issuer's tokens
// 503 IDP_KEYS_UNAVAILABLE and is tried again no sooner than its interval (an injected fetch and
// clock: no network).
import t from 'tap'
import { createIssuerKeys, discoverJwksUri } from '../../../../gateway/src/idp/issuer-keys.js'
import { issuersFromDocument, type IssuerConfig } from '../../../../gateway/src/idp/issuers.js'

const [issuer] = issuersFromDocument({ issuers: [{ name: 'corp', issuer: 'https://login.example.com/realms/corp', audiences: ['keygate'] }] }, 'issuers.yaml') as [IssuerConfig]
const DISCOVERY = 'https://login.example.com/realms/corp/.well-known/openid-configuration'

/** A fetch that answers every request with `answer` and records the URLs asked for. */
function fetchAnswering (answer: () => Response | Promise<Response>): typeof globalThis.fetch & { urls: string[] } {
  const urls: string[] = []
  const fetched = (async (input: string | URL | Request) => {
    urls.push(String(input))
    return await answer()
  }) as typeof globalThis.fetch & { urls: string[] }
  fetched.urls = urls
  return fetched
}

const json = (body: unknown, init: ResponseInit = {}): Response => new Response(JSON.stringify(body), { status: 200, ...init })

t.test('a good document: its jwks_uri, fetched from <issuer>/.well-known/openid-configuration', async (t) => {
  const fetched = fetchAnswering(() => json({ issuer: issuer.issuer, jwks_uri: 'https://login.example.com/realms/corp/certs' }))
  t.equal(await discoverJwksUri(issuer, fetched), 'https://login.example.com/realms/corp/certs')
  t.same(fetched.urls, [DISCOVERY])
})

t.test('refused, each saying what was wrong at which URL', async (t) => {
  const cases: Array<[string, () => Response | Promise<Response>, RegExp]> = [
    ['another issuer', () => json({ issuer: 'https://evil.example.com', jwks_uri: 'https://evil.example.com/certs' }), /names the issuer "https:\/\/evil\.example\.com"/],
    ['a redirect', () => new Response(null, { status: 302, headers: { location: 'https://evil.example.com/' } }), /answered 302 \(a redirect: keygate follows none\)/],
    ['a 500', () => new Response('oops', { status: 500 }), /answered 500/],
    ['not JSON', () => new Response('<html>', { status: 200 }), /is not JSON/],
    ['no jwks_uri', () => json({ issuer: issuer.issuer }), /has no jwks_uri/],
    ['a jwks_uri over plain http elsewhere than loopback', () => json({ issuer: issuer.issuer, jwks_uri: 'http://10.0.0.1/certs' }), /its jwks_uri "http:\/\/10\.0\.0\.1\/certs" must be https/],
    ['too large', () => json({ issuer: issuer.issuer, pad: 'x'.repeat(70_000) }), /is over 65536 bytes/],
    ['too large, as its Content-Length says', () => new Response('{}', { status: 200, headers: { 'content-length': '70000' } }), /is 70000 bytes; at most 65536/],
    ['unreachable', () => { throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:443') }) }, /cannot be fetched \(connect ECONNREFUSED/]
  ]
  for (const [what, answer, message] of cases) {
    const expected = new RegExp(`^corp: discovery at ${DISCOVERY.replaceAll('.', '\\.')}: ${message.source}`)
    await t.rejects(discoverJwksUri(issuer, fetchAnswering(answer)), { message: expected }, what)
  }
})

t.test('a failed discovery: 503 IDP_KEYS_UNAVAILABLE, and no second try within 30 s', async (t) => {
  let now = 1_000_000
  const fetched = fetchAnswering(() => new Response('down', { status: 503 }))
  const outcomes: boolean[] = []
  const keys = createIssuerKeys(issuer, { fetch: fetched, now: () => now, onFetch: (_issuer, outcome) => { outcomes.push(outcome.ok) } })
  t.teardown(keys.close)
  await t.rejects(keys.start(), { code: 'IDP_KEYS_UNAVAILABLE', message: /answered 503/ })
  await t.rejects(keys.keyFor('k1', 'RS256'), { code: 'IDP_KEYS_UNAVAILABLE' }, 'the tokens meanwhile')
  t.equal(fetched.urls.length, 1, 'not fetched again within the interval')
  t.match(keys.state(), { usable: false, failures: 1, lastError: /answered 503/ })
  now += 30_000
  await t.rejects(keys.keyFor('k1', 'RS256'), { code: 'IDP_KEYS_UNAVAILABLE' })
  t.equal(fetched.urls.length, 2, 'tried again once the interval passed')
  t.same(outcomes, [false, false], 'each discovery reported')
})
