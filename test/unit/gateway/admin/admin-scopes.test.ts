// Scopes through the admin API, on a gateway on the real Redis over real sockets: PUT sets a user's
// scopes (with or without a password), PATCH narrows a key's scopes or changes its expiry, the
// gateway enforces each change on the next request, and every refusal says what to fix. Each
// change writes its audit line.
import t from 'tap'
import type { Test } from 'tap'
import { admin, startAdminGateway, type AdminGateway } from '../../../helpers/admin.js'
import { rsaKeyPair } from '../../../helpers/keys.js'
import { routesFromYaml } from '../../../helpers/routes.js'
import { PASSWORD, login, registerKey, sendSigned, startUpstreamStub } from '../../../helpers/stack.js'

const ROUTES = `routes:
  - { prefix: /v1/clients/, upstream: UPSTREAM, auth: signed, methods: [GET], scopes: [clients:read] }
  - { prefix: /v1/clients/, upstream: UPSTREAM, auth: signed, methods: [POST], scopes: [clients:write] }
`
let clients = 0
/** a new client each time: the example service answers 409 for a tax_id it holds */
const newClient = (): string => JSON.stringify({ name: 'a', email: 'a@b.c', tax_id: String(10_000 + clients++) })

async function scopedGateway (t: Test): Promise<AdminGateway> {
  const upstream = await startUpstreamStub(t)
  const routes = routesFromYaml(ROUTES, upstream)
  return await startAdminGateway(t, { upstreamUrl: upstream, routes })
}

t.test('PUT /v1/users/{name}: scopes with a new user, scopes alone for an existing one; the gateway follows', async (t) => {
  const gw = await scopedGateway(t)
  const created = await admin(gw, 'PUT', '/v1/users/carol', { body: { password: PASSWORD, scopes: ['clients:write', 'clients:read'] } })
  t.equal(created.status, 201)
  t.match(created.json(), { username: 'carol', scopes: ['clients:read', 'clients:write'] }, 'stored sorted')
  const token = await login(gw.url, 'carol')
  const keys = rsaKeyPair()
  t.same((await registerKey(gw.url, token, keys)).json().scopes, ['clients:read', 'clients:write'], 'a key gets the user\'s scopes')
  const write = async (): Promise<{ status: number; code?: string; missingScopes?: string[] }> => {
    const res = await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body: newClient() })
    return { status: res.status, ...(res.status >= 400 && res.json()) }
  }
  t.equal((await write()).status, 201, 'carol may write')

  const narrowed = await admin(gw, 'PUT', '/v1/users/carol', { body: { scopes: ['clients:read'] } })
  t.equal(narrowed.status, 200, 'an existing user: 200')
  t.match(narrowed.json(), { username: 'carol', scopes: ['clients:read'], activeKeys: 1 })
  t.match(await write(), { status: 403, code: 'INSUFFICIENT_SCOPE', missingScopes: ['clients:write'] }, 'taken from the user: her key may not write')
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200, 'and may still read')
  t.type(await login(gw.url, 'carol'), 'string', 'her password was kept')
  t.match((await admin(gw, 'GET', '/v1/users/carol')).json(), { scopes: ['clients:read'] })

  for (const [body, field, message] of [
    [{}, 'password', /give a password, scopes or both/],
    [{ scopes: ['clients read'] }, 'scopes', /clients read/],
    [{ scopes: ['a', 'a'] }, undefined, /duplicate|unique/i]
  ] as const) {
    const res = await admin(gw, 'PUT', '/v1/users/carol', { body })
    t.equal(res.status, 400, JSON.stringify(body))
    t.equal(res.json().code, 'VALIDATION_FAILED')
    t.match(JSON.stringify(res.json()), message)
    if (field !== undefined) t.match(res.json().errors, [{ field }])
  }
  const nobody = await admin(gw, 'PUT', '/v1/users/dave', { body: { scopes: ['clients:read'] } })
  t.equal(nobody.status, 400, 'a new user needs a password')
  t.match(nobody.json(), { code: 'VALIDATION_FAILED', detail: /no user dave: a new user needs a password/, errors: [{ field: 'password' }] })
  t.equal((await admin(gw, 'GET', '/v1/users/dave')).status, 404, 'and none was made')
  t.match((await admin(gw, 'GET', '/v1/users/carol')).json(), { scopes: ['clients:read'] }, 'no refused PUT changed carol')

  const audit = gw.lines.filter((l) => l.audit !== undefined).map((l) => l.audit as Record<string, unknown>)
  t.match(audit.slice(0, 2), [{ action: 'user.put', user: 'carol', outcome: 'created' }, { action: 'user.put', user: 'carol', outcome: 'updated' }])
})

