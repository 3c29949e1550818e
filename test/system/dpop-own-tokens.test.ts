// keygate's own tokens bound to a DPoP key (RFC 9449, issue 43 point 3): POST /v1/auth/token with
// a proof answers a token carrying cnf.jkt (tokenType DPoP); every use then needs a proof by that
// key. Shown against a running keygate on loopback with a recording upstream, through
// @keygate/client (ES256 and EdDSA, the nonce retry) and through panva's `dpop`, an independent
// client; a stolen bound token (as Bearer, with no proof, with another key's proof) is refused and
// never reaches the upstream.
import { generateKeyPairSync } from 'node:crypto'
import { test } from 'tap'
import { calculateThumbprint, generateKeyPair as panvaKeyPair, generateProof } from 'dpop'
import { decodeJwt } from 'jose'
import { createClient, dpopProof, dpopThumbprint, generateDpopKey, login, registerKey, type FetchFunction } from '#client'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, PASSWORD, startTestGateway } from '../helpers/stack.js'
import { startRecorder } from '../helpers/recorder.js'
import { send } from '../helpers/http.js'

const ROUTES = `routes:
  - prefix: /v1/clients/
    name: clients
    upstream: UPSTREAM
    auth: signed
  - path: /v1/me
    name: me
    upstream: UPSTREAM
    auth: bearer
`

/** an Ed25519 signing key for the signed route, as PEM */
const signingKey = (): string => generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()

const jktOf = (token: string): unknown => (decodeJwt(token).cnf as { jkt?: unknown } | undefined)?.jkt

