// Many gateways on one Redis act as one: a token from one works at another, a key registered at
// one signs requests at another, and a duplicate is a duplicate wherever it is registered.
import t from 'tap'
import { rsaKeyPair, signBase64 } from '../../../helpers/keys.js'
import { send } from '../../../helpers/http.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, startUpstreamStub } from '../../../helpers/stack.js'

t.test('two gateways on one Redis', async (t) => {
  const redisPrefix = uniquePrefix('cluster')
  const redisUrl = await testRedisUrl()
  t.teardown(async () => { await deletePrefix(redisUrl, redisPrefix) })
  const upstreamUrl = await startUpstreamStub(t)
  const a = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl })
  const b = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl })
  t.not(a.url, b.url)
  t.same(a.app.keygate.tokens.jwks, b.app.keygate.tokens.jwks, 'both publish the one shared signing key')

  await addUser(a, 'alice')
  const tokenFromA = await login(a.url, 'alice')
  const tokenFromB = await login(b.url, 'alice')

  const keys = rsaKeyPair()
  t.equal((await registerKey(b.url, tokenFromA, keys)).status, 201, "A's token registers a key at B")

  const created = await sendSigned(a.url, {
    keys,
    token: tokenFromB,
    method: 'POST',
    target: '/v1/clients/',
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345' })
  })
  t.equal(created.status, 201, "a key registered at B and B's token sign a request at A")
  const listed = await sendSigned(b.url, { keys, token: tokenFromA, method: 'GET', target: '/v1/clients/' })
  t.equal(listed.status, 200)

  const duplicate = await registerKey(a.url, tokenFromA, keys, 'again')
  t.equal(duplicate.status, 409, 'a key registered at B is a duplicate at A')
  t.equal(duplicate.json().code, 'DUPLICATE_KEY')

  // Two concurrent registrations of one new key, one at each gateway: exactly one wins.
  for (let round = 0; round < 5; round++) {
    const fresh = rsaKeyPair()
    const body = JSON.stringify({ name: 'race', publicKey: fresh.publicPem, signature: signBase64(fresh.privateKey, 'race') })
    const post = async (url: string, token: string) => await send(url, '/v1/api-keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body
    })
    const results = await Promise.all([post(a.url, tokenFromA), post(b.url, tokenFromB), post(a.url, tokenFromB), post(b.url, tokenFromA)])
    t.same(results.map((r) => r.status).sort(), [201, 409, 409, 409], `round ${round}: exactly one registration wins`)
  }
})
