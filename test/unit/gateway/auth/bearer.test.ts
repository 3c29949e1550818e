import { generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto'
import { SignJWT, type JWTPayload } from 'jose'
import t from 'tap'
import { bearerTokenStage, staleTokenReason, verifyBearer } from '../../../../gateway/src/auth/bearer.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createUserScopes, type CurrentUser } from '../../../../gateway/src/users/user-scopes.js'
import { NO_SCOPES } from '../../../../gateway/src/users/scopes.js'
import { AUDIENCE, ISSUER, captureGatewayError, describedRequest, tokenFixture } from '../../../helpers/auth-fixtures.js'

const fx = await tokenFixture()
t.teardown(fx.cleanup)
// The users the tokens below name, created an hour ago (some tokens are forged with an iat in the past).
const users = createMemoryStore(() => Date.now() - 3_600_000)
for (const name of ['alice', 'bob', 'carol', 'dave']) await users.putUser(name, 'hash')
const current = createUserScopes(users, { cacheSize: 100 })
t.teardown(async () => { await current.close() })
const stage = bearerTokenStage(fx.tokens, current)

const nowSeconds = (): number => Math.floor(Date.now() / 1000)
const b64url = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')

interface Forge {
  claims?: JWTPayload
  /** claims to leave out of the defaults */
  omit?: Array<'iss' | 'aud' | 'sub' | 'iat' | 'exp' | 'jti'>
  header?: Record<string, unknown>
  alg?: string
  key?: KeyObject | Uint8Array
}

/** A JWT with the service's claims, header and key unless told otherwise. */
async function forge ({ claims = {}, omit = [], header = {}, alg = 'EdDSA', key = fx.privateKey }: Forge = {}): Promise<string> {
  const now = nowSeconds()
  const defaults: JWTPayload = { iss: ISSUER, aud: AUDIENCE, sub: 'alice', iat: now, exp: now + 600, jti: randomUUID() }
  for (const name of omit) delete defaults[name]
  return await new SignJWT({ ...defaults, ...claims })
    .setProtectedHeader({ alg, kid: fx.kid, typ: 'JWT', ...header })
    .sign(key)
}

async function runWith (authorization: string | undefined): Promise<AuthState> {
  const state: AuthState = {}
  await stage.run(describedRequest({ headers: authorization === undefined ? {} : { authorization } }), state)
  return state
}

t.test('the service\'s own tokens are accepted and name the user', async (t) => {
  const { token } = await fx.tokens.issue('alice')
  const state = await runWith(`Bearer ${token}`)
  t.equal(state.user, 'alice')
  t.equal(await verifyBearer(fx.tokens, `Bearer ${token}`), 'alice')
  t.equal(verifyBearer(fx.tokens, `Bearer ${token}`), 'alice', 'a token verified before is answered at once, not through a promise')
  // A token forged with the same key, claims and kid as the service's is just as good: this is
  // the baseline that makes every hostile variant below differ in one thing only.
  t.equal((await runWith(`Bearer ${await forge()}`)).user, 'alice')
})

t.test('Authorization header forms', async (t) => {
  const { token } = await fx.tokens.issue('bob')
  const accepted: Array<[string, string]> = [
    ['canonical', `Bearer ${token}`],
    ['lowercase scheme', `bearer ${token}`],
    ['uppercase scheme', `BEARER ${token}`],
    ['several spaces', `Bearer   ${token}`],
    ['trailing space', `Bearer ${token} `]
  ]
  for (const [label, header] of accepted) {
    t.test(`accepted: ${label}`, async (t) => {
      t.equal((await runWith(header)).user, 'bob')
    })
  }
  const missing: Array<[string, string | undefined]> = [
    ['no header', undefined],
    ['empty header', ''],
    ['Basic scheme', 'Basic YWxpY2U6cGFzc3dvcmQ='],
    ['Basic scheme with a JWT', `Basic ${token}`],
    ['"Bearer" alone', 'Bearer'],
    ['"Bearer " and spaces', 'Bearer    '],
    ['token without scheme', token],
    ['scheme glued to token', `Bearer${token}`]
  ]
  const malformed = ['Bearer a b', 'Bearer\tabc', 'bearer not-a-jwt']
  for (const header of malformed) {
    t.test(`INVALID_TOKEN: a bearer token that is malformed (${JSON.stringify(header)})`, async (t) => {
      const err = await captureGatewayError(() => stage.run(describedRequest({ headers: { authorization: header } }), {}))
      t.equal(err.code, 'INVALID_TOKEN')
    })
  }
  for (const [label, header] of missing) {
    t.test(`MISSING_TOKEN: ${label}`, async (t) => {
      const state: AuthState = {}
      const err = await captureGatewayError(() => stage.run(describedRequest({ headers: header === undefined ? {} : { authorization: header } }), state))
      t.equal(err.code, 'MISSING_TOKEN')
      t.equal(err.statusCode, 401)
      t.match(err.headers, { 'www-authenticate': /^Bearer\b/ })
      t.equal(state.user, undefined, 'no user is established')
    })
  }
})

t.test('tokens that must give INVALID_TOKEN', async (t) => {
  const otherEd25519 = generateKeyPairSync('ed25519').privateKey
  const p256 = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey
  const now = nowSeconds()
  const validClaims = { iss: ISSUER, aud: AUDIENCE, sub: 'alice', iat: now, exp: now + 600, jti: randomUUID() }
  const publicPem = fx.tokens.jwks.keys[0] === undefined ? '' : JSON.stringify(fx.tokens.jwks.keys[0])

  const cases: Array<[string, () => Promise<string> | string]> = [
    ['garbage', () => 'not-a-jwt'],
    ['three garbage segments', () => 'aaaa.bbbb.cccc'],
    ['wrong issuer', async () => await forge({ claims: { iss: 'someone-else' } })],
    ['wrong audience', async () => await forge({ claims: { aud: 'another-service' } })],
    ['missing exp', async () => await forge({ omit: ['exp'] })],
    ['expired', async () => await forge({ claims: { iat: now - 1200, exp: now - 600 } })],
    ['expired one second ago', async () => await forge({ claims: { iat: now - 60, exp: now - 1 } })],
    ['not yet valid (nbf in the future)', async () => await forge({ claims: { nbf: now + 600 } })],
    ['missing sub', async () => await forge({ omit: ['sub'] })],
    ['empty sub', async () => await forge({ claims: { sub: '' } })],
    ['missing iat', async () => await forge({ omit: ['iat'] })],
    ['missing jti', async () => await forge({ omit: ['jti'] })],
    ['alg none (hand-built, valid claims, right kid)', () => `${b64url({ alg: 'none', typ: 'JWT', kid: fx.kid })}.${b64url(validClaims)}.`],
    ['HS256 with some secret', async () => await forge({ alg: 'HS256', key: new TextEncoder().encode('a-shared-secret-of-thirty-two-by') })],
    ['HS256 keyed with the published public JWK (alg confusion)', async () => await forge({ alg: 'HS256', key: new TextEncoder().encode(publicPem) })],
    ['signed by another Ed25519 key, right kid', async () => await forge({ key: otherEd25519 })],
    ['ES256 with a P-256 key, right kid', async () => await forge({ alg: 'ES256', key: p256 })],
    ['unknown kid', async () => await forge({ header: { kid: 'not-the-service-key' } })],
    ['no kid', async () => await forge({ header: { kid: undefined } })],
    ['valid token with its signature cut', async () => (await fx.tokens.issue('alice')).token.slice(0, -4)],
    ['valid token with a changed payload', async () => {
      const [h, , s] = (await fx.tokens.issue('alice')).token.split('.')
      return `${h}.${b64url({ ...validClaims, sub: 'mallory' })}.${s}`
    }]
  ]
  for (const [label, make] of cases) {
    t.test(label, async (t) => {
      const token = await make()
      const state: AuthState = {}
      const err = await captureGatewayError(() => stage.run(describedRequest({ headers: { authorization: `Bearer ${token}` } }), state))
      t.equal(err.code, 'INVALID_TOKEN')
      t.equal(err.statusCode, 401)
      t.match(err.headers, { 'www-authenticate': /^Bearer\b/ })
      t.equal(state.user, undefined)
    })
  }
})

t.test('token length limit: a validly signed token over 4096 characters is refused', async (t) => {
  // Grow a padding claim until the (otherwise valid) token crosses 4096 characters; the last one
  // at or under the limit must still be accepted, so the refusal is down to the length alone.
  let under: string | undefined
  let over: string | undefined
  const base = (await forge({ claims: { pad: '' } })).length
  const start = Math.floor((4096 - base) * 3 / 4) - 8
  for (let pad = start; pad < start + 40 && over === undefined; pad++) {
    const token = await forge({ claims: { pad: 'x'.repeat(pad) } })
    if (token.length <= 4096) under = token
    else over = token
  }
  if (under === undefined || over === undefined) throw new Error('could not build tokens around 4096 characters')
  t.ok(under.length <= 4096 && under.length > 4090, `a ${under.length}-character token`)
  t.equal((await runWith(`Bearer ${under}`)).user, 'alice')
  t.ok(over.length > 4096)
  const err = await captureGatewayError(() => runWith(`Bearer ${over}`))
  t.equal(err.code, 'INVALID_TOKEN')
  const huge = await captureGatewayError(() => runWith(`Bearer ${'a'.repeat(100_000)}`))
  t.equal(huge.code, 'INVALID_TOKEN')
})

t.test('a valid token is accepted again (verification cache)', async (t) => {
  const { token } = await fx.tokens.issue('carol')
  for (let i = 0; i < 3; i++) t.equal((await runWith(`Bearer ${token}`)).user, 'carol', `use ${i + 1}`)
})

t.test('a cached token is refused once it expires', async (t) => {
  // exp is whole seconds: leave at least 300 ms between the first check and expiry.
  let exp = nowSeconds() + 1
  if (exp * 1000 - Date.now() < 300) exp += 1
  const token = await forge({ claims: { iat: exp - 60, exp } })
  t.equal((await runWith(`Bearer ${token}`)).user, 'alice', 'accepted (and cached) before exp')
  t.equal((await runWith(`Bearer ${token}`)).user, 'alice', 'accepted from the cache before exp')
  const wait = exp * 1000 - Date.now() + 20
  t.ok(wait <= 2100, `waits ${wait} ms`)
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, wait)))
  const err = await captureGatewayError(() => runWith(`Bearer ${token}`))
  t.equal(err.code, 'INVALID_TOKEN')
  // and stays refused (the stale entry is not put back)
  t.equal((await captureGatewayError(() => runWith(`Bearer ${token}`))).code, 'INVALID_TOKEN')
})

