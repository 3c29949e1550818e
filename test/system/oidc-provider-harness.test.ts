// The test OpenID Provider (test/helpers/oidc-provider.ts) is what keygate's identity-provider
// tests will trust, so it is checked here on its own: its discovery document, JWT access tokens
// of both grants (RFC 9068) verified against its JWKS as a resource server would, key rotation
// with and without the old key, stop and start on the same port, and its request counters; and,
// for standard OAuth clients (issue 41), a client that registers itself (RFC 7591), a resource
// added once known (RFC 8707) and a user who allows only part of the scope asked.
import t, { type Test } from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose'
import { startTestIdp, type TestIdpAlgorithm } from '../helpers/oidc-provider.js'

interface Jwks { keys: Array<{ kid?: string, kty: string, d?: string }> }

async function jwksKids (t: Test, jwksUri: string): Promise<string[]> {
  const response = await fetch(jwksUri)
  const jwks = await response.json() as Jwks
  t.notOk(jwks.keys.some((key) => key.d !== undefined), 'the JWKS publishes no private key')
  return jwks.keys.map((key) => key.kid as string)
}

t.test('discovery and a client-credentials token verified against its JWKS', async (t) => {
  const idp = await startTestIdp(t)
  t.match(idp.issuer, /^http:\/\/127\.0\.0\.1:\d+$/)
  const discovery = await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json() as Record<string, unknown>
  t.equal(discovery.issuer, idp.issuer, 'the discovery document names the issuer')
  t.equal(discovery.jwks_uri, idp.jwksUri, 'and the jwks_uri')
  t.equal(idp.discoveryRequests, 1, 'the discovery request was counted')
  t.equal(idp.jwksRequests, 0)

  const token = await idp.clientCredentialsToken(['api:read'])
  const header = decodeProtectedHeader(token)
  t.equal(header.typ, 'at+jwt', 'an RFC 9068 access token')
  t.equal(header.alg, 'RS256')
  t.equal(header.kid, idp.currentKid)
  t.same(await jwksKids(t, idp.jwksUri), [idp.currentKid], 'its kid is the JWKS key')
  t.equal(idp.jwksRequests, 1)

  const { payload, protectedHeader } = await jwtVerify(token, createRemoteJWKSet(new URL(idp.jwksUri)), {
    issuer: idp.issuer, audience: idp.audience, typ: 'at+jwt', algorithms: ['RS256']
  })
  t.equal(protectedHeader.kid, idp.currentKid)
  t.equal(payload.iss, idp.issuer)
  t.equal(payload.aud, idp.audience)
  t.equal(payload.scope, 'api:read', 'the requested scope only')
  t.equal(payload.sub, 'keygate-service', 'sub is the client')
  t.equal(payload.client_id, 'keygate-service')
  t.equal((payload.exp as number) - (payload.iat as number), idp.accessTokenTtlSeconds, 'lives the configured TTL')
  t.equal(idp.jwksRequests, 2, 'createRemoteJWKSet fetched the JWKS')

  t.equal(decodeJwt(await idp.clientCredentialsToken()).scope, 'api:read api:write', 'by default all its scopes')
  t.notOk('scope' in decodeJwt(await idp.clientCredentialsToken([])), '[]: no scope claim')
  await t.rejects(idp.clientCredentialsToken(['billing:read']), /left out billing:read/, 'a scope its API lacks is an error, not silently dropped')
})

t.test('an authorization-code token (PKCE) carries the subject', async (t) => {
  const idp = await startTestIdp(t, { accessTokenTtlSeconds: 120 })
  const { accessToken, idToken } = await idp.authorizationCodeToken('alice@example.com', ['api:write'])
  const { payload, protectedHeader } = await jwtVerify(accessToken, createRemoteJWKSet(new URL(idp.jwksUri)), {
    issuer: idp.issuer, audience: idp.audience, typ: 'at+jwt'
  })
  t.equal(protectedHeader.typ, 'at+jwt')
  t.equal(payload.sub, 'alice@example.com')
  t.equal(payload.scope, 'api:write', 'only the API scope: openid is not the resource server\'s')
  t.equal(payload.client_id, 'keygate-cli')
  t.equal((payload.exp as number) - (payload.iat as number), 120)
  t.ok(idToken, 'an ID token too')
  const id = decodeJwt(idToken as string)
  t.equal(id.sub, 'alice@example.com')
  t.equal(id.aud, 'keygate-cli', 'the ID token is for the client, not the API')

  const bob = await idp.authorizationCodeToken('bob')
  t.equal(decodeJwt(bob.accessToken).sub, 'bob', 'each call logs in afresh')
  t.equal(decodeJwt(bob.accessToken).scope, 'api:read api:write')
})

for (const algorithm of ['ES256', 'EdDSA'] satisfies TestIdpAlgorithm[]) {
  t.test(`${algorithm} keys`, async (t) => {
    const idp = await startTestIdp(t, { algorithm })
    const jwks = createRemoteJWKSet(new URL(idp.jwksUri))
    for (const token of [await idp.clientCredentialsToken(), (await idp.authorizationCodeToken('carol')).accessToken]) {
      const { protectedHeader } = await jwtVerify(token, jwks, { issuer: idp.issuer, audience: idp.audience, typ: 'at+jwt', algorithms: [algorithm] })
      t.equal(protectedHeader.alg, algorithm)
    }
  })
}

