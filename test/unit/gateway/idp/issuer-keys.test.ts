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

t.test('a failed discovery: 503 IDP_KEYS_UNAVAILABLE at once meanwhile, with Retry-After; retried in the background every 30 s', async (t) => {
  let now = 1_000_000
  let answer = (): Response => new Response('down', { status: 503 })
  const fetched = fetchAnswering(() => answer())
  const outcomes: boolean[] = []
  const timers: Array<{ task: () => void, delayMs: number }> = []
  const keys = createIssuerKeys(issuer, {
    fetch: fetched,
    now: () => now,
    schedule: (task, delayMs) => { timers.push({ task, delayMs }); return () => undefined },
    onFetch: (_issuer, outcome) => { outcomes.push(outcome.ok) }
  })
  t.teardown(keys.close)
  await t.rejects(keys.start(), { code: 'IDP_KEYS_UNAVAILABLE', message: /answered 503/ })
  now += 10_000
  const err = await keys.keyFor('k1', 'RS256').then(() => undefined, (e: unknown) => e as { code?: string, headers?: Record<string, string> })
  t.match(err, { code: 'IDP_KEYS_UNAVAILABLE', headers: { 'retry-after': '20' } }, 'the tokens meanwhile: 503, Retry-After until the retry')
  t.equal(fetched.urls.length, 1, 'a request does not fetch')
  t.match(keys.state(), { usable: false, failures: 1, lastError: /answered 503/ })
  t.same(timers.map((timer) => timer.delayMs), [30_000], 'the retry, in 30 s')
  now += 20_000
  answer = () => json({ issuer: issuer.issuer, jwks_uri: 'https://login.example.com/realms/corp/certs' })
  const retried = new Promise<void>((resolve) => {
    const done = (): void => { if (outcomes.length >= 2) resolve(); else setImmediate(done) }
    done()
  })
  timers[0]?.task()
  await retried
  t.same(outcomes.slice(0, 2), [false, true], 'the background retry found the document')
  t.equal(fetched.urls[1], DISCOVERY)
})

t.test('discovery and the first fetch of the key set share one timeout: a request waits that long in all', async (t) => {
  // the fetches' time limits are unref'd timers (as a server's are): this holds the process meanwhile
  const alive = setInterval(() => undefined, 1000)
  t.teardown(() => { clearInterval(alive) })
  const hangs = (signal: AbortSignal | null | undefined): Promise<Response> => new Promise((_resolve, reject) => {
    signal?.addEventListener('abort', () => { reject(new DOMException('timed out', 'TimeoutError')) })
  })
  const slowDiscovery = (async (input: string | URL | Request, init?: RequestInit) => {
    if (String(input) === DISCOVERY) {
      await new Promise((resolve) => setTimeout(resolve, 1500))
      return json({ issuer: issuer.issuer, jwks_uri: 'https://login.example.com/realms/corp/certs' })
    }
    return await hangs(init?.signal)
  }) as typeof globalThis.fetch
  const keys = createIssuerKeys(issuer, { fetch: slowDiscovery, timeoutMs: 2000 })
  t.teardown(keys.close)
  const started = performance.now()
  const codeOf = async (): Promise<string | undefined> => await keys.keyFor('k1', 'RS256').then(() => 'resolved', (e: { code?: string }) => e.code)
  const codes = await Promise.all(Array.from({ length: 5 }, codeOf))
  const waited = performance.now() - started
  t.same([...new Set(codes)], ['IDP_KEYS_UNAVAILABLE'], 'the JWKS did not answer: 503')
  // 1.5 s of discovery, then the key set's fetch within the 0.5 s left: not 1.5 + 2 s
  t.ok(waited < 2900, `waited ${Math.round(waited)} ms, within the 2 s timeout (with a margin), not 3.5 s`)
})

t.test('keys.fetchTimeoutSeconds bounds discovery', async (t) => {
  const alive = setInterval(() => undefined, 1000)
  t.teardown(() => { clearInterval(alive) })
  const [quick] = issuersFromDocument({ issuers: [{ name: 'corp', issuer: issuer.issuer, audiences: ['keygate'], keys: { fetchTimeoutSeconds: 1 } }] },
    'issuers.yaml') as [IssuerConfig]
  const hanging = (async (_input: string | URL | Request, init?: RequestInit) => await new Promise<Response>((_resolve, reject) => {
    init?.signal?.addEventListener('abort', () => { reject(new DOMException('timed out', 'TimeoutError')) })
  })) as typeof globalThis.fetch
  await t.rejects(discoverJwksUri(quick, hanging), { message: /corp: discovery at .*: did not answer within 1000 ms/ })
})