t.test('a token issued with the configured TTL carries it', async (t) => {
  const short = await tokenFixture(60)
  t.teardown(short.cleanup)
  const issued = await short.tokens.issue('dave')
  t.equal(issued.expiresIn, 60)
  t.equal(issued.tokenType, 'Bearer')
  const payload = JSON.parse(Buffer.from(issued.token.split('.')[1] ?? '', 'base64url').toString()) as JWTPayload
  t.equal((payload.exp ?? 0) - (payload.iat ?? 0), 60)
  t.equal(payload.sub, 'dave')
  t.equal(payload.iss, ISSUER)
  t.equal(payload.aud, AUDIENCE)
  // a token of one service is not a token of another (different key, same issuer and audience)
  t.equal((await captureGatewayError(() => fx.tokens.verify(issued.token))).code, 'INVALID_TOKEN')
})

t.test('a token acts only for the incarnation of its user it was issued to, and only until a password change', async (t) => {
  const store = createMemoryStore()
  const view = createUserScopes(store, { cacheSize: 100 })
  t.teardown(async () => { await view.close() })
  const own = bearerTokenStage(fx.tokens, view)
  const run = async (token: string): Promise<string> => {
    const state: AuthState = {}
    try {
      await own.run(describedRequest({ headers: { authorization: `Bearer ${token}` } }), state)
    } catch (err) {
      return (err as { code: string }).code
    }
    return `ok ${state.user ?? ''}`
  }
  const erin = await store.putUser('erin', 'hash-1')
  const token = (await fx.tokens.issue('erin', erin)).token
  t.equal(await run(token), 'ok erin', 'issued to this user: accepted')
  t.equal(await run(token), 'ok erin', 'again, from the caches')

  await store.putUser('erin', 'hash-2')
  t.equal(await run(token), 'INVALID_TOKEN', 'after a password change: refused')
  const after = (await fx.tokens.issue('erin', await store.getUser('erin') ?? erin)).token
  t.equal(await run(after), 'ok erin', 'a token issued after it: accepted')

  await store.setUserScopes('erin', ['clients:read'])
  t.equal(await run(after), 'ok erin', 'a change of scopes only ends no token')

  await store.removeUser('erin')
  t.equal(await run(after), 'INVALID_TOKEN', 'the user removed: refused')
  await store.putUser('erin', 'hash-2')
  t.equal(await run(after), 'INVALID_TOKEN', 'a new user under the same name (even with the same password): refused')
  t.equal(await run((await fx.tokens.issue('erin', await store.getUser('erin') ?? erin)).token), 'ok erin', 'the new user\'s own token: accepted')

  // a token with one user claim and not the other, or one of another type, is none keygate issued
  for (const claims of [{ uid: erin.id }, { cred: erin.credential }, { uid: 1, cred: erin.credential }]) {
    t.equal(await run(await forge({ claims: { sub: 'erin', ...claims } })), 'INVALID_TOKEN', `claims ${JSON.stringify(Object.keys(claims))}`)
  }
})

