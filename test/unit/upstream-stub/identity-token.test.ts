import t from 'tap'
import type { Test } from 'tap'
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { calculateJwkThumbprint, exportJWK, SignJWT, UnsecuredJWT, type JWTPayload } from 'jose'
import { as, build, COLLECTION, expectProblem, TRANSACTIONS, validClient, validTransaction } from '../../helpers/upstream-stub.js'
import {
  identityTokenFromEnv,
  IDENTITY_TOKEN_TYPE,
  type IdentityTokenOptions,
} from '../../../upstream-stub/src/identity-token.js'
import type { ProblemBody } from '../../../upstream-stub/src/problem.js'
import { startUpstream } from '../../../upstream-stub/src/server.js'
import type { Client } from '../../../upstream-stub/src/store.js'

const HEADER = 'x-keygate-identity'
const AUDIENCE = 'http://127.0.0.1:8081'

type Algorithm = 'EdDSA' | 'ES256'

interface SigningKey {
  privateKey: KeyObject
  kid: string
  alg: Algorithm
}

async function signingKey (alg: Algorithm = 'EdDSA'): Promise<SigningKey & { jwk: Record<string, unknown> }> {
  const { privateKey, publicKey } =
    alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const jwk = await exportJWK(publicKey)
  const kid = await calculateJwkThumbprint(jwk)
  return { privateKey, kid, alg, jwk: { ...jwk, kid, alg, use: 'sig' } }
}

interface SignOptions {
  /** Claims merged over keygate's defaults; an undefined value removes the claim. */
  claims?: Record<string, unknown>
  /** Header fields merged over `{ alg, kid, typ }`; undefined removes one. */
  header?: Record<string, unknown>
  /** Sign with this key instead of the published one. */
  key?: SigningKey
}

/**
 * Plays keygate: one signing key, its public half served as a JWKS over a real
 * socket, tokens signed the way the gateway signs them.
 */
interface FakeGateway {
  jwksUrl: string
  key: SigningKey
  /** How many times the JWKS was fetched. */
  fetches: number
  /** Make the JWKS endpoint answer with something else from now on. */
  breakWith: (status: number, body: string) => void
  sign: (options?: SignOptions) => Promise<string>
}

