// The key lifecycle over HTTP, on both stores: list your keys, revoke one (refused from then on,
// and never re-registered), keys that expire, and the last use recorded without delaying anyone.
import t from 'tap'
import { send, type RawResponse } from '../../../../helpers/http.js'
import { rsaKeyPair, signBase64, signedHeaders, type TestKeyPair } from '../../../../helpers/keys.js'
import { STORE_KINDS, addUser, login, registerKey, sendSigned, startStack } from '../../../../helpers/stack.js'

const json = { 'content-type': 'application/json' }
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })

async function register (url: string, token: string, keys: TestKeyPair, name: string, expiresAt?: unknown): Promise<RawResponse> {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { ...json, ...bearer(token) },
    body: JSON.stringify({ name, publicKey: keys.publicPem, signature: signBase64(keys.privateKey, name), ...(expiresAt !== undefined && { expiresAt }) })
  })
}
const list = async (url: string, token: string): Promise<RawResponse> => await send(url, '/v1/api-keys', { headers: bearer(token) })
const revoke = async (url: string, token: string, apiKey: string): Promise<RawResponse> =>
  await send(url, `/v1/api-keys/${apiKey}`, { method: 'DELETE', headers: bearer(token) })

/** a signed GET /v1/clients/ with the timestamp given */
const signedGetAt = async (url: string, keys: TestKeyPair, token: string, timestamp: number): Promise<RawResponse> =>
  await send(url, '/v1/clients/', { headers: signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/', timestamp }) })

interface Listed { apiKey: string; name: string; createdAt: string; lastUsedAt: string | null; status: string; expiresAt?: string; revokedAt?: string }

for (const kind of STORE_KINDS) {
  t.test(`${kind} store: list and revoke over HTTP`, async (t) => {
    // A clock the test can move: the signed timestamps and the expiry check both read it.
    let skewMs = 0
    const gw = await startStack(t, { store: kind, now: () => Date.now() + skewMs })
    await addUser(gw, 'alice')
    await addUser(gw, 'bob')
    const alice = await login(gw.url, 'alice')
    const bob = await login(gw.url, 'bob')

    t.same((await list(gw.url, alice)).json(), { items: [], next_cursor: null }, 'no keys yet')
    const first = rsaKeyPair()
    const second = rsaKeyPair()
    const bobs = rsaKeyPair()
    t.equal((await registerKey(gw.url, alice, first, 'first')).status, 201)
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString()
    const registered = await register(gw.url, alice, second, 'second', expiresAt)
    t.equal(registered.status, 201)
    t.same(registered.json(), { message: 'API key registered', apiKey: second.apiKey, name: 'second', expiresAt, scopes: [] },
      'the answer names the expiry (and the scopes: alice has none)')
    t.equal((await registerKey(gw.url, bob, bobs, 'bobs')).status, 201)

    const listed = await list(gw.url, alice)
    t.equal(listed.status, 200)
    const items = listed.json<{ items: Listed[] }>().items
    t.same(items.map((k) => [k.apiKey, k.name, k.status, k.lastUsedAt, k.expiresAt]),
      [[second.apiKey, 'second', 'active', null, expiresAt], [first.apiKey, 'first', 'active', null, undefined]],
      "the caller's keys only, newest first, never used yet, the expiry when set")
    t.ok(
      items.every((k) => Date.parse(k.createdAt) <= Date.now() && !('revokedAt' in k) && !('publicKey' in k) && !('owner' in k)),
      'createdAt, and nothing more'
    )

    // Last use: recorded after a request passes, without a Redis write per request.
    for (let i = 0; i < 3; i++) t.equal((await sendSigned(gw.url, { keys: first, token: alice, method: 'GET', target: '/v1/clients/' })).status, 200)
    let lastUsedAt: string | null = null
    for (let waited = 0; lastUsedAt === null && waited < 2000; waited += 20) {
      lastUsedAt = (await list(gw.url, alice)).json<{ items: Listed[] }>().items.find((k) => k.apiKey === first.apiKey)?.lastUsedAt ?? null
      if (lastUsedAt === null) await new Promise((resolve) => setTimeout(resolve, 20))
    }
    t.ok(lastUsedAt !== null && Math.abs(Date.parse(lastUsedAt) - Date.now()) < 10_000, `lastUsedAt is recorded (${lastUsedAt})`)

    // Revocation: another user's key, an unknown one and junk all get the same 404.
    for (const [label, token, apiKey] of [
      ["bob's key with alice's token", alice, bobs.apiKey],
      ['an unknown key', alice, 'f'.repeat(64)],
      ['not an apiKey', alice, 'not-a-key'],
      ["alice's key in upper case", alice, first.apiKey.toUpperCase()]
    ] as const) {
      const res = await revoke(gw.url, token, apiKey)
      t.equal(res.status, 404, label)
      t.match(res.json(), { code: 'API_KEY_NOT_FOUND', status: 404, detail: 'You have no API key with this apiKey; GET /v1/api-keys lists yours' }, label)
    }
    t.equal((await sendSigned(gw.url, { keys: bobs, token: bob, method: 'GET', target: '/v1/clients/' })).status, 200, "bob's key still works")
    t.equal((await send(gw.url, `/v1/api-keys/${first.apiKey}`, { method: 'DELETE' })).json().code, 'MISSING_TOKEN', 'no token: 401')

    const revoked = await revoke(gw.url, alice, first.apiKey)
    t.equal(revoked.status, 204, 'revoked: 204')
    t.equal(revoked.text, '', 'with no body')
    t.equal((await revoke(gw.url, alice, first.apiKey)).status, 204, 'revoking again is a success too')

    const refused = await sendSigned(gw.url, { keys: first, token: alice, method: 'GET', target: '/v1/clients/' })
    t.equal(refused.status, 401)
    t.match(refused.json(), { code: 'UNKNOWN_API_KEY', keyStatus: 'revoked', detail: /^X-API-Key was revoked at \d{4}-/ }, 'its owner is told it was revoked')
    const asBob = await sendSigned(gw.url, { keys: first, token: bob, method: 'GET', target: '/v1/clients/' })
    t.equal(asBob.status, 401)
    t.equal(asBob.json().code, 'UNKNOWN_API_KEY')
    t.notOk('keyStatus' in asBob.json(), 'anyone else hears only that it is not registered')
    t.equal(asBob.json().detail, 'X-API-Key is not a registered key; send the apiKey that POST /v1/api-keys returned')

    const after = (await list(gw.url, alice)).json<{ items: Listed[] }>().items.find((k) => k.apiKey === first.apiKey)
    t.equal(after?.status, 'revoked', 'listed as revoked')
    t.ok(after?.revokedAt !== undefined && Date.parse(after.revokedAt) <= Date.now(), 'with its revocation time')

    const again = await registerKey(gw.url, alice, first, 'first again')
    t.equal(again.status, 409, 'a revoked public key cannot be registered again')
    t.equal(again.json().code, 'DUPLICATE_KEY')
    t.equal((await registerKey(gw.url, bob, first, 'stolen')).status, 409, 'by anyone')

    // Expiry: the key works until expiresAt, then is refused like a revoked one.
    t.equal((await signedGetAt(gw.url, second, alice, Date.now() + skewMs)).status, 200)
    skewMs = 3_600_000 + 1000
    const expired = await signedGetAt(gw.url, second, alice, Date.now() + skewMs)
    t.equal(expired.status, 401, 'an expired key is refused')
    t.match(expired.json(), { code: 'UNKNOWN_API_KEY', keyStatus: 'expired', detail: `X-API-Key expired at ${expiresAt}; register a new key` })
    skewMs = 0
  })

  t.test(`${kind} store: expiresAt is validated`, async (t) => {
    const gw = await startStack(t, { store: kind })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const cases: Array<[string, unknown, string]> = [
      ['in the past', new Date(Date.now() - 1000).toISOString(), 'must be in the future'],
      ['more than 5 years ahead', new Date(Date.now() + 6 * 366 * 24 * 3600 * 1000).toISOString(), 'must be at most 5 years ahead'],
      ['without a time zone', '2031-01-01T00:00:00', 'must be an ISO 8601 date and time with a time zone, e.g. 2030-01-31T12:00:00Z'],
      ['a date only', '2031-01-01', 'must be an ISO 8601 date and time with a time zone, e.g. 2030-01-31T12:00:00Z'],
      ['not a date', 'tomorrow', 'must be an ISO 8601 date and time with a time zone, e.g. 2030-01-31T12:00:00Z'],
      ['an impossible date', '2031-02-31T00:00:00Z', 'must be an ISO 8601 date and time with a time zone, e.g. 2030-01-31T12:00:00Z']
    ]
    for (const [label, expiresAt, message] of cases) {
      const keys = rsaKeyPair()
      const res = await register(gw.url, token, keys, 'k', expiresAt)
      t.equal(res.status, 400, label)
      t.match(res.json(), { code: 'VALIDATION_FAILED', errors: [{ field: 'expiresAt', message }] }, label)
      t.equal(await gw.store.getKey(keys.apiKey), null, `${label}: nothing stored`)
    }
    for (const [label, expiresAt] of [['a number', Date.now() + 60_000], ['null', null]] as const) {
      const res = await register(gw.url, token, rsaKeyPair(), 'k', expiresAt)
      t.equal(res.status, 400, label)
      t.equal(res.json().code, 'VALIDATION_FAILED', label)
    }
    const offset = await register(gw.url, token, rsaKeyPair(), 'k', '2030-06-01T12:00:00+02:00')
    t.equal(offset.status, 201, 'an offset is accepted')
    t.equal(offset.json().expiresAt, '2030-06-01T10:00:00.000Z', 'and stored in UTC')
  })

  t.test(`${kind} store: a removed user's token is refused: it signs, registers and lists nothing`, async (t) => {
    const gw = await startStack(t, { store: kind })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, keys)).status, 201)
    t.same((await gw.store.removeUser('alice')).revokedKeys, [keys.apiKey])
    const refused = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
    t.equal(refused.status, 401)
    t.equal(refused.json().code, 'INVALID_TOKEN', 'the removed user\'s token is refused (and the key revoked)')
    const fresh = rsaKeyPair()
    const registration = await registerKey(gw.url, token, fresh)
    t.equal(registration.status, 401)
    t.equal(registration.json().code, 'INVALID_TOKEN')
    t.equal(await gw.store.getKey(fresh.apiKey), null, 'nothing registered')
    const listed = await list(gw.url, token)
    t.equal(listed.status, 401)
    t.equal(listed.json().code, 'INVALID_TOKEN', 'nor listed')
  })
}