t.test('why a token no longer acts for its user', async (t) => {
  const user: CurrentUser = {
    scopes: NO_SCOPES, id: 'id-2', credential: 'cred-2', createdAtSeconds: 1000, passwordSetAtSeconds: 2000, idpRemovedAtSeconds: undefined
  }
  const token = (claims: { userId?: string; credential?: string; issuedAt: number }) =>
    ({ subject: 'erin', userId: claims.userId, credential: claims.credential, issuedAt: claims.issuedAt })
  const current = staleTokenReason(token({ userId: 'id-2', credential: 'cred-2', issuedAt: 1 }), user)
  t.equal(current, undefined, 'its user\'s id and credential: acts for it (whatever its iat)')
  const earlier = staleTokenReason(token({ userId: 'id-1', credential: 'cred-2', issuedAt: 3000 }), user)
  const password = staleTokenReason(token({ userId: 'id-2', credential: 'cred-1', issuedAt: 3000 }), user)
  const gone = staleTokenReason(token({ userId: 'id-2', credential: 'cred-2', issuedAt: 3000 }), null)
  t.ok(earlier !== undefined && password !== undefined && gone !== undefined, 'another id, another credential, no user: refused')
  t.equal(new Set([earlier, password, gone]).size, 3, 'each with its own detail')
  // tokens from before the claims existed: judged by iat, to the second
  t.equal(staleTokenReason(token({ issuedAt: 999 }), user), earlier, 'issued before the user was created: an earlier incarnation')
  t.equal(staleTokenReason(token({ issuedAt: 1999 }), user), password, 'issued before the password was set')
  t.equal(staleTokenReason(token({ issuedAt: 2000 }), user), undefined, 'issued in the second of the change or after: accepted')
})

t.test('a token and a user seen before: the stage answers at once, with no promise', async (t) => {
  const { token } = await fx.tokens.issue('carol')
  await runWith(`Bearer ${token}`)
  const state: AuthState = {}
  t.equal(stage.run(describedRequest({ headers: { authorization: `Bearer ${token}` } }), state), undefined, 'no promise')
  t.equal(state.user, 'carol')
  t.equal(state.account?.id, (await users.getUser('carol'))?.id, 'the user as the cache holds it')
})

t.test('a user not cached while the store fails: the store\'s error, and no user established', async (t) => {
  const failing = createMemoryStore()
  failing.getUser = async () => { throw new Error('store away') }
  const view = createUserScopes(failing, { cacheSize: 100 })
  t.teardown(async () => { await view.close() })
  const own = bearerTokenStage(fx.tokens, view)
  const { token } = await fx.tokens.issue('alice')
  const state: AuthState = {}
  await t.rejects(async () => { await own.run(describedRequest({ headers: { authorization: `Bearer ${token}` } }), state) }, { message: 'store away' })
  t.equal(state.user, undefined)
  t.equal(state.account, undefined)
})
