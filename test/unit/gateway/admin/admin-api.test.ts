// The admin API on its own listener, as process/start.ts runs it beside a gateway on Redis: the
// token on every request, each endpoint's answers, the audit lines, the OpenAPI document, and that
// a revocation through it reaches a second gateway on the same Redis within a second. Real
// sockets, the real Redis.
import { validate } from '@readme/openapi-parser'
import t from 'tap'
import { admin, newAdminToken, startAdminGateway } from '../../../helpers/admin.js'
import { send } from '../../../helpers/http.js'
import { rsaKeyPair } from '../../../helpers/keys.js'
import { uniquePrefix, deletePrefix, testRedisUrl } from '../../../helpers/redis.js'
import { routeFile } from '../../../helpers/routes.js'
import { PASSWORD, login, registerKey, sendSigned, startTestGateway, startUpstreamStub, testConfig } from '../../../helpers/stack.js'
import { startGateway } from '../../../../gateway/src/process/start.js'

const PROBLEM = 'application/problem+json; charset=utf-8'

t.test('off unless KEYGATE_ADMIN_PORT is set; never on the public port', async (t) => {
  const gw = await startGateway({ config: testConfig() })
  t.teardown(gw.close)
  t.equal(gw.adminUrl, undefined, 'no admin listener')
  const upstream = await startUpstreamStub(t)
  const on = await startAdminGateway(t, { upstreamUrl: upstream })
  for (const url of [gw.url, on.url]) {
    const paths: Array<[string, string]> = [
      ['GET', '/v1/users'], ['GET', '/v1/users/alice'], ['DELETE', '/v1/keys/' + 'a'.repeat(64)], ['POST', '/v1/routes/reload']
    ]
    for (const [method, path] of paths) {
      const res = await send(url, path, { method, headers: { authorization: `Bearer ${on.token}` } })
      t.equal(res.json().code, 'NOT_FOUND', `${method} ${path} on the public port: 404 NOT_FOUND, as any unknown path`)
    }
  }
  t.not(new URL(on.adminUrl).port, new URL(on.url).port, 'a port of its own')
  t.equal(new URL(on.adminUrl).hostname, '127.0.0.1')
})

t.test('every request needs the admin token: 401 without it, or with another', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream })
  const wrong = newAdminToken()
  const cases: Array<[string, string, Record<string, string>, string]> = [
    ['GET', '/v1/users', {}, 'MISSING_TOKEN'],
    ['GET', '/docs/json', {}, 'MISSING_TOKEN'],
    ['GET', '/no/such/path', {}, 'MISSING_TOKEN'],
    ['PUT', '/v1/users/mallory', { 'content-type': 'application/json' }, 'MISSING_TOKEN'],
    ['GET', '/v1/users', { authorization: `Bearer ${wrong}` }, 'INVALID_TOKEN'],
    ['GET', '/v1/users', { authorization: `Bearer ${gw.token.slice(0, -1)}` }, 'INVALID_TOKEN'],
    ['GET', '/v1/users', { authorization: `Bearer ${gw.token}x` }, 'INVALID_TOKEN'],
    ['GET', '/v1/users', { authorization: `Basic ${Buffer.from(`admin:${gw.token}`).toString('base64')}` }, 'MISSING_TOKEN'],
    ['GET', '/docs/json', { authorization: `Bearer ${wrong}` }, 'INVALID_TOKEN'],
    ['POST', '/v1/routes/reload', { authorization: 'Bearer ' }, 'MISSING_TOKEN']
  ]
  for (const [method, path, headers, code] of cases) {
    const res = await send(gw.adminUrl, path, { method, headers, ...(method === 'PUT' && { body: JSON.stringify({ password: 'a-new-password' }) }) })
    t.equal(res.status, 401, `${method} ${path} ${JSON.stringify(headers).slice(0, 40)}: 401`)
    t.equal(res.headers['content-type'], PROBLEM)
    t.equal(res.json().code, code)
    t.match(res.headers['www-authenticate'], /^Bearer realm="keygate-admin"/)
  }
  t.equal((await admin(gw, 'GET', '/v1/users/mallory')).status, 404, 'nobody was created without the token')
  t.equal((await admin(gw, 'GET', '/v1/users')).status, 200, 'the token opens it')
  t.equal((await send(gw.adminUrl, '/v1/users', { headers: { authorization: `bearer ${gw.token}` } })).status, 200, 'the scheme in any case')
  const refusals = gw.lines.filter((l) => l.msg === 'admin API: request refused without a valid admin token')
  t.equal(refusals.length, cases.length, 'each refusal logged')
  t.match(refusals[4], { admin: { refused: 'INVALID_TOKEN', ip: '127.0.0.1', method: 'GET', url: '/v1/users' } })
  t.notOk(gw.raw().includes(gw.token), 'the admin token is in no log line')
  t.notOk(gw.raw().includes(wrong), 'nor a wrong one')
})

