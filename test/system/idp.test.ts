// An identity provider's tokens at a running keygate (on Redis, in front of a recording upstream),
// with a real OpenID Provider (oidc-provider, test/helpers/oidc-provider.ts) as the IdP, found by
// discovery: a client-credentials token on a bearer route; an authorization-code token's user
// registering a key and signing; the user made on first use, namespaced by issuer, with its
// token's scopes mapped; hostile tokens refused with nothing forwarded; the IdP's key rotation;
// an outage (cached keys serve up to the bound, then 503, then recovery); 1,000 made-up kids and
// the bounded fetches they cause; a user removed in keygate; and the same token through the
// decision listener.
import { createSecretKey, generateKeyPairSync } from 'node:crypto'
import { SignJWT } from 'jose'
import t from 'tap'
import { signRequest } from '../../client/src/index.js'
import { admin, startAdminGateway } from '../helpers/admin.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { startTestIdp } from '../helpers/oidc-provider.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile, routesFromYaml } from '../helpers/routes.js'
import { registerKey, startTestGateway } from '../helpers/stack.js'

const ROUTES = `routes:
  - name: reports
    prefix: /v1/reports/
    upstream: UPSTREAM
    auth: bearer
    scopes: [reports:read]
  - name: clients
    prefix: /v1/clients/
    upstream: UPSTREAM
    auth: signed
`

