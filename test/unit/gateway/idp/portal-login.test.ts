// The portal's login through an IdP (idp/portal-login.ts) against a scripted IdP: discovery and
// token endpoint answered by a fake fetch, ID and access tokens forged with keys the test holds. A
// good login gives the page its token once; each forged or broken answer (another nonce, an ID
// token for another client or signed by another key, at_hash or azp wrong, an access token keygate
// would not accept or an opaque one, a mixed-up iss, a redirect or an oversized answer from the
// token endpoint) leaves a problem for the page instead, with its code and a detail that says why.
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { SignJWT, type JWTPayload } from 'jose'
import t, { type Test } from 'tap'
import { createIdpVerifier, type KeySource } from '../../../../gateway/src/idp/idp-tokens.js'
import { issuersFromDocument, type IssuerConfig } from '../../../../gateway/src/idp/issuers.js'
import { createPortalLogin } from '../../../../gateway/src/idp/portal-login.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'

const ISSUER = 'https://login.example.com'
const [corp] = issuersFromDocument({
  issuers: [{
    name: 'corp',
    issuer: ISSUER,
    audiences: ['https://api.example.com'],
    portalLogin: { clientId: 'portal', clientSecretEnv: 'PORTAL_SECRET', authorizationParams: { resource: 'https://api.example.com', prompt: 'login' } }
  }]
}, 'issuers.yaml', { PORTAL_SECRET: 'se:cret' }) as [IssuerConfig]

const key = generateKeyPairSync('rsa', { modulusLength: 2048 })
const attacker = generateKeyPairSync('rsa', { modulusLength: 2048 })
const keysOf = (): KeySource => ({ async keyFor (kid) { if (kid !== 'k1') throw new Error(`no key ${String(kid)}`); return key.publicKey } })
const nowS = (): number => Math.floor(Date.now() / 1000)

const sign = async (claims: JWTPayload, options: { key?: KeyObject, typ?: string } = {}): Promise<string> =>
  await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'k1', ...(options.typ !== undefined && { typ: options.typ }) })
    .sign(options.key ?? key.privateKey)
const atHash = (token: string): string => createHash('sha256').update(token).digest().subarray(0, 16).toString('base64url')

interface Script {
  /** the token endpoint's answer; default: a good one for the login's nonce */
  token?: (nonce: string, body: URLSearchParams) => Promise<Response>
  discovery?: Record<string, unknown>
}

async function setup (t: Test, script: Script = {}) {
  const store = createMemoryStore()
  t.teardown(async () => { await store.close() })
  const calls: Array<{ url: string, init: RequestInit | undefined }> = []
  let nonce = ''
  const fetchImpl = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = String(input)
    calls.push({ url, init })
    if (url === `${ISSUER}/.well-known/openid-configuration`) {
      return Response.json({
        issuer: ISSUER,
        jwks_uri: `${ISSUER}/jwks`,
        authorization_endpoint: `${ISSUER}/authorize`,
        token_endpoint: `${ISSUER}/token`,
        authorization_response_iss_parameter_supported: true,
        ...script.discovery
      })
    }
    if (url === `${ISSUER}/token`) {
      const body = new URLSearchParams(String(init?.body))
      if (script.token !== undefined) return await script.token(nonce, body)
      return Response.json(await goodTokens(nonce, 'alice'))
    }
    throw new Error(`unexpected fetch ${url}`)
  }) as typeof globalThis.fetch
  const errors: unknown[] = []
  const login = createPortalLogin({
    issuers: [corp], store, keysOf, verifier: createIdpVerifier([corp], keysOf), fetch: fetchImpl, onError: (err) => { errors.push(err) }
  })
  /** start, then the callback for `query` (default: a code and the state, iss) with the right cookie; the page's redeem */
  const run = async (
    query: (state: string) => Record<string, unknown> = (state) => ({ state, code: 'the-code', iss: ISSUER }), cookie?: string, then = '#/keys/new'
  ) => {
    const started = await login.start('corp', { redirectUri: 'https://keygate.example.com/portal/oidc/callback', then })
    const url = new URL(started.location)
    nonce = url.searchParams.get('nonce') ?? ''
    const handoff = await login.callback(query(url.searchParams.get('state') ?? ''), cookie ?? started.binding)
    return { url, started, handoff, redeem: async () => await login.redeem(handoff, started.binding) }
  }
  return { login, run, calls, store, errors }
}

