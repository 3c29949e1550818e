// Forged and hostile bearer tokens at a real gateway over a socket: every one is 401
// INVALID_TOKEN (problem+json) on a business route and on POST /v1/api-keys, and nothing reaches
// the upstream. The gateway signs with a key file this test wrote, so the test can also forge
// tokens with the REAL key that differ from a valid one in a single claim or header.
import { createPublicKey, generateKeyPairSync, randomUUID } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CompactSign, FlattenedSign, SignJWT, exportJWK, type JWK, type JWTPayload, type KeyObject } from 'jose'
import t from 'tap'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signBase64, type TestKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, registerKey, sendSigned, startStack, testConfig } from '../helpers/stack.js'

const dir = await mkdtemp(join(tmpdir(), 'keygate-jwt-attacks-'))
t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
const realKey = generateKeyPairSync('ed25519').privateKey
const keyFile = join(dir, 'jwt-key.pem')
await writeFile(keyFile, realKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 })

const recorder = await startRecorder(t)
const jwt = { ...testConfig().jwt, keyFile }
const gw = await startStack(t, { store: 'memory', upstreamUrl: recorder.url, config: { jwt } })
t.teardown(() => { gw.app.keygate.tokens.close() })
const { issuer, audience } = jwt

const published = (await send(gw.url, '/.well-known/jwks.json')).json<{ keys: JWK[] }>().keys
const kid = String(published[0]?.kid)
const publicX = String(published[0]?.x)
const publicPem = createPublicKey(realKey).export({ type: 'spki', format: 'pem' }).toString()

await addUser(gw, 'alice')
const keys = rsaKeyPair()
t.equal((await registerKey(gw.url, await login(gw.url, 'alice'), keys)).status, 201, 'alice has a registered key')

const nowSeconds = (): number => Math.floor(Date.now() / 1000)
const b64url = (value: unknown): string => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
const validClaims = (): JWTPayload => ({ iss: issuer, aud: audience, sub: 'alice', iat: nowSeconds(), exp: nowSeconds() + 600, jti: randomUUID() })

interface Forge {
  claims?: JWTPayload
  omit?: Array<keyof JWTPayload>
  header?: Record<string, unknown>
  alg?: string
  key?: KeyObject | Uint8Array
  crit?: Record<string, boolean>
}

/** A token like the gateway's own (real key, kid, typ, claims) except for what is given. */
async function forge ({ claims = {}, omit = [], header = {}, alg = 'EdDSA', key = realKey, crit }: Forge = {}): Promise<string> {
  const payload: JWTPayload = { ...validClaims(), ...claims }
  for (const name of omit) delete payload[name]
  return await new SignJWT(payload).setProtectedHeader({ alg, kid, typ: 'JWT', ...header }).sign(key, crit === undefined ? undefined : { crit })
}

const business = async (token: string): Promise<RawResponse> => await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
const registration = async (token: string, pair: TestKeyPair): Promise<RawResponse> => await send(gw.url, '/v1/api-keys', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
  body: JSON.stringify({ name: 'attack', publicKey: pair.publicPem, signature: signBase64(pair.privateKey, 'attack') })
})

t.test('baseline: a token forged with the real key, kid and claims is accepted on both routes', async (t) => {
  // so that each attack below differs from an accepted token in the one thing it names
  const token = await forge()
  t.equal((await business(token)).status, 200)
  t.equal((await registration(token, rsaKeyPair())).status, 201)
})

const attacker = generateKeyPairSync('ed25519')
const attackerRsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
const cases: Array<[string, () => Promise<string> | string]> = [
  ['alg none, no signature', () => `${b64url({ alg: 'none', typ: 'JWT', kid })}.${b64url(validClaims())}.`],
  ['HS256 keyed with the JWKS x value', async () => await forge({ alg: 'HS256', key: new TextEncoder().encode(publicX) })],
  ['HS256 keyed with the public key PEM', async () => await forge({ alg: 'HS256', key: new TextEncoder().encode(publicPem) })],
  ['unknown kid', async () => await forge({ header: { kid: 'not-a-keygate-key' } })],
  ['missing exp', async () => await forge({ omit: ['exp'] })],
  ['expired', async () => await forge({ claims: { iat: nowSeconds() - 1200, exp: nowSeconds() - 600 } })],
  ['nbf in the future', async () => await forge({ claims: { nbf: nowSeconds() + 600 } })],
  ['wrong iss', async () => await forge({ claims: { iss: 'https://attacker.example' } })],
  ['wrong aud', async () => await forge({ claims: { aud: 'another-service' } })],
  ['a 10 KB kid', async () => await forge({ header: { kid: 'k'.repeat(10 * 1024) } })],
  ['an identity token (typ keygate-identity+jwt) for the bearer audience', async () =>
    await gw.app.keygate.tokens.issueIdentity({ subject: 'alice', audience, apiKey: keys.apiKey, ttlSeconds: 300 })],
  ['RS256 signed with a key the attacker made', async () => await forge({ alg: 'RS256', key: attackerRsa })],
  ['the attacker\'s key embedded as a jwk header', async () =>
    await forge({ key: attacker.privateKey, header: { jwk: await exportJWK(attacker.publicKey) } })],
  ['crit header with an unknown extension', async () =>
    await forge({ header: { crit: ['x-keygate-unknown'], 'x-keygate-unknown': true }, crit: { 'x-keygate-unknown': true } })],
  ['JWS JSON serialization instead of compact', async () => {
    const jws = await new FlattenedSign(new TextEncoder().encode(JSON.stringify(validClaims())))
      .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'JWT' })
      .sign(realKey)
    return JSON.stringify(jws)
  }],
  ['a payload that is not JSON', async () =>
    await new CompactSign(new TextEncoder().encode(`iss=${issuer}&aud=${audience}&sub=alice`))
      .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'JWT' })
      .sign(realKey)]
]

t.test('16 forged tokens: 16 refused with 401 INVALID_TOKEN on a business route and on POST /v1/api-keys', async (t) => {
  t.equal(cases.length, 16, 'the figure in this test\'s name')
  const fresh = rsaKeyPair()
  const forwarded = recorder.requests.length
  let refused = 0
  for (const [label, make] of cases) {
    await t.test(label, async (t) => {
      const token = await make()
      for (const [route, res] of [['business route', await business(token)], ['POST /v1/api-keys', await registration(token, fresh)]] as const) {
        t.equal(res.status, 401, `${route}: 401`)
        t.match(res.headers['content-type'], /^application\/problem\+json/, `${route}: problem+json`)
        t.match(res.json(), { status: 401, code: 'INVALID_TOKEN' }, `${route}: INVALID_TOKEN`)
        t.match(res.headers['www-authenticate'], /^Bearer\b/, `${route}: WWW-Authenticate`)
        if (res.status === 401 && res.json().code === 'INVALID_TOKEN') refused++
      }
    })
  }
  t.equal(refused, 2 * cases.length, `${2 * cases.length} requests, ${2 * cases.length} refused`)
  t.equal(recorder.requests.length, forwarded, 'no forged token reached the upstream')
  t.equal(await gw.store.getKey(fresh.apiKey), null, 'no forged token registered a key')
  t.equal((await business(await forge())).status, 200, 'a valid token still works after the attacks')
})