t.test('users: list, show, create, change the password, remove', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream })

  t.same((await admin(gw, 'GET', '/v1/users')).json(), { items: [], next_cursor: null }, 'no user yet')
  const created = await admin(gw, 'PUT', '/v1/users/alice', { body: { password: PASSWORD } })
  t.equal(created.status, 201, 'a new user: 201')
  t.match(created.json(), { username: 'alice', createdAt: String, updatedAt: String, activeKeys: 0, keys: 0 })
  t.notOk(created.text.includes(PASSWORD) || created.text.includes('passwordHash'), 'no password, no hash')
  const oldToken = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, oldToken, keys, 'laptop')).status, 201)

  const shown = await admin(gw, 'GET', '/v1/users/alice')
  t.equal(shown.status, 200)
  t.match(shown.json(), { username: 'alice', activeKeys: 1, keys: 1 })
  const listed = await admin(gw, 'GET', '/v1/users')
  t.match(listed.json(), { items: [{ username: 'alice', activeKeys: 1, keys: 1 }] })

  const updated = await admin(gw, 'PUT', '/v1/users/alice', { body: { password: 'another password' } })
  t.equal(updated.status, 200, 'an existing user: 200')
  t.equal(updated.json().createdAt, created.json().createdAt, 'created when it was')
  await t.rejects(login(gw.url, 'alice'), /401/, 'the old password no longer logs in')
  const token = await login(gw.url, 'alice', 'another password')
  t.type(token, 'string', 'the new one does')
  const stale = await sendSigned(gw.url, { keys, token: oldToken, method: 'GET', target: '/v1/clients/' })
  t.equal(stale.status, 401, 'a token issued before the password change is refused')
  t.equal(stale.json().code, 'INVALID_TOKEN')

  const mistakes: Array<[string, string, unknown, string, RegExp]> = [
    ['a short password', '/v1/users/bob', { password: 'short' }, 'VALIDATION_FAILED', /^A password is 8 to 1024 characters$/],
    ['a name no user can have', '/v1/users/-bob', { password: PASSWORD }, 'VALIDATION_FAILED', /^A username is 1-64 letters/],
    ['no password', '/v1/users/bob', {}, 'VALIDATION_FAILED', /password/],
    ['an unknown field', '/v1/users/bob', { password: PASSWORD, admin: true }, 'VALIDATION_FAILED', /admin is not an accepted field/],
    ['not an object', '/v1/users/bob', 'password', 'VALIDATION_FAILED', /body/]
  ]
  for (const [name, path, body, code, detail] of mistakes) {
    const res = await admin(gw, 'PUT', path, { body })
    t.equal(res.status, 400, name)
    t.equal(res.json().code, code, name)
    t.match(res.json().detail, detail, name)
  }
  const noJson = await send(gw.adminUrl, '/v1/users/bob', {
    method: 'PUT',
    headers: { authorization: `Bearer ${gw.token}`, 'content-type': 'text/plain' },
    body: 'x'
  })
  t.equal(noJson.json().code, 'UNSUPPORTED_MEDIA_TYPE')
  t.equal((await admin(gw, 'GET', '/v1/users/bob')).json().code, 'USER_NOT_FOUND', 'no mistake created bob')

  for (const [method, path] of [['GET', '/v1/users/nobody'], ['DELETE', '/v1/users/nobody'], ['GET', '/v1/users/no%20body']]) {
    const res = await admin(gw, method as string, path as string)
    t.equal(res.status, 404, `${method} ${path}`)
    t.equal(res.json().code, 'USER_NOT_FOUND')
    t.equal(res.headers['content-type'], PROBLEM)
  }

  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200, 'the key serves')
  const removed = await admin(gw, 'DELETE', '/v1/users/alice')
  t.equal(removed.status, 200)
  t.same(removed.json(), { username: 'alice', revokedKeyCount: 1, revokedKeys: [keys.apiKey] }, 'says how many keys it revoked, and which')
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).json().code, 'INVALID_TOKEN', 'refused (the key revoked too)')
  await t.rejects(login(gw.url, 'alice', 'another password'), /401/, 'alice cannot log in')
  t.equal((await admin(gw, 'GET', '/v1/users/alice')).status, 404)
  t.match((await admin(gw, 'GET', `/v1/keys/${keys.apiKey}`)).json(), { owner: 'alice', status: 'revoked' }, 'the revoked record stays')
  // the token refusal above hides the key's: with a valid token of a new alice, the gateway refuses the revoked key itself
  t.equal((await admin(gw, 'PUT', '/v1/users/alice', { body: { password: PASSWORD } })).status, 201)
  const newToken = await login(gw.url, 'alice')
  t.equal((await sendSigned(gw.url, { keys, token: newToken, method: 'GET', target: '/v1/clients/' })).json().code, 'UNKNOWN_API_KEY',
    'the removed user\'s key is refused at the gateway')
})