async function goodTokens (nonce: string, sub: string, overrides: { id?: JWTPayload, access?: JWTPayload } = {}): Promise<Record<string, unknown>> {
  const accessToken = await sign({ iss: ISSUER, aud: 'https://api.example.com', sub, exp: nowS() + 300, iat: nowS(), ...overrides.access }, { typ: 'at+jwt' })
  const idToken = await sign({ iss: ISSUER, aud: 'portal', sub, nonce, exp: nowS() + 300, iat: nowS(), at_hash: atHash(accessToken), ...overrides.id })
  return { access_token: accessToken, id_token: idToken, token_type: 'Bearer', expires_in: 300 }
}

t.test('a good login: the authorization request, the token request, the token handed over once', async (t) => {
  const { run, calls, login } = await setup(t)
  const { url, started, redeem, handoff } = await run()
  t.equal(`${url.origin}${url.pathname}`, `${ISSUER}/authorize`)
  t.match(Object.fromEntries(url.searchParams), {
    response_type: 'code', client_id: 'portal', scope: 'openid', code_challenge_method: 'S256', resource: 'https://api.example.com', prompt: 'login'
  })
  const token = calls.find((c) => c.url === `${ISSUER}/token`)
  t.equal(token?.init?.redirect, 'manual', 'the token endpoint: no redirect followed')
  t.equal((token?.init?.headers as Record<string, string>).authorization, `Basic ${Buffer.from('portal:se%3Acret').toString('base64')}`,
    'client_secret_basic, each part form-encoded')
  const body = new URLSearchParams(String(token?.init?.body))
  t.equal(body.get('grant_type'), 'authorization_code')
  t.equal(body.get('redirect_uri'), started.redirectUri)
  const challenge = createHash('sha256').update(body.get('code_verifier') ?? '').digest('base64url')
  t.equal(challenge, url.searchParams.get('code_challenge'), 'the verifier of the challenge')
  t.equal(body.get('resource'), 'https://api.example.com', 'resource, on the token request too')
  t.equal(body.get('client_id'), null, 'a confidential client authenticates by its header')
  const session = await redeem()
  t.match(session, { username: 'corp:alice', then: '#/keys/new' })
  await t.rejects(login.redeem(handoff, started.binding), { code: 'LOGIN_STATE_INVALID' }, 'taken once')
  t.same(login.providers(), [{ name: 'corp', label: 'corp' }])
})