t.test('an identity provider\'s tokens, from a real OpenID Provider', async (t) => {
  const idp = await startTestIdp(t)
  const upstream = await startRecorder(t)
  const issuers = routeFile(t, `issuers:
  - name: corp
    issuer: ${idp.issuer}
    audiences: [${idp.audience}]
    accessTokenType: at+jwt
    scopes:
      map: { "api:read": reports:read, "api:write": [reports:read, reports:write] }
    keys: { maxStaleSeconds: 3, unknownKidIntervalSeconds: 30, minRefreshSeconds: 1 }
`, 'issuers.yaml')
  const gw = await startTestGateway(t, {
    store: 'redis',
    upstreamUrl: upstream.url,
    routes: (url) => routesFromYaml(ROUTES, url),
    config: { identityProviders: { file: issuers.path, oidc: undefined }, decision: { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1'] } }
  })
  const reached = (target: string): number => upstream.requests.filter((r) => r.url === target).length
  const bearer = async (token: string, target: string) => await send(gw.url, target, { headers: { authorization: `Bearer ${token}` } })

  t.test('found by discovery; /readyz says the keys are usable', async (t) => {
    t.equal(idp.discoveryRequests, 1, 'the discovery document, once')
    t.ok(idp.jwksRequests >= 1, 'the key set, fetched at start')
    t.equal((await send(gw.url, '/readyz')).status, 200)
    const metrics = await gw.app.keygate.metrics.scrape()
    t.match(metrics.body, /keygate_idp_keys_usable\{issuer="corp"\} 1/)
    t.match(metrics.body, /keygate_idp_key_fetches_total\{issuer="corp",what="jwks",outcome="ok"\} [1-9]/)
  })

  t.test('a client-credentials token on a bearer route: its client as the user, its scopes mapped', async (t) => {
    const token = await idp.clientCredentialsToken(['api:read'])
    const res = await bearer(token, '/v1/reports/?cc=1')
    t.equal(res.status, 200, res.text)
    const got = upstream.requests.find((r) => r.url === '/v1/reports/?cc=1')
    t.equal(got?.headers['x-gateway-user'], 'corp:keygate-service', 'the issuer\'s name and the subject')
    t.equal(got?.headers['x-gateway-scopes'], 'reports:read', 'api:read mapped')
    t.equal(got?.headers.authorization, undefined, 'the token stays at keygate')
    // an operator's grant in keygate adds to the token's scopes
    t.ok(await gw.app.keygate.users.setScopes('corp:keygate-service', ['reports:export']), 'an IdP user\'s scopes set like any user\'s')
    t.equal((await bearer(token, '/v1/reports/?cc=3')).status, 200)
    const granted = upstream.requests.find((r) => r.url === '/v1/reports/?cc=3')
    t.equal(granted?.headers['x-gateway-scopes'], 'reports:export reports:read', 'the token\'s and the grant')
    t.same((await gw.app.keygate.users.list()).map((u) => u.username).filter((name) => name.startsWith('corp:')), ['corp:keygate-service'], 'listed')
    await gw.app.keygate.users.setScopes('corp:keygate-service', [])
    const none = await bearer(await idp.clientCredentialsToken([]), '/v1/reports/?cc=2')
    t.equal(none.status, 403, 'without the scope: 403')
    t.equal(none.json<{ code: string }>().code, 'INSUFFICIENT_SCOPE')
    t.equal(reached('/v1/reports/?cc=2'), 0)
  })

  t.test('an authorization-code token\'s user registers a key and signs; the user was made on first use', async (t) => {
    const { accessToken } = await idp.authorizationCodeToken('alice', ['api:write'])
    t.equal(await gw.app.keygate.users.get('corp:alice'), null, 'not yet a keygate user')
    const pair = rsaKeyPair()
    const registered = await registerKey(gw.url, accessToken, pair, 'alice laptop')
    t.equal(registered.status, 201, registered.text)
    const user = await gw.app.keygate.users.get('corp:alice')
    t.ok(user, 'made on first use')
    t.equal(user?.passwordHash, 'idp', 'with no password')
    const body = JSON.stringify({ username: 'corp:alice', password: 'idp' })
    const login = await send(gw.url, '/v1/auth/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    t.equal(login.status, 401, 'it can never log in with a password')
    const target = '/v1/clients/?idp=1'
    const headers = await signRequest({ method: 'GET', target, apiKey: pair.apiKey, privateKey: pair.privateKey })
    const res = await send(gw.url, target, { headers: { ...headers, authorization: `Bearer ${accessToken}` } })
    t.equal(res.status, 200, res.text)
    const got = upstream.requests.find((r) => r.url === target)
    t.equal(got?.headers['x-gateway-user'], 'corp:alice')
    t.equal(got?.headers['x-gateway-key'], pair.apiKey)
    t.equal(got?.headers['x-gateway-scopes'], 'reports:read reports:write')
    // another user's token with alice's key: the key is not theirs
    const other = await idp.authorizationCodeToken('bob', ['api:read'])
    const signed = await signRequest({ method: 'GET', target: '/v1/clients/?idp=2', apiKey: pair.apiKey, privateKey: pair.privateKey })
    const mismatch = await send(gw.url, '/v1/clients/?idp=2', { headers: { ...signed, authorization: `Bearer ${other.accessToken}` } })
    t.equal(mismatch.status, 403)
    t.equal(mismatch.json<{ code: string }>().code, 'KEY_OWNER_MISMATCH')

    t.test('removed in keygate: its keys revoked, its tokens refused; a token issued later makes it again, without keys', async (t) => {
      await gw.app.keygate.users.remove('corp:alice')
      const refused = await bearer(accessToken, '/v1/reports/?removed=1')
      t.equal(refused.status, 401)
      t.match(refused.json<{ code: string, detail: string }>(), { code: 'INVALID_TOKEN', detail: /was removed in keygate after this token was issued/ })
      t.equal(reached('/v1/reports/?removed=1'), 0)
      await new Promise((resolve) => setTimeout(resolve, 1100)) // a later second: the next token's iat
      const later = await idp.authorizationCodeToken('alice', ['api:read'])
      t.equal((await bearer(later.accessToken, '/v1/reports/?removed=2')).status, 200, 'made again')
      const keys = await gw.app.keygate.keys.list('corp:alice')
      t.same(keys.items.filter((key) => key.status === 'active'), [], 'without keys')
    })
  })

  t.test('hostile tokens: refused, nothing forwarded', async (t) => {
    const good = await idp.clientCredentialsToken(['api:read'])
    const [head, body] = good.split('.') as [string, string]
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>
    const header = JSON.parse(Buffer.from(head, 'base64url').toString()) as { alg: string, kid: string, typ: string }
    const b64 = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url')
    const jwks = await (await fetch(idp.jwksUri)).text()
    const attacker = generateKeyPairSync('rsa', { modulusLength: 2048 })
    const cases: Array<[string, string, number, string]> = [
      ['alg none', `${b64({ ...header, alg: 'none' })}.${body}.`, 401, 'INVALID_TOKEN'],
      ['HS256 keyed with the IdP\'s published JWKS',
        await new SignJWT(claims).setProtectedHeader({ ...header, alg: 'HS256' }).sign(createSecretKey(Buffer.from(jwks))), 401, 'INVALID_TOKEN'],
      ['a made-up kid',
        await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'made-up', typ: 'at+jwt' }).sign(attacker.privateKey), 401, 'UNKNOWN_SIGNING_KEY'],
      ['the IdP\'s kid, the attacker\'s key', await new SignJWT(claims).setProtectedHeader({ ...header }).sign(attacker.privateKey), 401, 'INVALID_TOKEN'],
      ['another audience', `${head}.${b64({ ...claims, aud: 'someone-else' })}.${good.split('.')[2] ?? ''}`, 401, 'INVALID_TOKEN'],
      ['expired, re-signed by the attacker',
        await new SignJWT({ ...claims, exp: 1000 }).setProtectedHeader({ ...header }).sign(attacker.privateKey), 401, 'INVALID_TOKEN'],
      ['not an access token (typ JWT)', await new SignJWT(claims).setProtectedHeader({ ...header, typ: 'JWT' }).sign(attacker.privateKey), 401, 'INVALID_TOKEN']
    ]
    for (const [what, token, status, code] of cases) {
      const target = `/v1/reports/?hostile=${encodeURIComponent(what)}`
      const res = await bearer(token, target)
      t.equal(res.status, status, `${what}: ${res.text}`)
      t.equal(res.json<{ code: string }>().code, code, what)
      t.equal(reached(target), 0, `${what}: not forwarded`)
    }
  })

  t.test('1,000 made-up kids: at most one fetch of the key set', async (t) => {
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const before = idp.jwksRequests
    const started = Date.now()
    const answers = await Promise.all(Array.from({ length: 1000 }, async (_, i) => {
      const token = await new SignJWT({ iss: idp.issuer, aud: idp.audience, sub: 'x', exp: Math.floor(Date.now() / 1000) + 60 })
        .setProtectedHeader({ alg: 'ES256', kid: `flood-${i}`, typ: 'at+jwt' }).sign(attacker.privateKey)
      return (await bearer(token, `/v1/reports/?flood=${i}`)).status
    }))
    t.same([...new Set(answers)], [401], 'every one refused')
    // the unknown-kid fetch: at most one per 30 s; beside it, this issuer's background refresh may
    // run once a second (minRefreshSeconds: 1, for the outage test), the 1,000 requests or not
    const refreshes = Math.ceil((Date.now() - started) / 1000)
    const fetches = idp.jwksRequests - before
    t.ok(fetches <= 1 + refreshes, `${fetches} fetches in ${refreshes} s: at most one for the unknown kids, and the scheduled refreshes`)
  })

  t.test('the IdP rotates its key: new tokens verify without a restart; old ones once their key leaves the JWKS are refused', async (t) => {
    const old = await idp.clientCredentialsToken(['api:read'])
    t.equal((await bearer(old, '/v1/reports/?rotate=0')).status, 200)
    await idp.rotateKey({ keepOld: true })
    const fresh = await idp.clientCredentialsToken(['api:read'])
    // the unknown-kid refetch may have been spent by the flood above: the refresh (1 s here) brings the new key
    let status = 0
    for (let i = 0; i < 40 && status !== 200; i++) {
      status = (await bearer(fresh, `/v1/reports/?rotate=1&try=${i}`)).status
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
    }
    t.equal(status, 200, 'the new key\'s token')
    t.equal((await bearer(old, '/v1/reports/?rotate=2')).status, 200, 'the old key is still published')
    await idp.rotateKey({ keepOld: false })
    let oldStatus = 200
    for (let i = 0; i < 40 && oldStatus === 200; i++) {
      oldStatus = (await bearer(old, `/v1/reports/?rotate=3&try=${i}`)).status
      if (oldStatus === 200) await new Promise((resolve) => setTimeout(resolve, 100))
    }
    t.equal(oldStatus, 401, 'the old key left the JWKS: its token is refused, though it has not expired')
  })

  t.test('an IdP token through the decision listener: the same answer', async (t) => {
    const decisionUrl = await gw.app.keygate.decisions?.listen({ port: 0, host: '127.0.0.1' }) as string
    const token = await idp.clientCredentialsToken(['api:read'])
    const ask = async (authorization: string) => await send(decisionUrl, '/decide/nginx', {
      headers: {
        authorization, 'x-original-method': 'GET', 'x-original-uri': '/v1/reports/?decided=1', 'x-forwarded-host': 'api.test', 'x-original-content-length': '0'
      }
    })
    const allowed = await ask(`Bearer ${token}`)
    t.equal(allowed.status, 200)
    t.equal(allowed.headers['x-gateway-user'], 'corp:keygate-service')
    t.equal(allowed.headers['x-gateway-scopes'], 'reports:read')
    const refused = await ask(`Bearer ${token.slice(0, -4)}AAAA`)
    t.equal(refused.status, 403, 'nginx\'s wire status')
    t.equal(refused.headers['x-keygate-status'], '401')
  })

  t.test('the IdP down: cached keys serve up to the bound, then 503 IDP_KEYS_UNAVAILABLE; up again: recovered', async (t) => {
    const token = await idp.clientCredentialsToken(['api:read'])
    t.equal((await bearer(token, '/v1/reports/?outage=0')).status, 200)
    await idp.stop()
    t.equal((await bearer(token, '/v1/reports/?outage=1')).status, 200, 'within the bound: served')
    let res = await bearer(token, '/v1/reports/?outage=2')
    for (let i = 0; i < 60 && res.status === 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      res = await bearer(token, `/v1/reports/?outage=2&try=${i}`)
    }
    t.equal(res.status, 503, 'past the bound (3 s here): no key keygate may trust')
    t.equal(res.json<{ code: string }>().code, 'IDP_KEYS_UNAVAILABLE')
    t.match(res.headers['retry-after'], /^[0-9]+$/)
    t.equal((await send(gw.url, '/readyz')).status, 503, '/readyz says so')
    await idp.start()
    let back = 503
    for (let i = 0; i < 150 && back !== 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      back = (await bearer(token, `/v1/reports/?outage=3&try=${i}`)).status
    }
    t.equal(back, 200, 'the IdP back: recovered without a restart')
  })
})

t.test('the admin API treats an IdP user like any other, its name (with ":" and "|") encoded in the path', async (t) => {
  const idp = await startTestIdp(t)
  const upstream = await startRecorder(t)
  const gw = await startAdminGateway(t, {
    upstreamUrl: upstream.url,
    routes: routesFromYaml(ROUTES, upstream.url),
    config: { identityProviders: { file: undefined, oidc: { issuer: idp.issuer, audience: idp.audience, name: 'auth0', jwksUri: undefined } } }
  })
  const subject = 'google-oauth2|1234'
  const username = `auth0:${subject}`
  const path = `/v1/users/${encodeURIComponent(username)}`
  const { accessToken } = await idp.authorizationCodeToken(subject, ['api:read'])
  const pair = rsaKeyPair()
  t.equal((await registerKey(gw.url, accessToken, pair, 'laptop')).status, 201, 'made on first use, registers a key')
  const got = await admin(gw, 'GET', path)
  t.equal(got.status, 200, got.text)
  t.equal(got.json<{ username: string }>().username, username)
  const listed = await admin(gw, 'GET', '/v1/users')
  t.ok(listed.json<{ items: Array<{ username: string }> }>().items.some((user) => user.username === username), 'listed')
  const granted = await admin(gw, 'PUT', path, { body: { scopes: ['reports:read'] } })
  t.equal(granted.status, 200, `scopes set: ${granted.text}`)
  const password = await admin(gw, 'PUT', path, { body: { password: 'a long enough password' } })
  t.equal(password.status, 400, 'no password for an IdP user')
  const removed = await admin(gw, 'DELETE', path)
  t.equal(removed.status, 200, removed.text)
  t.same(removed.json<{ revokedKeys: string[] }>().revokedKeys, [pair.apiKey], 'its key revoked')
  t.equal((await admin(gw, 'GET', path)).status, 404, 'gone')
  t.equal((await admin(gw, 'DELETE', path)).status, 404, 'removed once')
  const refused = await send(gw.url, '/v1/reports/?after-removal', { headers: { authorization: `Bearer ${accessToken}` } })
  t.equal(refused.status, 401, 'its earlier token refused')
})