async function fakeGateway (t: Test, alg: Algorithm = 'EdDSA'): Promise<FakeGateway> {
  const key = await signingKey(alg)
  let response = { status: 200, body: JSON.stringify({ keys: [key.jwk] }) }
  const gateway: FakeGateway = {
    jwksUrl: '',
    key,
    fetches: 0,
    breakWith: (status, body) => {
      response = { status, body }
    },
    sign: async ({ claims = {}, header = {}, key: signWith = key } = {}) => {
      const now = Math.floor(Date.now() / 1000)
      const payload = withoutUndefined({
        iss: 'keygate',
        aud: AUDIENCE,
        sub: 'alice',
        api_key: 'ak_test_123',
        iat: now,
        exp: now + 60,
        ...claims,
      })
      const protectedHeader = withoutUndefined({ alg: signWith.alg, kid: signWith.kid, typ: IDENTITY_TOKEN_TYPE, ...header })
      return new SignJWT(payload as JWTPayload)
        .setProtectedHeader(protectedHeader as { alg: string })
        .sign(signWith.privateKey)
    },
  }
  const server = createServer((req, res) => {
    if (req.url !== '/.well-known/jwks.json') {
      res.writeHead(404).end()
      return
    }
    gateway.fetches += 1
    res.writeHead(response.status, { 'content-type': 'application/json' }).end(response.body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        // jose's fetch keeps the connection alive; close would wait for it.
        server.closeAllConnections()
        server.close(() => resolve())
      })
  )
  gateway.jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`
  return gateway
}

function withoutUndefined (record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined))
}

/** An app that requires tokens from this gateway. */
async function guarded (t: Test, gateway: FakeGateway, options: Partial<IdentityTokenOptions> = {}): Promise<FastifyInstance> {
  return build(t, { identityToken: { jwksUrl: gateway.jwksUrl, ...options } })
}

/** GET /v1/clients/ as `user`, with this token in the identity header (none when undefined). */
async function listWith (app: FastifyInstance, token: string | undefined, user = 'alice', header = HEADER) {
  const headers = { ...as(user), ...(token === undefined ? {} : { [header]: token }) }
  return app.inject({ method: 'GET', url: COLLECTION, headers })
}

t.test('a valid token passes', async (t) => {
  for (const alg of ['EdDSA', 'ES256'] as const) {
    t.test(alg, async (t) => {
      const gateway = await fakeGateway(t, alg)
      const app = await guarded(t, gateway)
      const token = await gateway.sign()

      const listed = await listWith(app, token)
      t.equal(listed.statusCode, 200)

      const client = await app.inject({
        method: 'POST',
        url: COLLECTION,
        headers: { ...as('alice'), [HEADER]: token },
        payload: validClient(),
      })
      t.equal(client.statusCode, 201)
      const transaction = await app.inject({
        method: 'POST',
        url: TRANSACTIONS,
        headers: { ...as('alice'), [HEADER]: token },
        payload: validTransaction(client.json<Client>().id),
      })
      t.equal(transaction.statusCode, 201)
      t.equal(gateway.fetches, 1, 'the key set is fetched once and cached')
    })
  }
})

t.test('without a token: 401 MISSING_IDENTITY_TOKEN, before anything else', async (t) => {
  const gateway = await fakeGateway(t)
  const app = await guarded(t, gateway)
  const cases: Array<[string, InjectOptions]> = [
    ['no header', { method: 'GET', url: COLLECTION, headers: as('alice') }],
    ['empty header', { method: 'GET', url: COLLECTION, headers: { ...as('alice'), [HEADER]: '' } }],
    ['blank header', { method: 'GET', url: COLLECTION, headers: { ...as('alice'), [HEADER]: '  ' } }],
    // The token is checked before x-gateway-user and before the body is parsed.
    ['and no user either', { method: 'GET', url: COLLECTION }],
    [
      'with a malformed body',
      { method: 'POST', url: TRANSACTIONS, headers: { ...as('alice'), 'content-type': 'application/json' }, payload: '{oops' },
    ],
    ['on an unknown route under a resource', { method: 'DELETE', url: `${COLLECTION}some-id`, headers: as('alice') }],
    ['on a transaction', { method: 'GET', url: `${TRANSACTIONS}some-id`, headers: as('alice') }],
  ]
  for (const [label, request] of cases) {
    t.test(label, async (t) => {
      const res = await app.inject(request)
      const problem = expectProblem(t, res, 401, 'MISSING_IDENTITY_TOKEN')
      t.match(problem.detail, HEADER)
    })
  }
  t.test('routes outside /v1 resources are not guarded', async (t) => {
    for (const url of ['/', '/v1', '/nowhere']) {
      expectProblem(t, await app.inject({ method: 'GET', url }), 404, 'NOT_FOUND')
    }
  })
  t.equal(gateway.fetches, 0, 'no key set fetch for a request without a token')
})

t.test('invalid tokens: 401 INVALID_IDENTITY_TOKEN', async (t) => {
  const gateway = await fakeGateway(t)
  const app = await guarded(t, gateway)
  const other = await signingKey('EdDSA')
  const now = Math.floor(Date.now() / 1000)
  const valid = await gateway.sign()
  const [head, payload, signature] = valid.split('.')
  const forgedPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload ?? '', 'base64url').toString()), sub: 'bob' })).toString('base64url')

  const cases: Array<[string, () => Promise<string>]> = [
    ['expired', () => gateway.sign({ claims: { iat: now - 120, exp: now - 60 } })],
    ['wrong issuer', () => gateway.sign({ claims: { iss: 'not-keygate' } })],
    ['no issuer', () => gateway.sign({ claims: { iss: undefined } })],
    ['no exp', () => gateway.sign({ claims: { exp: undefined } })],
    ['no iat', () => gateway.sign({ claims: { iat: undefined } })],
    ['no sub', () => gateway.sign({ claims: { sub: undefined } })],
    ['not yet valid (nbf)', () => gateway.sign({ claims: { nbf: now + 3600 } })],
    ['signed by another key with the published kid', () => gateway.sign({ key: { ...other, kid: gateway.key.kid } })],
    ['signed by another key with its own kid', () => gateway.sign({ key: other })],
    ['signed by another key without a kid', () => gateway.sign({ key: other, header: { kid: undefined } })],
    ['a bearer token (typ JWT), not an identity token', () => gateway.sign({ header: { typ: 'JWT' } })],
    ['no typ', () => gateway.sign({ header: { typ: undefined } })],
    [
      'HS256 with the public key as secret',
      () =>
        new SignJWT({ iss: 'keygate', sub: 'alice', iat: now, exp: now + 60 })
          .setProtectedHeader({ alg: 'HS256', typ: IDENTITY_TOKEN_TYPE, kid: gateway.key.kid })
          .sign(new TextEncoder().encode(JSON.stringify(gateway.key))),
    ],
    ['alg none', async () => new UnsecuredJWT({ iss: 'keygate', sub: 'alice', iat: now, exp: now + 60 }).encode()],
    ['payload changed after signing', async () => `${head}.${forgedPayload}.${signature}`],
    ['signature cut', async () => `${head}.${payload}.`],
    ['garbage', async () => 'not-a-jwt'],
    ['three garbage parts', async () => 'a.b.c'],
    ['two tokens', async () => `${valid}, ${valid}`],
  ]
  for (const [label, make] of cases) {
    t.test(label, async (t) => {
      const res = await listWith(app, await make())
      const problem = expectProblem(t, res, 401, 'INVALID_IDENTITY_TOKEN')
      t.same(Object.keys(problem).sort(), ['code', 'detail', 'status', 'title', 'type'], 'no hints beyond the code')
    })
  }

  t.test('an expired token says so', async (t) => {
    const res = await listWith(app, await gateway.sign({ claims: { iat: now - 120, exp: now - 60 } }))
    t.match(expectProblem(t, res, 401, 'INVALID_IDENTITY_TOKEN').detail, /expired/)
  })
})

t.test('the token must be for the user in x-gateway-user', async (t) => {
  const gateway = await fakeGateway(t)
  const app = await guarded(t, gateway)
  const alices = await gateway.sign({ claims: { sub: 'alice' } })

  t.test('another user', async (t) => {
    const res = await listWith(app, alices, 'bob')
    t.match(expectProblem(t, res, 401, 'INVALID_IDENTITY_TOKEN').detail, /another user/)
  })
  t.test('same name, different case or spacing', async (t) => {
    expectProblem(t, await listWith(app, alices, 'Alice'), 401, 'INVALID_IDENTITY_TOKEN')
    expectProblem(t, await listWith(app, alices, 'alice '), 401, 'INVALID_IDENTITY_TOKEN')
  })
  t.test('no x-gateway-user at all', async (t) => {
    const res = await app.inject({ method: 'GET', url: COLLECTION, headers: { [HEADER]: alices } })
    expectProblem(t, res, 401, 'MISSING_IDENTITY')
  })
  t.test('the right user', async (t) => {
    t.equal((await listWith(app, alices, 'alice')).statusCode, 200)
  })
})

t.test('issuer and audience', async (t) => {
  const gateway = await fakeGateway(t)

  t.test('without an audience setting, aud is not checked', async (t) => {
    const app = await guarded(t, gateway)
    for (const aud of [AUDIENCE, 'http://elsewhere.example', undefined]) {
      t.equal((await listWith(app, await gateway.sign({ claims: { aud } }))).statusCode, 200, `aud ${String(aud)}`)
    }
  })

  t.test('with an audience setting, aud must name it', async (t) => {
    const app = await guarded(t, gateway, { audience: AUDIENCE })
    t.equal((await listWith(app, await gateway.sign())).statusCode, 200, 'the configured audience')
    t.equal((await listWith(app, await gateway.sign({ claims: { aud: ['http://other.example', AUDIENCE] } }))).statusCode, 200, 'among several')
    for (const aud of ['http://127.0.0.1:8082', 'http://other.example', `${AUDIENCE}/`, undefined]) {
      const res = await listWith(app, await gateway.sign({ claims: { aud } }))
      expectProblem(t, res, 401, 'INVALID_IDENTITY_TOKEN')
    }
  })

  t.test('a configured issuer replaces "keygate"', async (t) => {
    const app = await guarded(t, gateway, { issuer: 'https://gw.example' })
    t.equal((await listWith(app, await gateway.sign({ claims: { iss: 'https://gw.example' } }))).statusCode, 200)
    expectProblem(t, await listWith(app, await gateway.sign()), 401, 'INVALID_IDENTITY_TOKEN')
  })
})

t.test('the header name is configurable', async (t) => {
  const gateway = await fakeGateway(t)
  const app = await guarded(t, gateway, { header: 'X-Upstream-Proof' })
  const token = await gateway.sign()
  t.equal((await listWith(app, token, 'alice', 'x-upstream-proof')).statusCode, 200)
  const res = await listWith(app, token, 'alice', HEADER)
  t.match(expectProblem(t, res, 401, 'MISSING_IDENTITY_TOKEN').detail, /x-upstream-proof/)
})

t.test('not configured: no token needed, and one sent is ignored', async (t) => {
  const app = await build(t)
  t.equal((await listWith(app, undefined)).statusCode, 200)
  t.equal((await listWith(app, 'not-a-jwt')).statusCode, 200)
  expectProblem(t, await listWith(app, undefined, ''), 401, 'MISSING_IDENTITY')
})

t.test('key set unavailable: 503 IDENTITY_KEYS_UNAVAILABLE, not a token error', async (t) => {
  const cases: Array<[string, number, string]> = [
    ['server error', 500, '{"error":"boom"}'],
    ['not found', 404, 'nope'],
    ['not JSON', 200, '<html>'],
    ['JSON but not a key set', 200, '{"keys": "none"}'],
  ]
  for (const [label, status, body] of cases) {
    t.test(label, async (t) => {
      const gateway = await fakeGateway(t)
      gateway.breakWith(status, body)
      const app = await guarded(t, gateway)
      const res = await listWith(app, await gateway.sign())
      const problem = expectProblem(t, res, 503, 'IDENTITY_KEYS_UNAVAILABLE')
      t.notMatch(res.body, /127\.0\.0\.1|jwks/, 'the key set URL is not revealed')
      t.same(Object.keys(problem).sort(), ['code', 'detail', 'status', 'title', 'type'])
    })
  }

  t.test('nothing listening', async (t) => {
    const gateway = await fakeGateway(t)
    const token = await gateway.sign()
    const dead = createServer()
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve))
    const port = (dead.address() as AddressInfo).port
    await new Promise<void>((resolve) => dead.close(() => resolve()))
    const app = await build(t, { identityToken: { jwksUrl: `http://127.0.0.1:${port}/.well-known/jwks.json` } })
    expectProblem(t, await listWith(app, token), 503, 'IDENTITY_KEYS_UNAVAILABLE')
  })

  t.test('garbage is still a 401 when the key set is down: it is never fetched', async (t) => {
    const gateway = await fakeGateway(t)
    gateway.breakWith(500, '')
    const app = await guarded(t, gateway)
    expectProblem(t, await listWith(app, 'not-a-jwt'), 401, 'INVALID_IDENTITY_TOKEN')
    t.equal(gateway.fetches, 0)
  })
})