t.test('PATCH /v1/keys/{apiKey}: scopes within the owner\'s, the expiry, and never a revoked key', async (t) => {
  const gw = await scopedGateway(t)
  t.equal((await admin(gw, 'PUT', '/v1/users/erin', { body: { password: PASSWORD, scopes: ['clients:read', 'clients:write'] } })).status, 201)
  const token = await login(gw.url, 'erin')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)
  const write = async (): Promise<number> => (await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body: newClient() })).status
  t.equal(await write(), 201)

  const narrowed = await admin(gw, 'PATCH', `/v1/keys/${keys.apiKey}`, { body: { scopes: ['clients:read'] } })
  t.equal(narrowed.status, 200)
  t.match(narrowed.json(), { owner: 'erin', apiKey: keys.apiKey, status: 'active', scopes: ['clients:read'] })
  t.equal(await write(), 403, 'the narrowed key may no longer write, at once')
  t.match((await admin(gw, 'GET', '/v1/keys?user=erin')).json(), { items: [{ apiKey: keys.apiKey, scopes: ['clients:read'] }] })

  const extra = await admin(gw, 'PATCH', `/v1/keys/${keys.apiKey}`, { body: { scopes: ['clients:read', 'billing:admin'] } })
  t.equal(extra.status, 400, 'a scope the owner lacks')
  t.match(extra.json(), { code: 'VALIDATION_FAILED', detail: /billing:admin/ })

  const expiry = new Date(Date.now() + 86_400_000).toISOString()
  const expiring = await admin(gw, 'PATCH', `/v1/keys/${keys.apiKey}`, { body: { expiresAt: expiry } })
  t.equal(expiring.status, 200)
  t.match(expiring.json(), { expiresAt: expiry, scopes: ['clients:read'] }, 'an expiry; the scopes kept')
  const forever = await admin(gw, 'PATCH', `/v1/keys/${keys.apiKey}`, { body: { expiresAt: null, scopes: ['clients:read', 'clients:write'] } })
  t.equal(forever.status, 200)
  t.notOk('expiresAt' in forever.json(), 'null: no expiry')
  t.equal(await write(), 201, 'widened again within the owner\'s scopes: it writes')

  for (const body of [{}, { expiresAt: '2020-01-01T00:00:00Z' }, { expiresAt: 'tomorrow' }, { name: 'renamed' }]) {
    const res = await admin(gw, 'PATCH', `/v1/keys/${keys.apiKey}`, { body })
    t.equal(res.status, 400, JSON.stringify(body))
    t.equal(res.json().code, 'VALIDATION_FAILED')
  }
  t.equal((await admin(gw, 'PATCH', `/v1/keys/${'f'.repeat(64)}`, { body: { scopes: [] } })).json().code, 'API_KEY_NOT_FOUND')

  t.equal((await admin(gw, 'DELETE', `/v1/keys/${keys.apiKey}`)).status, 200)
  const revoked = await admin(gw, 'PATCH', `/v1/keys/${keys.apiKey}`, { body: { scopes: ['clients:read'] } })
  t.equal(revoked.status, 409)
  t.match(revoked.json(), {
    code: 'KEY_NOT_ACTIVE',
    keyStatus: 'revoked',
    key: { apiKey: keys.apiKey, status: 'revoked', scopes: ['clients:read', 'clients:write'] }
  }, 'a revoked key is left as it is, and said to be')

  const audit = gw.lines.filter((l) => (l.audit as { action?: string } | undefined)?.action === 'key.update').map((l) => l.audit as Record<string, unknown>)
  t.match(audit[0], { who: 'admin', action: 'key.update', apiKey: keys.apiKey, user: 'erin', outcome: 'updated', changed: ['scopes'] })
  t.match(audit.at(-1), { action: 'key.update', apiKey: keys.apiKey, status: 409 })
  t.notOk(gw.raw().includes(PASSWORD), 'no password in the log')
})
