// The whole seed interface (login, key registration, signed clients) through real sockets: real gateway, real example service, on the
// embedded store and on Redis. Every failure of docs/errors.md's table for these routes, by code.
import t from 'tap'
import { createLocalJWKSet, jwtVerify } from 'jose'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signBase64 } from '../helpers/keys.js'
import { STORE_KINDS, addUser, login, registerKey, sendSigned, startStack } from '../helpers/stack.js'

const JSON_HEADERS = { 'content-type': 'application/json' }

for (const storeKind of STORE_KINDS) {
  t.test(`on the ${storeKind} store`, async (t) => {
    const gw = await startStack(t, { store: storeKind })
    await addUser(gw, 'alice')
    await addUser(gw, 'bob')
    const aliceToken = await login(gw.url, 'alice')
    const bobToken = await login(gw.url, 'bob')
    const aliceKeys = rsaKeyPair()
    const bobKeys = rsaKeyPair()
    t.equal((await registerKey(gw.url, aliceToken, aliceKeys, 'alice laptop')).status, 201)
    t.equal((await registerKey(gw.url, bobToken, bobKeys, 'bob laptop')).status, 201)

    t.test('POST /v1/auth/token', async (t) => {
      const ok = await send(gw.url, '/v1/auth/token', {
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify({ username: 'alice', password: 'correct horse battery staple' })
      })
      t.equal(ok.status, 200)
      const body = ok.json<{ token: string; tokenType: string; expiresIn: number }>()
      t.equal(body.tokenType, 'Bearer')
      t.equal(body.expiresIn, 900)
      t.equal(ok.headers['cache-control'], 'no-store')

      const jwks = (await send(gw.url, '/.well-known/jwks.json')).json<{ keys: Array<{ kid: string; alg: string }> }>()
      const { payload, protectedHeader } = await jwtVerify(body.token, createLocalJWKSet(jwks as never), { issuer: 'keygate', audience: 'keygate' })
      t.equal(payload.sub, 'alice')
      t.equal((payload.exp ?? 0) - (payload.iat ?? 0), 900)
      t.type(payload.jti, 'string')
      t.equal(protectedHeader.alg, 'EdDSA')
      t.equal(protectedHeader.kid, jwks.keys[0]?.kid)

      const cases: Array<[string, string | undefined, Record<string, string>, number, string]> = [
        ['wrong password', JSON.stringify({ username: 'alice', password: 'wrong password!' }), JSON_HEADERS, 401, 'INVALID_CREDENTIALS'],
        ['unknown user', JSON.stringify({ username: 'nobody', password: 'wrong password!' }), JSON_HEADERS, 401, 'INVALID_CREDENTIALS'],
        ['malformed JSON', '{"username": "alice",', JSON_HEADERS, 400, 'VALIDATION_FAILED'],
        ['missing password', JSON.stringify({ username: 'alice' }), JSON_HEADERS, 400, 'VALIDATION_FAILED'],
        ['password of the wrong type', JSON.stringify({ username: 'alice', password: 12345678 }), JSON_HEADERS, 400, 'VALIDATION_FAILED'],
        ['extra field', JSON.stringify({ username: 'alice', password: 'x', admin: true }), JSON_HEADERS, 400, 'VALIDATION_FAILED'],
        ['a JSON array', '[]', JSON_HEADERS, 400, 'VALIDATION_FAILED'],
        ['no body', undefined, {}, 400, 'VALIDATION_FAILED'],
        ['a form instead of JSON', 'username=alice&password=x', { 'content-type': 'application/x-www-form-urlencoded' }, 415, 'UNSUPPORTED_MEDIA_TYPE']
      ]
      for (const [name, reqBody, headers, status, code] of cases) {
        const res = await send(gw.url, '/v1/auth/token', { method: 'POST', headers, ...(reqBody !== undefined && { body: reqBody }) })
        t.equal(res.status, status, name)
        t.match(res.headers['content-type'], /^application\/problem\+json/, name)
        t.match(res.json(), { code, status, type: String, title: String, detail: String }, name)
      }
      const missing = await send(gw.url, '/v1/auth/token', { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ username: 'alice' }) })
      t.same(missing.json().errors, [{ field: 'password', message: 'is missing' }])
      // in words a user understands, not the schema's ("must NOT have fewer than 1 characters")
      const empty = await send(gw.url, '/v1/auth/token', { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ username: 'alice', password: '' }) })
      t.equal(empty.status, 400)
      t.match(empty.json(), { code: 'VALIDATION_FAILED', detail: 'Invalid request: password is empty', errors: [{ field: 'password', message: 'is empty' }] })
      const typed = await send(gw.url, '/v1/auth/token', { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ username: 'alice', password: 7 }) })
      t.same(typed.json().errors, [{ field: 'password', message: 'must be a string' }])
    })

    t.test('unknown user and wrong password answer alike', async (t) => {
      const wrong = await send(gw.url, '/v1/auth/token', {
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify({ username: 'alice', password: 'not her password' })
      })
      const unknown = await send(gw.url, '/v1/auth/token', {
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify({ username: 'zed', password: 'not her password' })
      })
      t.equal(wrong.status, unknown.status)
      t.equal(wrong.text, unknown.text)
    })

    t.test('POST /v1/api-keys', async (t) => {
      const keys = rsaKeyPair()
      const body = (over: Record<string, unknown> = {}): string =>
        JSON.stringify({ name: 'ci', publicKey: keys.publicPem, signature: signBase64(keys.privateKey, 'ci'), ...over })
      const post = async (payload: string, token: string | null) => await send(gw.url, '/v1/api-keys', {
        method: 'POST', headers: { ...JSON_HEADERS, ...(token !== null && { authorization: `Bearer ${token}` }) }, body: payload
      })
      const small = rsaKeyPair(1024)
      const cases: Array<[string, string, string | null, number, string]> = [
        ['no bearer token', body(), null, 401, 'MISSING_TOKEN'],
        ['a token that is not a JWT', body(), 'not-a-jwt', 401, 'INVALID_TOKEN'],
        ['a tampered token', body(), aliceToken.slice(0, -4) + 'AAAA', 401, 'INVALID_TOKEN'],
        ['publicKey not PEM', body({ publicKey: 'hello' }), aliceToken, 400, 'INVALID_PUBLIC_KEY'],
        ['a 1024-bit key', body({ publicKey: small.publicPem, signature: signBase64(small.privateKey, 'ci') }), aliceToken, 400, 'INVALID_PUBLIC_KEY'],
        ['signature over another name', body({ signature: signBase64(keys.privateKey, 'other') }), aliceToken, 400, 'INVALID_SIGNATURE'],
        ['signature not base64', body({ signature: 'not base64!' }), aliceToken, 400, 'INVALID_SIGNATURE'],
        ['signature by another key', body({ signature: signBase64(bobKeys.privateKey, 'ci') }), aliceToken, 400, 'INVALID_SIGNATURE'],
        ['missing name', JSON.stringify({ publicKey: keys.publicPem, signature: 'x' }), aliceToken, 400, 'VALIDATION_FAILED'],
        ['name with a newline', body({ name: 'a\nb' }), aliceToken, 400, 'VALIDATION_FAILED']
      ]
      for (const [name, payload, token, status, code] of cases) {
        const res = await post(payload, token)
        t.equal(res.status, status, name)
        t.equal(res.json().code, code, name)
      }
      const created = await post(body(), aliceToken)
      t.equal(created.status, 201)
      t.same(created.json(), { message: 'API key registered', apiKey: keys.apiKey, name: 'ci', scopes: [] })
      const again = await post(body({ name: 'ci again', signature: signBase64(keys.privateKey, 'ci again') }), aliceToken)
      t.equal(again.status, 409)
      t.equal(again.json().code, 'DUPLICATE_KEY')
      // the same key re-wrapped as PKCS#1, by another user: still the same key
      const rewrapped = await post(body({ publicKey: keys.pkcs1Pem }), bobToken)
      t.equal(rewrapped.status, 409)
      t.equal(rewrapped.json().code, 'DUPLICATE_KEY')
    })

    t.test('a PKCS#1 key registers and gets the SPKI apiKey', async (t) => {
      const keys = rsaKeyPair()
      const res = await send(gw.url, '/v1/api-keys', {
        method: 'POST',
        headers: { ...JSON_HEADERS, authorization: `Bearer ${aliceToken}` },
        body: JSON.stringify({ name: 'pkcs1', publicKey: keys.pkcs1Pem, signature: signBase64(keys.privateKey, 'pkcs1') })
      })
      t.equal(res.status, 201)
      t.equal(res.json().apiKey, keys.apiKey)
    })

    t.test('signed POST and GET /v1/clients/', async (t) => {
      const client = JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '12345678' })
      const created = await sendSigned(gw.url, { keys: aliceKeys, token: aliceToken, method: 'POST', target: '/v1/clients/', body: client })
      t.equal(created.status, 201)
      t.match(created.json(), { id: String, name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '12345678', created_at: String })

      const list = await sendSigned(gw.url, { keys: aliceKeys, token: aliceToken, method: 'GET', target: '/v1/clients/' })
      t.equal(list.status, 200)
      t.same(list.json<{ items: Array<{ id: string }> }>().items.map((c) => c.id), [created.json().id])
      t.equal(list.json().next_cursor, null)

      // Bob sees none of Alice's clients: the upstream trusts the identity the gateway set.
      const bobs = await sendSigned(gw.url, { keys: bobKeys, token: bobToken, method: 'GET', target: '/v1/clients/' })
      t.same(bobs.json().items, [])

      const duplicate = await sendSigned(gw.url, { keys: aliceKeys, token: aliceToken, method: 'POST', target: '/v1/clients/', body: client })
      t.equal(duplicate.status, 409)
      t.equal(duplicate.json().code, 'CLIENT_EXISTS')

      const invalid = await sendSigned(gw.url, {
        keys: aliceKeys,
        token: aliceToken,
        method: 'POST',
        target: '/v1/clients/',
        body: JSON.stringify({ name: '', email: 'nope', tax_id: '12ab' })
      })
      t.equal(invalid.status, 400)
      t.equal(invalid.json().code, 'VALIDATION_FAILED')
      t.same(invalid.json<{ errors: Array<{ field: string }> }>().errors.map((e) => e.field).sort(), ['email', 'name', 'tax_id'])
    })

    t.test('the query string is part of the signed target', async (t) => {
      const signed = await sendSigned(gw.url, { keys: aliceKeys, token: aliceToken, method: 'GET', target: '/v1/clients/?limit=1' })
      t.equal(signed.status, 200)
      t.equal(signed.json<{ items: unknown[] }>().items.length, 1)
      // signed without the query, sent with it
      const headers = (await import('../helpers/keys.js')).signedHeaders({ keys: aliceKeys, token: aliceToken, method: 'GET', target: '/v1/clients/' })
      const unsigned = await send(gw.url, '/v1/clients/?limit=1', { headers })
      t.equal(unsigned.status, 401)
      t.equal(unsigned.json().code, 'INVALID_SIGNATURE')
    })

    t.test('every denial of a business request, by code', async (t) => {
      const { signedHeaders } = await import('../helpers/keys.js')
      const good = (over: Partial<Parameters<typeof signedHeaders>[0]> = {}): Record<string, string> =>
        signedHeaders({ keys: aliceKeys, token: aliceToken, method: 'GET', target: '/v1/clients/', ...over })
      const without = (name: string): Record<string, string> => {
        const headers = good()
        delete headers[name]
        return headers
      }
      const now = Date.now()
      const cases: Array<[string, Record<string, string>, number, string]> = [
        ['no bearer token', without('authorization'), 401, 'MISSING_TOKEN'],
        ['a bad bearer token', { ...good(), authorization: 'Bearer abc.def.ghi' }, 401, 'INVALID_TOKEN'],
        ['no X-API-Key', without('x-api-key'), 401, 'MISSING_SIGNATURE_HEADERS'],
        ['no X-API-Timestamp', without('x-api-timestamp'), 401, 'MISSING_SIGNATURE_HEADERS'],
        ['no X-API-Signature', without('x-api-signature'), 401, 'MISSING_SIGNATURE_HEADERS'],
        ['an unknown key', { ...good(), 'x-api-key': 'f'.repeat(64) }, 401, 'UNKNOWN_API_KEY'],
        ['seconds instead of milliseconds', good({ timestamp: Math.floor(now / 1000) }), 401, 'TIMESTAMP_INVALID'],
        ['15:01 minutes old', good({ timestamp: now - 15 * 60_000 - 1000 }), 401, 'TIMESTAMP_OUT_OF_RANGE'],
        ['15:01 minutes ahead', good({ timestamp: now + 15 * 60_000 + 1000 }), 401, 'TIMESTAMP_OUT_OF_RANGE'],
        ['signed for POST, sent as GET', good({ method: 'POST' }), 401, 'INVALID_SIGNATURE'],
        ['a wrong key pair', { ...good({ keys: bobKeys }), 'x-api-key': aliceKeys.apiKey }, 401, 'INVALID_SIGNATURE'],
        ["Alice's key with Bob's token", good({ token: bobToken }), 403, 'KEY_OWNER_MISMATCH']
      ]
      for (const [name, headers, status, code] of cases) {
        const res = await send(gw.url, '/v1/clients/', { headers })
        t.equal(res.status, status, name)
        t.match(res.headers['content-type'], /^application\/problem\+json/, name)
        t.equal(res.json().code, code, name)
      }
      const stale = await send(gw.url, '/v1/clients/', { headers: good({ timestamp: now - 16 * 60_000 }) })
      t.match(stale.json(), { serverTime: Number, maxSkewMs: 900_000 })
      t.equal((await send(gw.url, '/v1/clients/', { headers: good({ timestamp: now - 14 * 60_000 - 59_000 }) })).status, 200, '14:59 minutes old is accepted')
    })

    t.test('a body changed by one byte after signing is refused', async (t) => {
      const { signedHeaders } = await import('../helpers/keys.js')
      const body = JSON.stringify({ name: 'Grace', email: 'grace@example.com', tax_id: '99999999' })
      const headers = signedHeaders({ keys: aliceKeys, token: aliceToken, method: 'POST', target: '/v1/clients/', body })
      const res = await send(gw.url, '/v1/clients/', { method: 'POST', headers: { ...headers, ...JSON_HEADERS }, body: body.replace('99999999', '99999998') })
      t.equal(res.status, 401)
      t.equal(res.json().code, 'INVALID_SIGNATURE')
    })

    t.test('routes and targets', async (t) => {
      const notFound = await send(gw.url, '/v1/nothing-here')
      t.equal(notFound.status, 404)
      t.equal(notFound.json().code, 'NOT_FOUND')
      const noSlash = await sendSigned(gw.url, { keys: aliceKeys, token: aliceToken, method: 'GET', target: '/v1/clients' })
      t.equal(noSlash.status, 404, 'the collection path ends with a slash, exactly')
      const health = await send(gw.url, '/healthz')
      t.equal(health.status, 200)
      const ready = await send(gw.url, '/readyz')
      t.same(ready.json(), { status: 'ready', store: storeKind })
    })
  })
}
