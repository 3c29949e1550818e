// Tokens do not outlive the user they were issued to: against two running gateways on one Redis,
// a token of a user removed and created again under the same name (another person, even with the
// same password) acts for nobody, and a password change ends the tokens issued before it, on
// signed and bearer routes and on key registration, at the other gateway within a second. A change
// of scopes alone ends no token.
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { route } from '../../gateway/src/proxy/route.js'
import { admin, startAdminGateway } from '../helpers/admin.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { login, PASSWORD, registerKey, sendSigned, startTestGateway } from '../helpers/stack.js'
import { uniquePrefix } from '../helpers/redis.js'

const DEFAULTS = { bodyLimit: 1024 * 1024, timeoutMs: 30_000 }

t.test('a token acts only for the incarnation of its user it was issued to, and only until a password change', async (t) => {
  const upstream = await startRecorder(t)
  const routes = [
    route({ prefix: '/v1/clients/', upstream: upstream.url, auth: 'signed', methods: ['GET', 'POST'] }, DEFAULTS),
    route({ prefix: '/reports/', upstream: upstream.url, auth: 'bearer', methods: ['GET'] }, DEFAULTS),
    route({ name: 'scoped', prefix: '/scoped/', upstream: upstream.url, auth: 'bearer', methods: ['GET'], scopes: ['reports:read'] }, DEFAULTS)
  ]
  // A: the operator's (admin API); B: another gateway on the same Redis, which hears of changes by events only.
  const redisPrefix = uniquePrefix('token-lifetime')
  const a = await startAdminGateway(t, { upstreamUrl: upstream.url, redisPrefix, routes })
  const b = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: upstream.url, routes: () => routes })
  t.teardown(async () => { await a.close() })

  const bearerGet = async (token: string): Promise<{ status: number; code: string | undefined }> => {
    const res = await send(b.url, '/reports/q', { headers: { authorization: `Bearer ${token}` } })
    return { status: res.status, code: res.status === 200 ? undefined : res.json<{ code: string }>().code }
  }
  /** polls B until the token is refused; the ms it took from `since` */
  const refusedAtB = async (token: string, since: number): Promise<number> => {
    for (;;) {
      const { status, code } = await bearerGet(token)
      if (status === 401 && code === 'INVALID_TOKEN') return performance.now() - since
      if (performance.now() - since > 5000) throw new Error(`the token is still accepted at B: ${status}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  t.equal((await admin(a, 'PUT', '/v1/users/dave', { body: { password: PASSWORD } })).status, 201)
  const oldToken = await login(a.url, 'dave')
  const oldKeys = rsaKeyPair()
  t.equal((await registerKey(b.url, oldToken, oldKeys)).status, 201)
  t.equal((await sendSigned(b.url, { keys: oldKeys, token: oldToken, method: 'GET', target: '/v1/clients/' })).status, 200, 'signed, at B')
  t.same(await bearerGet(oldToken), { status: 200, code: undefined }, 'bearer, at B (which now holds dave in its cache)')

  t.test('removed and created again under the same name, with the same password: another person', async (t) => {
    t.equal((await admin(a, 'DELETE', '/v1/users/dave')).status, 200)
    t.equal((await admin(a, 'PUT', '/v1/users/dave', { body: { password: PASSWORD } })).status, 201)
    const changedAt = performance.now()
    const ms = await refusedAtB(oldToken, changedAt)
    t.ok(ms < 1000, `the old token is refused at B ${ms.toFixed(0)} ms after the change (within a second)`)
    t.comment(`old incarnation's token refused at the other gateway after ${ms.toFixed(0)} ms`)

    const newToken = await login(b.url, 'dave')
    const newKeys = rsaKeyPair()
    const forwarded = upstream.requests.length
    const registration = await registerKey(b.url, oldToken, rsaKeyPair(), 'by the old token')
    t.equal(registration.status, 401)
    t.equal(registration.json<{ code: string }>().code, 'INVALID_TOKEN', 'the old token registers no key')
    t.equal((await registerKey(b.url, newToken, newKeys)).status, 201, 'the new dave registers his key')
    for (const method of ['GET', 'POST']) {
      const body = method === 'POST' ? '{"name":"x"}' : undefined
      const old = await sendSigned(b.url, { keys: newKeys, token: oldToken, method, target: '/v1/clients/', ...(body !== undefined && { body }) })
      t.equal(old.status, 401, `${method} signed with the new dave's key under the old token`)
      t.equal(old.json<{ code: string }>().code, 'INVALID_TOKEN')
    }
    t.equal(upstream.requests.length, forwarded, 'nothing the old token sent was forwarded')
    t.equal((await sendSigned(b.url, { keys: newKeys, token: newToken, method: 'GET', target: '/v1/clients/' })).status, 200,
      'the new dave\'s own token and key: forwarded')
    t.equal((await sendSigned(a.url, { keys: newKeys, token: oldToken, method: 'GET', target: '/v1/clients/' })).status, 401,
      'and at A, where the change was made')

    t.test('a change of scopes alone ends no token', async (t) => {
      const scoped = async (): Promise<number> => (await send(b.url, '/scoped/q', { headers: { authorization: `Bearer ${newToken}` } })).status
      t.equal(await scoped(), 403, 'before the grant: INSUFFICIENT_SCOPE (and dave is in B\'s cache)')
      t.equal((await admin(a, 'PUT', '/v1/users/dave', { body: { scopes: ['reports:read'] } })).status, 200)
      // B serves the scoped route once the event has dropped dave from its cache: the same token, accepted
      const since = performance.now()
      let status = await scoped()
      while (status === 403 && performance.now() - since < 5000) status = await scoped()
      t.equal(status, 200, 'the token passes with the scope granted')
      t.same(await bearerGet(newToken), { status: 200, code: undefined })
    })

    t.test('a password change ends the tokens issued before it', async (t) => {
      t.equal((await admin(a, 'PUT', '/v1/users/dave', { body: { password: 'a new password, 2' } })).status, 200)
      const changedAt = performance.now()
      const ms = await refusedAtB(newToken, changedAt)
      t.ok(ms < 1000, `refused at B ${ms.toFixed(0)} ms after the change`)
      t.comment(`token issued before a password change refused at the other gateway after ${ms.toFixed(0)} ms`)
      const signed = await sendSigned(b.url, { keys: newKeys, token: newToken, method: 'GET', target: '/v1/clients/' })
      t.equal(signed.status, 401)
      t.equal(signed.json<{ code: string }>().code, 'INVALID_TOKEN', 'on signed routes too')
      const registration = await registerKey(b.url, newToken, rsaKeyPair(), 'after the change')
      t.equal(registration.json<{ code: string }>().code, 'INVALID_TOKEN', 'and on key registration')
      const fresh = await login(b.url, 'dave', 'a new password, 2')
      t.same(await bearerGet(fresh), { status: 200, code: undefined }, 'a token got with the new password: accepted')
      t.equal((await sendSigned(b.url, { keys: newKeys, token: fresh, method: 'GET', target: '/v1/clients/' })).status, 200,
        'with the same key: the key outlives the password change')
    })
  })
})