test('keygate\'s own DPoP-bound tokens, against a running keygate', async (t) => {
  const upstream = await startRecorder(t)
  // behind a trusted balancer (the test's own requests come from 127.0.0.1): the URL is the one it forwards
  const gateway = await startTestGateway(t, {
    store: 'redis',
    upstreamUrl: upstream.url,
    routes: (u) => routesFromYaml(ROUTES, u),
    config: { clientAddress: { trustedProxies: ['127.0.0.1/32'], header: 'x-forwarded-for' } }
  })
  await addUser(gateway, 'ada')
  const baseUrl = gateway.url
  const reached = (): number => upstream.requests.length

  await t.test('@keygate/client: a DPoP login, a key registered and requests with proofs', async (t) => {
    const dpop = await generateDpopKey()
    t.equal((dpop.privateKey as { extractable: boolean }).extractable, false, 'the DPoP private key is not extractable')
    const { token, tokenType } = await login({ baseUrl, username: 'ada', password: PASSWORD, dpop })
    t.equal(tokenType, 'DPoP', 'the answer says DPoP')
    t.equal(jktOf(token), await dpopThumbprint(dpop), 'the token carries cnf.jkt: the key\'s RFC 7638 thumbprint')

    const privateKey = signingKey()
    const registered = await registerKey({ baseUrl, token, name: 'laptop', privateKey, dpop })
    t.match(registered.apiKey, /^[0-9a-f]{64}$/, 'POST /v1/api-keys with the bound token and its proof: registered')

    const client = createClient({ baseUrl, token, privateKey, dpop })
    const before = reached()
    const listed = await client.send('GET', '/v1/clients/?limit=5')
    t.equal(listed.response.status, 200, 'a signed route: token, proof and signature: forwarded')
    t.match(listed.headers.authorization, /^DPoP /, 'sent with the DPoP scheme')
    const me = await client.fetch('GET', '/v1/me')
    t.equal(me.status, 200, 'a bearer route with the proof: forwarded')
    t.equal(reached(), before + 2, 'both reached the upstream')
    const seen = upstream.requests.at(-1)
    t.equal(seen?.headers['x-gateway-dpop-jkt'], await dpopThumbprint(dpop), 'the upstream learns the key thumbprint')
    t.equal(seen?.headers.dpop, undefined, 'and never sees the proof')
    t.equal(seen?.headers.authorization, undefined, 'nor the token')

    const ed = await generateDpopKey('EdDSA')
    const edLogin = await login({ baseUrl, username: 'ada', password: PASSWORD, dpop: ed })
    t.equal(jktOf(edLogin.token), await dpopThumbprint(ed), 'EdDSA: bound too')
    t.equal((await createClient({ baseUrl, token: edLogin.token, privateKey, dpop: ed }).fetch('GET', '/v1/me')).status, 200,
      'and used with EdDSA proofs')

    await t.test('the same token stolen: refused, never forwarded', async (t) => {
      const thief = await generateDpopKey()
      const meUrl = `${baseUrl}/v1/me`
      const start = reached()
      const cases: Array<[string, Record<string, string>, string]> = [
        ['as Bearer', { authorization: `Bearer ${token}` }, 'DPOP_REQUIRED'],
        ['with the DPoP scheme and no proof', { authorization: `DPoP ${token}` }, 'INVALID_DPOP_PROOF'],
        ['with another key\'s proof', {
          authorization: `DPoP ${token}`, dpop: await dpopProof({ keyPair: thief, method: 'GET', url: meUrl, accessToken: token })
        }, 'INVALID_DPOP_PROOF'],
        ['with the owner\'s proof made for another URL', {
          authorization: `DPoP ${token}`, dpop: await dpopProof({ keyPair: dpop, method: 'GET', url: `${baseUrl}/v1/other`, accessToken: token })
        }, 'INVALID_DPOP_PROOF']
      ]
      for (const [name, headers, code] of cases) {
        const res = await send(baseUrl, '/v1/me', { method: 'GET', headers })
        t.equal(res.status, 401, `${name}: 401`)
        t.equal(res.json<{ code: string }>().code, code, `${name}: ${code}`)
      }
      const owner = await dpopProof({ keyPair: dpop, method: 'GET', url: meUrl, accessToken: token })
      t.equal((await send(baseUrl, '/v1/me', { method: 'GET', headers: { authorization: `DPoP ${token}`, dpop: owner } })).status, 200,
        'the owner\'s own proof: 200')
      t.equal((await send(baseUrl, '/v1/me', { method: 'GET', headers: { authorization: `DPoP ${token}`, dpop: owner } })).status, 401,
        'that proof again (replayed): 401')
      const signed = createClient({ baseUrl, token, privateKey })
      t.equal((await signed.fetch('GET', '/v1/clients/')).status, 401, 'a signed route: the key\'s signature without the DPoP proof: 401')
      const registration = await send(baseUrl, '/v1/api-keys', {
        method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"name":"x","publicKey":"x","signature":"x"}'
      })
      t.equal(registration.status, 401, 'POST /v1/api-keys with the bound token as Bearer: 401')
      t.equal(reached(), start + 1, 'nothing refused reached the upstream (the one request let in did)')
    })
  })

  await t.test('POST /v1/auth/token: without a proof as before; a bad proof is 400 invalid_dpop_proof', async (t) => {
    const tokenUrl = `${baseUrl}/v1/auth/token`
    const body = JSON.stringify({ username: 'ada', password: PASSWORD })
    const post = async (headers: Record<string, string>) =>
      await send(baseUrl, '/v1/auth/token', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
    const plain = await post({})
    t.equal(plain.status, 200)
    t.equal(plain.json<{ tokenType: string }>().tokenType, 'Bearer', 'no proof: a Bearer token')
    t.equal(jktOf(plain.json<{ token: string }>().token), undefined, 'without cnf')

    const key = await generateDpopKey()
    const proof = await dpopProof({ keyPair: key, method: 'POST', url: tokenUrl })
    t.equal((await post({ dpop: proof })).status, 200, 'a good proof: 200')
    const cases: Array<[string, Record<string, string>]> = [
      ['the same proof again', { dpop: proof }],
      ['a proof for another path', { dpop: await dpopProof({ keyPair: key, method: 'POST', url: `${baseUrl}/v1/api-keys` }) }],
      ['a proof for another method', { dpop: await dpopProof({ keyPair: key, method: 'GET', url: tokenUrl }) }],
      ['a proof made an hour ago', { dpop: await dpopProof({ keyPair: key, method: 'POST', url: tokenUrl, iat: Math.floor(Date.now() / 1000) - 3600 }) }],
      ['not a JWT', { dpop: 'not-a-proof' }]
    ]
    const balanced = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com' }
    const asAddressed = await post({ ...balanced, dpop: await dpopProof({ keyPair: key, method: 'POST', url: 'https://api.example.com/v1/auth/token' }) })
    t.equal(asAddressed.json<{ tokenType: string }>().tokenType, 'DPoP', 'behind the balancer: htu is the URL the client addressed')
    cases.push(['behind the balancer, a proof for the gateway\'s own URL',
      { ...balanced, dpop: await dpopProof({ keyPair: key, method: 'POST', url: tokenUrl }) }])
    for (const [name, headers] of cases) {
      const res = await post(headers)
      t.equal(res.status, 400, `${name}: 400`)
      t.match(res.json(), { code: 'INVALID_DPOP_PROOF', error: 'invalid_dpop_proof' }, `${name}: INVALID_DPOP_PROOF, error invalid_dpop_proof`)
    }
  })

  await t.test('panva\'s dpop, an independent client, against POST /v1/auth/token and a bearer route', async (t) => {
    for (const alg of ['ES256', 'Ed25519'] as const) {
      const keyPair = await panvaKeyPair(alg)
      const res = await send(baseUrl, '/v1/auth/token', {
        method: 'POST',
        headers: { 'content-type': 'application/json', dpop: await generateProof(keyPair, `${baseUrl}/v1/auth/token`, 'POST') },
        body: JSON.stringify({ username: 'ada', password: PASSWORD })
      })
      t.equal(res.status, 200, `${alg}: logged in`)
      const { token, tokenType } = res.json<{ token: string, tokenType: string }>()
      t.equal(tokenType, 'DPoP')
      t.equal(jktOf(token), await calculateThumbprint(keyPair.publicKey), `${alg}: cnf.jkt is the thumbprint panva's dpop computes`)
      const used = await send(baseUrl, '/v1/me?x=1', {
        method: 'GET', headers: { authorization: `DPoP ${token}`, dpop: await generateProof(keyPair, `${baseUrl}/v1/me`, 'GET', undefined, token) }
      })
      t.equal(used.status, 200, `${alg}: the token used with its proof`)
    }
  })
})