t.test('keys: list (every key, or one user\'s), show with the public key, revoke', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream })
  for (const name of ['alice', 'bob']) t.equal((await admin(gw, 'PUT', `/v1/users/${name}`, { body: { password: PASSWORD } })).status, 201)
  const alice = await login(gw.url, 'alice')
  const bob = await login(gw.url, 'bob')
  const laptop = rsaKeyPair()
  const phone = rsaKeyPair()
  const bobs = rsaKeyPair()
  t.equal((await registerKey(gw.url, alice, laptop, 'laptop')).status, 201)
  t.equal((await registerKey(gw.url, alice, phone, 'phone')).status, 201)
  t.equal((await registerKey(gw.url, bob, bobs, 'bob key')).status, 201)

  const all = (await admin(gw, 'GET', '/v1/keys')).json<{ items: Array<Record<string, unknown>> }>().items
  t.same(all.map((k) => [k.apiKey, k.owner, k.name, k.status, k.lastUsedAt]), [
    [bobs.apiKey, 'bob', 'bob key', 'active', null], [phone.apiKey, 'alice', 'phone', 'active', null], [laptop.apiKey, 'alice', 'laptop', 'active', null]
  ], 'every key, newest first')
  t.notOk(all.some((k) => 'publicKey' in k), 'a list shows no public key')
  t.same((await admin(gw, 'GET', '/v1/keys?user=alice')).json<{ items: Array<{ name: string }> }>().items.map((k) => k.name), ['phone', 'laptop'])
  t.same((await admin(gw, 'GET', '/v1/keys?user=nobody')).json(), { items: [], next_cursor: null })
  t.equal((await admin(gw, 'GET', '/v1/keys?owner=alice')).json().code, 'VALIDATION_FAILED', 'an unknown query parameter')

  const shown = await admin(gw, 'GET', `/v1/keys/${laptop.apiKey}`)
  t.equal(shown.status, 200)
  t.match(shown.json(), { owner: 'alice', apiKey: laptop.apiKey, name: 'laptop', status: 'active', publicKey: laptop.publicPem })
  for (const missing of ['f'.repeat(64), 'not-an-api-key']) {
    t.equal((await admin(gw, 'GET', `/v1/keys/${missing}`)).json().code, 'API_KEY_NOT_FOUND', `GET ${missing}`)
    t.equal((await admin(gw, 'DELETE', `/v1/keys/${missing}`)).json().code, 'API_KEY_NOT_FOUND', `DELETE ${missing}`)
  }

  t.equal((await sendSigned(gw.url, { keys: laptop, token: alice, method: 'GET', target: '/v1/clients/' })).status, 200, 'cached at the gateway')
  const revoked = await admin(gw, 'DELETE', `/v1/keys/${laptop.apiKey}`)
  t.equal(revoked.status, 200)
  t.match(revoked.json(), { owner: 'alice', apiKey: laptop.apiKey, name: 'laptop', status: 'revoked', revokedAt: String, alreadyRevoked: false })
  t.equal((await sendSigned(gw.url, { keys: laptop, token: alice, method: 'GET', target: '/v1/clients/' })).json().code, 'UNKNOWN_API_KEY',
    'refused by the gateway at once')
  const again = await admin(gw, 'DELETE', `/v1/keys/${laptop.apiKey}`)
  t.equal(again.status, 200, 'revoking again: 200')
  t.match(again.json(), { alreadyRevoked: true, revokedAt: revoked.json().revokedAt })
  t.match((await admin(gw, 'GET', '/v1/users/alice')).json(), { activeKeys: 1, keys: 2 })
})