t.test('why a token was refused goes to the log, not to the caller', async (t) => {
  const gateway = await fakeGateway(t)
  const lines: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString())
      done()
    },
  })
  const app = await build(t, { logger: { level: 'info', stream }, identityToken: { jwksUrl: gateway.jwksUrl } })
  t.ok(lines.some((line) => line.includes('identity tokens are required')), 'startup says verification is on')

  const res = await listWith(app, await gateway.sign({ claims: { iss: 'evil' } }))
  expectProblem(t, res, 401, 'INVALID_IDENTITY_TOKEN')
  t.notMatch(res.body, /iss/)
  const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => entry['code'] === 'INVALID_IDENTITY_TOKEN')
  t.match(logged?.['reason'], /"iss"/)
})

t.test('bad settings fail the build, not a request', async (t) => {
  const cases: Array<[string, IdentityTokenOptions, RegExp]> = [
    ['a relative URL', { jwksUrl: '/.well-known/jwks.json' }, /JWKS URL/],
    ['not a URL', { jwksUrl: 'not a url' }, /JWKS URL/],
    ['not http', { jwksUrl: 'file:///etc/jwks.json' }, /JWKS URL/],
    ['a header name with a space', { jwksUrl: 'http://gw/jwks', header: 'x identity' }, /header/],
    ['the user header itself', { jwksUrl: 'http://gw/jwks', header: 'X-Gateway-User' }, /x-gateway-user/],
    ['an empty issuer', { jwksUrl: 'http://gw/jwks', issuer: '' }, /issuer/],
    ['an empty audience', { jwksUrl: 'http://gw/jwks', audience: '' }, /audience/],
  ]
  for (const [label, identityToken, message] of cases) {
    t.test(label, async (t) => {
      await t.rejects(build(t, { identityToken }), message)
    })
  }
})