t.test('rotateKey: a new kid, the old key kept or dropped', async (t) => {
  const idp = await startTestIdp(t)
  const first = idp.currentKid
  const before = await idp.clientCredentialsToken()

  await idp.rotateKey({ keepOld: true })
  const second = idp.currentKid
  t.not(second, first, 'a new kid')
  const after = await idp.clientCredentialsToken()
  t.equal(decodeProtectedHeader(after).kid, second, 'new tokens are signed by the new key')
  t.same((await jwksKids(t, idp.jwksUri)).sort(), [first, second].sort(), 'keepOld: both keys published')
  const jwks = createRemoteJWKSet(new URL(idp.jwksUri))
  const options = { issuer: idp.issuer, audience: idp.audience, typ: 'at+jwt' }
  await jwtVerify(before, jwks, options)
  await jwtVerify(after, jwks, options)
  t.pass('old and new tokens verify')

  await idp.rotateKey({ keepOld: false })
  const third = idp.currentKid
  t.same(await jwksKids(t, idp.jwksUri), [third], 'keepOld false: the new key alone')
  const latest = await idp.clientCredentialsToken()
  t.equal(decodeProtectedHeader(latest).kid, third)
  const fresh = createRemoteJWKSet(new URL(idp.jwksUri))
  await jwtVerify(latest, fresh, options)
  await t.rejects(jwtVerify(after, fresh, options), { code: 'ERR_JWKS_NO_MATCHING_KEY' }, 'a token of a dropped key no longer verifies')
  t.equal(decodeJwt((await idp.authorizationCodeToken('dave')).accessToken).sub, 'dave', 'the code flow works after rotation')
})

t.test('stop refuses connections, start serves again on the same port with the same keys', async (t) => {
  const idp = await startTestIdp(t)
  const kids = await jwksKids(t, idp.jwksUri)
  t.equal(idp.jwksRequests, 1)

  await idp.stop()
  const refused = await fetch(idp.jwksUri).then(() => undefined, (error: Error & { cause?: { code?: string } }) => error.cause?.code)
  t.equal(refused, 'ECONNREFUSED', 'stopped: connection refused')
  t.equal(idp.jwksRequests, 1, 'a refused request is not counted')

  await idp.start()
  t.same(await jwksKids(t, idp.jwksUri), kids, 'started: the same keys, at the same URL')
  t.equal(idp.jwksRequests, 2)
  const token = await idp.clientCredentialsToken()
  await jwtVerify(token, createRemoteJWKSet(new URL(idp.jwksUri)), { issuer: idp.issuer, audience: idp.audience })
  t.equal(idp.jwksRequests, 3)
  t.equal(idp.discoveryRequests, 0, 'nothing asked for discovery')
  await fetch(`${idp.issuer}/.well-known/openid-configuration`)
  t.equal(idp.discoveryRequests, 1)
})

t.test('a client that registers itself gets tokens for an added resource, with the scope the user allowed', async (t) => {
  const idp = await startTestIdp(t, { registration: true })
  const resource = 'http://127.0.0.1:9/mcp'
  await idp.addResource(resource, ['mcp:read', 'mcp:write'])
  const discovery = await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json() as Record<string, unknown>
  t.equal(discovery.registration_endpoint, `${idp.issuer}/reg`, 'registration, in the discovery document')
  const redirectUri = 'http://127.0.0.1/callback-of-a-registered-client'
  const metadata = { redirect_uris: [redirectUri], application_type: 'native', token_endpoint_auth_method: 'none', scope: 'mcp:read mcp:write' }
  const registered = await fetch(`${idp.issuer}/reg`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(metadata) })
  t.equal(registered.status, 201)
  const { client_id: clientId } = await registered.json() as { client_id: string }
  t.same(idp.registrations, [metadata], 'the registration recorded as sent')

  const verifier = randomBytes(32).toString('base64url')
  const url = new URL('/auth', idp.issuer)
  url.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: 'code',
    scope: 'mcp:read mcp:write',
    resource,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256'
  }).toString()
  const token = async (allow?: string[]): Promise<Record<string, unknown>> => {
    const back = new URL(await idp.authorize(url.toString(), 'carol', allow === undefined ? {} : { allow }))
    t.equal(back.origin + back.pathname, redirectUri, 'back at the client')
    const answer = await fetch(`${idp.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        client_id: clientId,
        code: back.searchParams.get('code') ?? '',
        redirect_uri: redirectUri,
        code_verifier: verifier,
        resource
      })
    })
    const { access_token: accessToken } = await answer.json() as { access_token: string }
    return (await jwtVerify(accessToken, createRemoteJWKSet(new URL(idp.jwksUri)), { issuer: idp.issuer, audience: resource, typ: 'at+jwt' })).payload
  }
  const partial = await token(['mcp:read'])
  t.equal(partial.aud, resource, 'aud: the added resource')
  t.equal(partial.scope, 'mcp:read', 'only what the user allowed')
  t.equal(partial.client_id, clientId)
  t.equal((await token()).scope, 'mcp:read mcp:write', 'all of it when the user allows all')
})