test('server nonces: the token endpoint asks for one (400 use_dpop_nonce), and the client retries once with it', async (t) => {
  const upstream = await startRecorder(t)
  const gateway = await startTestGateway(t, {
    store: 'memory', upstreamUrl: upstream.url, routes: (u) => routesFromYaml(ROUTES, u), config: { dpop: { nonceSeconds: 300 } }
  })
  await addUser(gateway, 'ada')
  const baseUrl = gateway.url
  const key = await generateDpopKey()
  const raw = await send(baseUrl, '/v1/auth/token', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      dpop: await dpopProof({ keyPair: await generateDpopKey(), method: 'POST', url: `${baseUrl}/v1/auth/token` })
    },
    body: JSON.stringify({ username: 'ada', password: PASSWORD })
  })
  t.equal(raw.status, 400, 'a proof without the nonce: 400')
  t.match(raw.json(), { code: 'USE_DPOP_NONCE', error: 'use_dpop_nonce' })
  t.match(raw.headers['dpop-nonce'], /^[A-Za-z0-9_-]{20,}$/, 'with the nonce in DPoP-Nonce')

  const calls: string[] = []
  const counting: FetchFunction = async (input, init) => {
    const response = await fetch(input, init)
    calls.push(`${response.status}`)
    return response
  }
  const { token } = await login({ baseUrl, username: 'ada', password: PASSWORD, dpop: key, fetch: counting })
  t.same(calls, ['400', '200'], 'login: refused for the nonce, sent again once with it')
  t.equal(jktOf(token), await dpopThumbprint(key))
  const client = createClient({ baseUrl, token, privateKey: signingKey(), dpop: key, fetch: counting })
  t.equal((await client.fetch('GET', '/v1/me')).status, 200, 'a request with the bound token: 200')
  t.same(calls, ['400', '200', '200'], 'the nonce remembered for the origin: no second refusal')

  // the same keys as another pair object: a client that has not met this origin's nonce yet
  calls.length = 0
  const fresh = createClient({ baseUrl, token, privateKey: signingKey(), dpop: { privateKey: key.privateKey, publicKey: key.publicKey }, fetch: counting })
  t.equal((await fresh.fetch('GET', '/v1/me')).status, 200, 'a resource request without the nonce: answered after one retry')
  t.same(calls, ['401', '200'], 'refused with 401 use_dpop_nonce, sent again once with the nonce')
  t.equal(upstream.requests.length, 2, 'only the requests let in reached the upstream')
})
