// The example service's whole interface through the gateway: transactions on the default routes,
// and a service that trusts nothing but keygate's signed identity tokens, checked with the JWKS.
import t from 'tap'
import { send } from '../../helpers/http.js'
import { rsaKeyPair } from '../../helpers/keys.js'
import { freePort } from '../../helpers/redis.js'
import { routeFile } from '../../helpers/routes.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, startStack, startUpstreamStub, testConfig } from '../../helpers/stack.js'

t.test('transactions through the default routes', async (t) => {
  const gw = await startStack(t, { store: 'redis' })
  await addUser(gw, 'alice')
  await addUser(gw, 'bob')
  const alice = { token: await login(gw.url, 'alice'), keys: rsaKeyPair() }
  const bob = { token: await login(gw.url, 'bob'), keys: rsaKeyPair() }
  await registerKey(gw.url, alice.token, alice.keys)
  await registerKey(gw.url, bob.token, bob.keys)

  const client = await sendSigned(gw.url, {
    ...alice,
    method: 'POST',
    target: '/v1/clients/',
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345' })
  })
  const clientId = client.json<{ id: string }>().id
  const body = JSON.stringify({ client_id: clientId, amount: '10.50', currency: 'EUR' })
  const created = await sendSigned(gw.url, { ...alice, method: 'POST', target: '/v1/transactions/', body })
  t.equal(created.status, 201)
  t.match(created.json(), { id: String, client_id: clientId, amount: '10.50', currency: 'EUR', created_at: String })

  const listed = await sendSigned(gw.url, { ...alice, method: 'GET', target: `/v1/transactions/?client_id=${clientId}` })
  t.equal(listed.status, 200)
  t.same(listed.json<{ items: Array<{ amount: string }> }>().items.map((i) => i.amount), ['10.50'])

  const stolen = await sendSigned(gw.url, { ...bob, method: 'POST', target: '/v1/transactions/', body })
  t.equal(stolen.status, 400, "Bob cannot book on Alice's client")
  t.same(stolen.json<{ errors: Array<{ field: string }> }>().errors.map((e) => e.field), ['client_id'])
  const bad = await sendSigned(gw.url, {
    ...alice,
    method: 'POST',
    target: '/v1/transactions/',
    body: JSON.stringify({ client_id: clientId, amount: '1e3', currency: 'usd' })
  })
  t.same(bad.json<{ errors: Array<{ field: string }> }>().errors.map((e) => e.field).sort(), ['amount', 'currency'])
})

t.test('a service that requires identity tokens, verified with the gateway\'s JWKS', async (t) => {
  const gatewayPort = await freePort()
  const strictUrl = await startUpstreamStub(t, { identityToken: { jwksUrl: `http://127.0.0.1:${gatewayPort}/.well-known/jwks.json`, audience: 'urn:clients' } })
  const file = routeFile(t, `
routes:
  - prefix: /v1/clients/
    upstream: ${strictUrl}
    auth: signed
    identityToken: { audience: "urn:clients" }
  - prefix: /v1/transactions/
    upstream: ${strictUrl}
    auth: signed
  - name: health
    path: /status
    upstream: ${strictUrl}
    auth: public
    rewrite: /healthz
`)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: strictUrl, port: gatewayPort, config: testConfig({ routesFile: file.path }) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(gw.url, token, keys)

  const created = await sendSigned(gw.url, {
    keys,
    token,
    method: 'POST',
    target: '/v1/clients/',
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345' })
  })
  t.equal(created.status, 201, 'the service accepted the token keygate sent')
  const listed = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })
  t.equal(listed.json<{ items: unknown[] }>().items.length, 1)

  const withoutToken = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/transactions/' })
  t.equal(withoutToken.status, 401, 'a route that sends no token is refused by the service')
  t.equal(withoutToken.json().code, 'MISSING_IDENTITY_TOKEN')

  const status = await send(gw.url, '/status')
  t.same(status.json(), { status: 'ok' }, 'a public route to the service\'s health page')
})