t.test('routes: the table in force; reload of a good file, a bad file, and without a file', async (t) => {
  const upstream = await startUpstreamStub(t)
  const first = 'routes:\n  - { name: first, prefix: /first/, upstream: "http://127.0.0.1:9", auth: public, addHeaders: { x-upstream-secret: s3cr3t } }\n'
  const file = routeFile(t, first)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream, config: { routesFile: file.path } })

  const inForce = await admin(gw, 'GET', '/v1/routes')
  t.equal(inForce.status, 200)
  t.match(inForce.json(), { file: file.path, items: [{ name: 'first', prefix: '/first/', exact: false, auth: 'public', upstream: 'http://127.0.0.1:9', methods: Array }] })
  t.same(inForce.json<{ items: Array<{ addHeaders: unknown }> }>().items[0]?.addHeaders, { 'x-upstream-secret': '***' }, 'header values hidden')
  t.notOk(inForce.text.includes('s3cr3t'))

  file.write('routes:\n  - { name: a, prefix: /a/, upstream: "http://127.0.0.1:9", auth: bearer }\n  - { name: b, path: /b, upstream: "http://127.0.0.1:9", auth: signed }\n')
  const reloaded = await admin(gw, 'POST', '/v1/routes/reload')
  t.equal(reloaded.status, 200)
  t.match(reloaded.json(), { file: file.path, items: [{ name: 'a', prefix: '/a/' }, { name: 'b', prefix: '/b', exact: true }] })
  t.notOk('workers' in reloaded.json(), 'one process: no worker count')
  t.equal((await send(gw.url, '/a/x')).json().code, 'MISSING_TOKEN', 'the new routes serve')
  t.equal((await send(gw.url, '/first/x')).json().code, 'NOT_FOUND', 'the old ones are gone')

  file.write('routes:\n  - { prefix: /c/, upstream: "ftp://nowhere", auth: public }\n  - { prefix: /d/, upstream: "http://127.0.0.1:9", auth: sometimes }\n')
  const refused = await admin(gw, 'POST', '/v1/routes/reload')
  t.equal(refused.status, 422)
  t.equal(refused.headers['content-type'], PROBLEM)
  const problem = refused.json<{ code: string; file: string; problems: string[]; detail: string }>()
  t.equal(problem.code, 'ROUTE_FILE_INVALID')
  t.equal(problem.file, file.path)
  t.equal(problem.problems.length, 2, 'every mistake listed')
  t.match(problem.problems[0], /routes\[0\]\.upstream: "ftp:\/\/nowhere" is not an http\(s\) URL/)
  t.match(problem.problems[1], /routes\[1\]\.auth/)
  t.match(problem.detail, /the routes in force stay/)
  t.match((await admin(gw, 'GET', '/v1/routes')).json(), { items: [{ name: 'a' }, { name: 'b' }] }, 'the routes in force stay')
  t.equal((await send(gw.url, '/a/x')).json().code, 'MISSING_TOKEN', 'and serve')

  const builtIn = await startAdminGateway(t, { upstreamUrl: upstream })
  const routes = await admin(builtIn, 'GET', '/v1/routes')
  t.match(routes.json(), { file: null, items: [{ prefix: '/v1/clients/', auth: 'signed' }, { prefix: '/v1/transactions/' }] }, 'the built-in routes')
  const noFile = await admin(builtIn, 'POST', '/v1/routes/reload')
  t.equal(noFile.status, 409)
  t.equal(noFile.json().code, 'NO_ROUTE_FILE')
  t.match(noFile.json().detail, /KEYGATE_ROUTES is not set/)
})

