// An IdP's access tokens against its issuer's keys: a good token gives the user and scopes it
// stands for (cached until it expires); each hostile token is refused with INVALID_TOKEN and a
// detail that says why, or with its key source's error; a key a token names is never used.
import { createSecretKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { SignJWT, exportJWK, type JWTPayload } from 'jose'
import t from 'tap'
import { claimAt, createIdpVerifier, idpScopes, mappedScopes, type KeySource } from '../../../../gateway/src/idp/idp-tokens.js'
import { issuersFromDocument, type IssuerConfig } from '../../../../gateway/src/idp/issuers.js'

const NOW = Date.parse('2026-11-28T12:00:00Z')
const SECONDS = NOW / 1000

const [corp, other] = issuersFromDocument({
  issuers: [
    { name: 'corp', issuer: 'https://login.example.com', audiences: ['keygate'], scopes: { map: { 'api.read': 'clients:read', 'api.write': ['clients:read', 'clients:write'] } } },
    { name: 'other', issuer: 'https://other.example.com', audiences: ['keygate'], accessTokenType: 'at+jwt', requiredClaims: ['client_id'] }
  ]
}, 'issuers.yaml') as [IssuerConfig, IssuerConfig]

const corpKey = generateKeyPairSync('rsa', { modulusLength: 2048 })
const otherKey = generateKeyPairSync('ec', { namedCurve: 'P-256' })
const attackerKey = generateKeyPairSync('rsa', { modulusLength: 2048 })

class UnknownKey extends Error {}
/** Each issuer's published keys by kid; an unknown kid is the source's own error. */
const published = new Map<IssuerConfig, Map<string, KeyObject>>([
  [corp, new Map([['corp-1', corpKey.publicKey]])],
  [other, new Map([['other-1', otherKey.publicKey]])]
])
let fetches = 0
const keysOf = (issuer: IssuerConfig): KeySource => ({
  async keyFor (kid) {
    fetches++
    const key = kid === undefined ? undefined : published.get(issuer)?.get(kid)
    if (key === undefined) throw new UnknownKey(`no key ${String(kid)} for ${issuer.name}`)
    return key
  }
})

interface Options { alg?: string, kid?: string, key?: KeyObject, header?: Record<string, unknown>, claims?: JWTPayload }
async function tokenFor (issuer: IssuerConfig, options: Options = {}): Promise<string> {
  const { alg = 'RS256', kid = 'corp-1', key = corpKey.privateKey, header = {}, claims = {} } = options
  const defaults = { iss: issuer.issuer, aud: 'keygate', iat: SECONDS - 60, exp: SECONDS + 300, sub: 'alice', scope: 'api.read openid', client_id: 'cli' }
  return await new SignJWT({ ...defaults, ...claims }).setProtectedHeader({ alg, kid, typ: 'at+jwt', ...header }).sign(key)
}

/** A compact JWS with the given header and payload and no (or any) signature: for what jose will not sign. */
const forged = (header: object, payload: object, signature = ''): string =>
  `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${signature}`

const verifier = createIdpVerifier([corp, other], keysOf, () => NOW)

t.test('a good token: the user it stands for, namespaced by issuer, and its scopes mapped', async (t) => {
  const token = await tokenFor(corp, { claims: { scope: 'api.read api.write unknown openid' } })
  t.equal(verifier.cached(token), undefined, 'not verified yet: nothing cached')
  t.equal(verifier.issuerOf(token), corp)
  const verified = await verifier.verify(token, corp)
  t.equal(verifier.cached(token), verified, 'verified: the hot path finds it with one lookup')
  t.match(verified, { subject: 'alice', username: 'corp:alice', scopes: ['clients:read', 'clients:write'], issuedAt: SECONDS - 60, expiresAt: SECONDS + 300 })
  const before = fetches
  t.equal(verifier.verify(token, corp), verified, 'again: the cached verification, synchronously, no key asked for')
  t.equal(fetches, before)
})

t.test('hostile tokens: refused, each saying why', async (t) => {
  const good = await tokenFor(corp)
  const [head, body] = good.split('.') as [string, string]
  const payload = JSON.parse(Buffer.from(body, 'base64url').toString()) as JWTPayload
  const pem = corpKey.publicKey.export({ type: 'spki', format: 'pem' })
  const attackerJwk = await exportJWK(attackerKey.publicKey)
  const cases: Array<[string, Promise<string> | string, RegExp]> = [
    ['alg none', forged({ alg: 'none', kid: 'corp-1' }, payload), /algorithm "none" is not one/],
    // algorithm confusion: HMAC with the IdP's public key (its PEM) as the secret
    ['HS256 with the public key as secret', tokenFor(corp, { alg: 'HS256', key: createSecretKey(Buffer.from(pem)) as unknown as KeyObject }), /algorithm "HS256" is not one/],
    ['an algorithm the issuer does not allow', tokenFor(corp, { alg: 'RS512' }), /algorithm "RS512" is not one/],
    ['another issuer\'s iss in a token signed by corp', '', /^$/],
    ['expired', tokenFor(corp, { claims: { exp: SECONDS - 120 } }), /has expired/],
    ['not yet valid', tokenFor(corp, { claims: { nbf: SECONDS + 600 } }), /not valid yet/],
    ['another audience', tokenFor(corp, { claims: { aud: 'someone-else' } }), /audience/],
    ['a crit header keygate does not understand', forged({ alg: 'RS256', kid: 'corp-1', crit: ['exp-ext'], 'exp-ext': 1 }, payload, 'AAAA'),
      /does not accept: Extension Header Parameter "exp-ext" is not recognized/],
    ['an embedded jwk of the attacker\'s, signed with it', tokenFor(corp, { key: attackerKey.privateKey, header: { jwk: attackerJwk } }), /signature does not verify.*jwk header was ignored/],
    ['a jku pointing at the attacker\'s keys', tokenFor(corp, { key: attackerKey.privateKey, header: { jku: 'https://attacker.example/jwks' } }),
      /signature does not verify.*jku header was ignored/],
    ['a tampered payload', `${head}.${Buffer.from(JSON.stringify({ ...payload, sub: 'admin' })).toString('base64url')}.${good.split('.')[2] ?? ''}`,
      /signature does not verify/],
    ['no exp', tokenFor(corp, { claims: { exp: undefined } }), /lacks the claim exp/],
    ['no subject', tokenFor(corp, { claims: { sub: undefined } }), /lacks the claim sub/],
    ['a subject with a space', tokenFor(corp, { claims: { sub: 'a b' } }), /not a subject keygate can name a user after/],
    ['over the size bound', tokenFor(corp, { claims: { pad: 'x'.repeat(9000) } }), /bytes; this issuer's tokens may have 8192/]
  ]
  for (const [what, made, message] of cases) {
    const token = await made
    const issuer = what.startsWith('another issuer') ? other : corp
    if (what.startsWith('another issuer')) {
      // other's iss, corp's kid and key: other's key set has no such kid, and other wants at+jwt and client_id
      const confused = await tokenFor(other, { alg: 'RS256' })
      await t.rejects(async () => { await verifier.verify(confused, other) }, { message: /^no key corp-1 for other$/ }, `${what}: only other's own keys are asked`)
      continue
    }
    try {
      await verifier.verify(token, issuer)
      t.fail(`${what}: refused`)
    } catch (err) {
      t.equal((err as { code?: string }).code, 'INVALID_TOKEN', `${what}: INVALID_TOKEN`)
      t.match((err as Error).message, message, `${what}: ${(err as Error).message}`)
      t.match((err as { headers?: Record<string, string> }).headers?.['www-authenticate'], /error="invalid_token"/)
    }
  }
})

t.test('a kid the issuer does not publish: the key source\'s refusal, never another issuer\'s key', async (t) => {
  const token = await tokenFor(corp, { kid: 'other-1', key: otherKey.privateKey, alg: 'ES256' })
  await t.rejects(async () => { await verifier.verify(token, corp) }, { message: /^no key other-1 for corp$/ })
})

t.test('an issuer that requires at+jwt and a claim', async (t) => {
  const good = await tokenFor(other, { alg: 'ES256', kid: 'other-1', key: otherKey.privateKey })
  t.equal((await verifier.verify(good, other)).username, 'other:alice')
  const jwt = await tokenFor(other, { alg: 'ES256', kid: 'other-1', key: otherKey.privateKey, header: { typ: 'JWT' } })
  await t.rejects(async () => { await verifier.verify(jwt, other) }, { code: 'INVALID_TOKEN', message: /not an access token/ })
  const noClient = await tokenFor(other, { alg: 'ES256', kid: 'other-1', key: otherKey.privateKey, claims: { client_id: undefined } })
  await t.rejects(async () => { await verifier.verify(noClient, other) }, { code: 'INVALID_TOKEN', message: /client_id/ })
})

t.test('issuerOf: a trusted issuer by the unverified iss, else none', async (t) => {
  t.equal(verifier.issuerOf(await tokenFor(other, { alg: 'ES256', kid: 'other-1', key: otherKey.privateKey })), other)
  t.equal(verifier.issuerOf(forged({ alg: 'RS256' }, { iss: 'https://unknown.example.com' })), undefined)
  t.equal(verifier.issuerOf('not.a-token'), undefined)
  t.equal(verifier.issuerOf('a.b.c'), undefined)
})

t.test('scopes: the claim, a path, a list; the map, or the valid ones as named', async (t) => {
  t.same(idpScopes({ scope: 'a b  c' }, undefined), ['a', 'b', 'c'])
  t.same(idpScopes({ scp: ['x', 'y', 3] }, undefined), ['x', 'y'])
  t.same(idpScopes({ realm_access: { roles: ['admin'] } }, 'realm_access.roles'), ['admin'])
  t.same(idpScopes({ realm_access: ['admin'] }, 'realm_access.roles'), [])
  t.equal(claimAt({ a: { b: { c: 1 } } }, 'a.b.c'), 1)
  t.equal(claimAt({ a: Object.create({ inherited: 1 }) as object }, 'a.inherited'), undefined, 'own members only')
  t.same(mappedScopes(corp.scopeMap, ['api.write', 'api.read', 'nope']), ['clients:read', 'clients:write'])
  t.same(mappedScopes(other.scopeMap, ['clients:read', 'has space', 'b']), ['b', 'clients:read'], 'no map: the valid ones as named')
})

t.test('the cache holds a token until it expires, and while its key is still published', async (t) => {
  let clock = NOW
  let publishedKey: KeyObject | undefined = corpKey.publicKey
  const source: KeySource = {
    async keyFor () {
      if (publishedKey === undefined) throw new UnknownKey('no key corp-1 for corp')
      return publishedKey
    },
    keyForSync: () => publishedKey
  }
  const cachedVerifier = createIdpVerifier([corp], () => source, () => clock)
  const token = await tokenFor(corp)
  const verified = await cachedVerifier.verify(token, corp)
  t.equal(cachedVerifier.cached(token), verified)
  await t.rejects(async () => { await cachedVerifier.verify(token, other) }, { code: 'INVALID_TOKEN', message: /issuer \(iss\)/ },
    'presented as another issuer\'s: never the cached answer, checked against that issuer')
  // the issuer rotated: another RSA key under the same kid
  publishedKey = attackerKey.publicKey
  t.equal(cachedVerifier.cached(token), undefined, 'its key no longer published: not cached any more')
  await t.rejects(async () => { await cachedVerifier.verify(token, corp) }, { code: 'INVALID_TOKEN', message: /signature does not verify/ }, 'and checked again')
  publishedKey = corpKey.publicKey
  t.equal((await cachedVerifier.verify(token, corp)).username, 'corp:alice', 'published again: verified again')
  clock = (SECONDS + 300 + corp.clockSkewSeconds) * 1000 + 1
  t.equal(cachedVerifier.cached(token), undefined, 'past exp and the skew: not cached any more')
  await t.rejects(async () => { await cachedVerifier.verify(token, corp) }, { code: 'INVALID_TOKEN', message: /has expired/ })
})