t.test('forged or broken answers: a problem for the page, each naming what was wrong', async (t) => {
  const cases: Array<[string, Script['token'] | undefined, ((state: string) => Record<string, unknown>) | undefined, string, RegExp]> = [
    ['another nonce', async (_n) => Response.json(await goodTokens('not-this-login', 'alice')), undefined, 'IDP_LOGIN_FAILED', /another nonce/],
    ['an ID token signed by another key', async (n) => {
      const good = await goodTokens(n, 'alice')
      const forged = await sign({ iss: ISSUER, aud: 'portal', sub: 'alice', nonce: n, exp: nowS() + 300, iat: nowS() }, { key: attacker.privateKey })
      return Response.json({ ...good, id_token: forged })
    }, undefined, 'IDP_LOGIN_FAILED', /ID token does not verify with the issuer's published key/],
    ['an ID token for another client', async (n) => Response.json(await goodTokens(n, 'alice', { id: { aud: 'other-client' } })),
      undefined, 'IDP_LOGIN_FAILED', /is not for keygate's portal/],
    ['an expired ID token', async (n) => Response.json(await goodTokens(n, 'alice', { id: { exp: nowS() - 3600 } })), undefined, 'IDP_LOGIN_FAILED', /has expired/],
    ['a wrong at_hash', async (n) => Response.json(await goodTokens(n, 'alice', { id: { at_hash: 'AAAAAAAAAAAAAAAAAAAAAA' } })), undefined, 'IDP_LOGIN_FAILED', /at_hash/],
    ['another azp', async (n) => Response.json(await goodTokens(n, 'alice', { id: { azp: 'other' } })), undefined, 'IDP_LOGIN_FAILED', /azp/],
    ['an access token for another audience', async (n) => Response.json(await goodTokens(n, 'alice', { access: { aud: 'https://elsewhere' } })),
      undefined, 'IDP_LOGIN_FAILED', /access token is not one keygate accepts: .*audience/],
    ['an opaque access token', async (n) => Response.json({ ...await goodTokens(n, 'alice', { id: { at_hash: undefined } }), access_token: 'opaque-123' }),
      undefined, 'IDP_LOGIN_FAILED', /not a JWT it issued \(an opaque token\?\)/],
    ['two subjects', async (n) => {
      const tokens = await goodTokens(n, 'alice')
      const bob = await goodTokens(n, 'bob')
      const idToken = await sign({ iss: ISSUER, aud: 'portal', sub: 'alice', nonce: n, exp: nowS() + 300, iat: nowS() })
      return Response.json({ ...tokens, access_token: bob.access_token, id_token: idToken })
    }, undefined, 'IDP_LOGIN_FAILED', /different subjects/],
    ['the token endpoint refusing the code', async () => Response.json({ error: 'invalid_grant', error_description: 'code expired' }, { status: 400 }),
      undefined, 'IDP_LOGIN_FAILED', /refused the code: invalid_grant: code expired/],
    ['a redirect from the token endpoint', async () => new Response(null, { status: 302, headers: { location: 'https://evil.example' } }),
      undefined, 'IDP_LOGIN_FAILED', /a redirect: keygate follows none/],
    ['an oversized answer', async () => new Response('x'.repeat(70 * 1024)), undefined, 'IDP_LOGIN_FAILED', /over 65536 bytes/],
    ['a mixed-up issuer (RFC 9207)', undefined, (state) => ({ state, code: 'c', iss: 'https://evil.example' }), 'IDP_LOGIN_FAILED', /names the issuer "https:\/\/evil/],
    ['no iss, from an IdP that says it always sends it', undefined, (state) => ({ state, code: 'c' }), 'IDP_LOGIN_FAILED', /does not name its issuer/],
    ['the IdP\'s error', undefined, (state) => ({ state, error: 'access_denied', error_description: 'no', iss: ISSUER }),
      'IDP_LOGIN_FAILED', /corp answered access_denied: no/],
    ['an IdP error whose description holds a control character: not repeated', undefined,
      (state) => ({ state, error: 'access_denied', error_description: 'a\nfake line', iss: ISSUER }), 'IDP_LOGIN_FAILED', /^corp answered access_denied$/],
    ['a state keygate never made', undefined, () => ({ state: 'B'.repeat(43), code: 'c', iss: ISSUER }), 'LOGIN_STATE_INVALID', /unknown, already completed/],
    ['a repeated state parameter', undefined, (state) => ({ state: [state, state], code: 'c' }), 'LOGIN_STATE_INVALID', /no state keygate made/]
  ]
  for (const [what, token, query, code, detail] of cases) {
    const { run, login } = await setup(t, token === undefined ? {} : { token })
    const { handoff, started } = await run(query)
    await t.rejects(login.redeem(handoff, started.binding), { code, message: detail }, what)
  }
  const logged = await setup(t, { token: async () => new Response(null, { status: 302, headers: { location: 'https://evil.example' } }) })
  await logged.run()
  t.match(logged.errors, [{ code: 'IDP_LOGIN_FAILED', statusCode: 502 }], 'a failure on the IdP\'s side reaches the operator\'s log')
  const refused = await setup(t)
  await refused.run((state) => ({ state, error: 'access_denied', iss: ISSUER }))
  t.same(refused.errors, [], 'a user\'s refusal does not')

  const { run, login } = await setup(t)
  const { handoff, started } = await run(undefined, 'C'.repeat(43))
  await t.rejects(login.redeem(handoff, started.binding), { code: 'LOGIN_STATE_INVALID', message: /did not begin this login/ }, 'another browser\'s cookie')
})

t.test('discovery: the login\'s endpoints must be URLs keygate uses; then what start refuses', async (t) => {
  const { login } = await setup(t, { discovery: { token_endpoint: 'http://login.example.com/token' } })
  await t.rejects(login.start('corp', { redirectUri: 'https://k.example/portal/oidc/callback', then: undefined }),
    { code: 'IDP_LOGIN_FAILED', statusCode: 502, message: /token_endpoint "http:\/\/login\.example\.com\/token" must be https/ })
  const s256 = await setup(t, { discovery: { code_challenge_methods_supported: ['plain'] } })
  await t.rejects(s256.login.start('corp', { redirectUri: 'https://k.example/cb', then: undefined }), { code: 'IDP_LOGIN_FAILED', message: /lacks S256/ })
  const ok = await setup(t)
  await t.rejects(ok.login.start('nobody', { redirectUri: 'https://k.example/cb', then: undefined }), { code: 'NOT_FOUND' })
  for (const then of ['https://evil.example/', '//evil.example', '#/login?handoff=x', 'javascript:alert(1)', '#/keys"><script>']) {
    const { run } = await setup(t)
    t.equal((await (await run(undefined, undefined, then)).redeem()).then, '#/keys', `then ${JSON.stringify(then)}: not a view of the page, so #/keys`)
  }
})