t.test('audit: one line per change, with who, what, which, the outcome and the address; never a secret', async (t) => {
  const upstream = await startUpstreamStub(t)
  const file = routeFile(t, 'routes:\n  - { prefix: /a/, upstream: "http://127.0.0.1:9", auth: public }\n')
  const gw = await startAdminGateway(t, { upstreamUrl: upstream, config: { routesFile: file.path } })
  const secret = 'an audit-test password'
  await admin(gw, 'PUT', '/v1/users/carol', { body: { password: secret } })
  await admin(gw, 'PUT', '/v1/users/carol', { body: { password: `${secret}!` } })
  await admin(gw, 'PUT', '/v1/users/carol', { body: { password: 'short' } })
  const token = await login(gw.url, 'carol', `${secret}!`)
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)
  await admin(gw, 'DELETE', `/v1/keys/${keys.apiKey}`)
  await admin(gw, 'DELETE', `/v1/keys/${'0'.repeat(64)}`)
  await admin(gw, 'POST', '/v1/routes/reload')
  file.write('routes: []\n')
  await admin(gw, 'POST', '/v1/routes/reload')
  await admin(gw, 'DELETE', '/v1/users/carol')
  await admin(gw, 'DELETE', '/v1/users/carol')
  await admin(gw, 'GET', '/v1/users')
  await admin(gw, 'GET', `/v1/keys/${keys.apiKey}`)

  const audit = gw.lines.filter((l) => l.audit !== undefined).map((l) => l.audit as Record<string, unknown>)
  t.same(audit.map((a) => [a.who, a.action, a.apiKey ?? a.user, a.outcome, a.status]), [
    ['admin', 'user.put', 'carol', 'created', 201],
    ['admin', 'user.put', 'carol', 'updated', 200],
    ['admin', 'user.put', 'carol', 'VALIDATION_FAILED', 400],
    ['admin', 'key.revoke', keys.apiKey, 'revoked', 200],
    ['admin', 'key.revoke', '0'.repeat(64), 'API_KEY_NOT_FOUND', 404],
    ['admin', 'routes.reload', undefined, 'reloaded', 200],
    ['admin', 'routes.reload', undefined, 'invalid', 422],
    ['admin', 'user.delete', 'carol', 'removed', 200],
    ['admin', 'user.delete', 'carol', 'USER_NOT_FOUND', 404]
  ], 'one line per change, none for reads')
  for (const a of audit) t.match(a, { ip: '127.0.0.1', reqId: String })
  t.match(audit[3], { apiKey: keys.apiKey, user: 'carol' }, 'a revocation names the key and its owner')
  t.match(audit[5], { file: file.path, routes: 1 })
  t.match(audit[7], { revokedKeys: 0 }, 'a removal counts the keys it revoked (carol\'s one was revoked before)')
  const log = gw.raw()
  for (const leaked of [secret, gw.token, 'short']) t.notOk(log.includes(leaked), `${leaked.slice(0, 12)}... is in no log line`)
})

t.test('/docs/json: a valid OpenAPI document of every endpoint and its errors', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream })
  const res = await admin(gw, 'GET', '/docs/json')
  t.equal(res.status, 200)
  type Operation = { responses: Record<string, unknown>; 'x-keygate-errors': string[] }
  const doc = res.json<{ openapi: string; info: { title: string }; paths: Record<string, Record<string, Operation>> }>()
  const result = await validate(structuredClone(doc) as unknown as Parameters<typeof validate>[0])
  t.ok(result.valid, `validates as OpenAPI: ${result.valid ? '' : result.errors.map((e) => e.message).join('; ')}`)
  t.equal(doc.openapi, '3.1.0')
  t.equal(doc.info.title, 'keygate admin API')
  const operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`)).sort()
  t.same(operations, [
    'DELETE /v1/keys/{apiKey}', 'DELETE /v1/users/{name}', 'GET /v1/keys', 'GET /v1/keys/{apiKey}', 'GET /v1/routes',
    'GET /v1/usage', 'GET /v1/usage/series', 'GET /v1/usage/top',
    'GET /v1/users', 'GET /v1/users/{name}', 'PATCH /v1/keys/{apiKey}', 'POST /v1/reload', 'POST /v1/routes/reload', 'PUT /v1/users/{name}'
  ], 'every endpoint, and not /docs/json itself')
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      t.ok(operation.responses['401'], `${method} ${path} documents the 401`)
      t.ok(operation['x-keygate-errors'].includes('INVALID_TOKEN'))
    }
  }
  t.ok(doc.paths['/v1/routes/reload']?.post?.['x-keygate-errors'].includes('ROUTE_FILE_INVALID'))
  t.ok(doc.paths['/v1/reload']?.post?.['x-keygate-errors'].includes('CONFIG_FILE_INVALID'))
  t.ok(doc.paths['/v1/users/{name}']?.get?.['x-keygate-errors'].includes('USER_NOT_FOUND'))
})

t.test('a key revoked through the admin API of gateway A is refused by gateway B within a second', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('admin-revoke')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const upstream = await startUpstreamStub(t)
  const a = await startAdminGateway(t, { upstreamUrl: upstream, redisPrefix: prefix })
  const b = await startTestGateway(t, { store: 'redis', redisPrefix: prefix, upstreamUrl: upstream })
  t.equal((await admin(a, 'PUT', '/v1/users/dave', { body: { password: PASSWORD } })).status, 201)
  const token = await login(b.url, 'dave')
  const keys = rsaKeyPair()
  t.equal((await registerKey(b.url, token, keys)).status, 201)
  t.equal((await sendSigned(b.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status, 200, 'cached at B')

  t.equal((await admin(a, 'DELETE', `/v1/keys/${keys.apiKey}`)).status, 200)
  const since = Date.now()
  let status = 200
  while (status === 200 && Date.now() - since < 1000) {
    status = (await sendSigned(b.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status
  }
  t.equal(status, 401, `B refuses it ${Date.now() - since} ms after the admin API answered`)
})