t.test('settings from the environment', async (t) => {
  t.equal(identityTokenFromEnv({}), undefined, 'nothing set: no verification')
  t.equal(identityTokenFromEnv({ UPSTREAM_JWKS_URL: '' }), undefined, 'empty counts as unset')
  t.same(identityTokenFromEnv({ UPSTREAM_JWKS_URL: 'http://keygate:8080/.well-known/jwks.json' }), {
    jwksUrl: 'http://keygate:8080/.well-known/jwks.json',
    header: undefined,
    issuer: undefined,
    audience: undefined,
  })
  t.same(
    identityTokenFromEnv({
      UPSTREAM_JWKS_URL: 'http://keygate:8080/.well-known/jwks.json',
      UPSTREAM_IDENTITY_HEADER: 'x-proof',
      UPSTREAM_IDENTITY_ISSUER: 'gw',
      UPSTREAM_IDENTITY_AUDIENCE: 'http://upstream:8081',
    }),
    { jwksUrl: 'http://keygate:8080/.well-known/jwks.json', header: 'x-proof', issuer: 'gw', audience: 'http://upstream:8081' }
  )
  t.throws(
    () => identityTokenFromEnv({ UPSTREAM_IDENTITY_AUDIENCE: 'http://upstream:8081' }),
    /UPSTREAM_IDENTITY_AUDIENCE set without UPSTREAM_JWKS_URL/,
    'a setting without the URL would leave verification silently off'
  )
})

t.test('startUpstream passes the setting on, over a real socket', async (t) => {
  const gateway = await fakeGateway(t)
  const upstream = await startUpstream({
    port: 0,
    host: '127.0.0.1',
    logger: false,
    identityToken: { jwksUrl: gateway.jwksUrl, audience: AUDIENCE },
  })
  t.teardown(() => upstream.close())
  const url = `${upstream.url}/v1/clients/`

  const without = await fetch(url, { headers: as('alice') })
  t.equal(without.status, 401)
  t.equal(((await without.json()) as ProblemBody).code, 'MISSING_IDENTITY_TOKEN')

  const withToken = await fetch(url, { headers: { ...as('alice'), [HEADER]: await gateway.sign() } })
  t.equal(withToken.status, 200)
  t.same(await withToken.json(), { items: [], next_cursor: null })
})
