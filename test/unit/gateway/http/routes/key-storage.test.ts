// Storage that stays bounded (issue #20, point 4), over HTTP on both stores: registrations per
// user are rate-limited (counted in the store, so gateways share it), a revoked key is cut down to
// a tombstone after KEYGATE_REVOKED_KEY_RETENTION_DAYS (still a duplicate, still revoked to the
// admin API), and every list comes a page at a time (`limit`, `cursor`, `next_cursor`): the user
// API, the admin API and the CLI.
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import { Redis } from 'ioredis'
import t from 'tap'
import { redisKeyNames } from '../../../../../gateway/src/store/redis/key-names.js'
import { admin, startAdminGateway } from '../../../../helpers/admin.js'
import { inProcess } from '../../../../helpers/cli.js'
import { send, type RawResponse } from '../../../../helpers/http.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../../helpers/redis.js'
import { rsaKeyPair } from '../../../../helpers/keys.js'
import { STORE_KINDS, addUser, login, registerKey, startStack, startTestGateway, startUpstreamStub } from '../../../../helpers/stack.js'

interface Ed25519Pair { privateKey: KeyObject; publicPem: string }
/** Ed25519: made in microseconds, so a test can register hundreds */
const edPair = (): Ed25519Pair => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return { privateKey, publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() }
}

async function register (url: string, token: string, keys: Ed25519Pair, name: string): Promise<RawResponse> {
  return await send(url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name, publicKey: keys.publicPem, signature: sign(null, Buffer.from(name), keys.privateKey).toString('base64') })
  })
}
const revoke = async (url: string, token: string, apiKey: string): Promise<RawResponse> =>
  await send(url, `/v1/api-keys/${apiKey}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })

interface KeyPage { items: Array<{ apiKey: string; name: string; status: string }>; next_cursor: string | null }
const listKeys = async (url: string, token: string, query = ''): Promise<RawResponse> =>
  await send(url, `/v1/api-keys${query}`, { headers: { authorization: `Bearer ${token}` } })

for (const kind of STORE_KINDS) {
  t.test(`${kind} store: 150 register-and-revoke cycles by one user: 60 pass (the default hour), the rest 429 RATE_LIMITED`, async (t) => {
    const gw = await startStack(t, { store: kind })
    t.equal(gw.config.keyRegistrationsPerHour, 60, 'the default')
    await addUser(gw, 'mallory')
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'mallory')
    const answers: RawResponse[] = []
    for (let i = 0; i < 150; i++) {
      const res = await register(gw.url, token, edPair(), `cycle-${i}`)
      answers.push(res)
      if (res.status === 201) t.equal((await revoke(gw.url, token, res.json<{ apiKey: string }>().apiKey)).status, 204)
    }
    const created = answers.filter((a) => a.status === 201).length
    const refused = answers.filter((a) => a.status === 429)
    t.comment(`150 cycles: ${created} registered, ${refused.length} refused`)
    t.equal(created, 60, 'a burst of the hour\'s 60')
    t.equal(refused.length, 90, 'the rest refused')
    const first = refused[0] as RawResponse
    t.match(first.json(), { status: 429, code: 'RATE_LIMITED' })
    const retryAfter = Number(first.headers['retry-after'])
    t.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}: one registration more a minute`)
    t.equal((await register(gw.url, await login(gw.url, 'alice'), edPair(), 'alice')).status, 201, 'the count is per user')
    t.equal((await listKeys(gw.url, token)).json<KeyPage>().items.length, 60, 'nothing refused was stored')
  })

  t.test(`${kind} store: a revoked key past its retention is a tombstone: out of the list, still a duplicate`, async (t) => {
    const gw = await startStack(t, { store: kind, config: { revokedKeyRetentionDays: 0 } })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    // RSA-2048, the seed's key: the record the issue measured (~1 KB)
    const keys = rsaKeyPair()
    const kept = edPair()
    const apiKey = (await registerKey(gw.url, token, keys, 'old')).json<{ apiKey: string }>().apiKey
    t.equal((await register(gw.url, token, kept, 'kept')).status, 201)
    const names = redisKeyNames(gw.config.redisPrefix, false)
    const redis = kind === 'redis' ? new Redis(await testRedisUrl()) : undefined
    t.teardown(() => redis?.disconnect())
    // what Redis holds for the record (its name under this test's long prefix included), and the stored value alone
    const bytes = async (): Promise<[number, number]> =>
      [Number(await redis?.call('MEMORY', 'USAGE', names.key(apiKey))), Number(await redis?.strlen(names.key(apiKey)))]
    t.equal((await revoke(gw.url, token, apiKey)).status, 204)
    const whole = await bytes()
    const page = (await listKeys(gw.url, token)).json<KeyPage>()
    t.same(page.items.map((k) => k.name), ['kept'], 'the next listing prunes it: it is listed no more')
    const record = await gw.store.getKey(apiKey)
    t.match(record, { apiKey, owner: 'alice', name: 'old', revokedAt: String, prunedAt: String, fingerprint: String })
    t.equal(record?.publicKey, undefined, 'no public key kept')
    t.equal((await registerKey(gw.url, token, keys, 'again')).json().code, 'DUPLICATE_KEY', 'never registered again')
    t.equal((await revoke(gw.url, token, apiKey)).status, 204, 'revoking it again: 204, as for any revoked key')
    if (redis !== undefined) {
      const tombstone = await bytes()
      const index = Number(await redis.call('MEMORY', 'USAGE', names.keyFingerprint(record?.fingerprint ?? '')))
      t.comment(`bytes kept per revoked RSA-2048 key (Redis MEMORY USAGE, value alone in brackets): ${whole[0]} (${whole[1]}) whole, ` +
        `${tombstone[0]} (${tombstone[1]}) as a tombstone, + ${index} the fingerprint index entry either way`)
      t.ok(tombstone[1] < whole[1] / 2, `the tombstone's value (${tombstone[1]} B) is under half the record's (${whole[1]} B)`)
      t.ok(tombstone[0] < whole[0], 'and Redis holds less for it')
    }
  })

  t.test(`${kind} store: within the retention (default 30 days) a revoked key stays listed`, async (t) => {
    const gw = await startStack(t, { store: kind })
    t.equal(gw.config.revokedKeyRetentionDays, 30)
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const apiKey = (await register(gw.url, token, edPair(), 'k')).json<{ apiKey: string }>().apiKey
    await revoke(gw.url, token, apiKey)
    t.match((await listKeys(gw.url, token)).json<KeyPage>().items, [{ apiKey, status: 'revoked' }])
  })

  t.test(`${kind} store: GET /v1/api-keys a page at a time; a key registered while paging is on no later page`, async (t) => {
    const gw = await startStack(t, { store: kind })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const registered: string[] = []
    for (let i = 0; i < 7; i++) registered.unshift((await register(gw.url, token, edPair(), `k${i}`)).json<{ apiKey: string }>().apiKey)
    const all = (await listKeys(gw.url, token)).json<KeyPage>()
    t.same(all.items.map((k) => k.apiKey), registered, 'without limit: all (default 100), newest first')
    t.equal(all.next_cursor, null)

    const seen: string[] = []
    let cursor: string | null = null
    const sizes: number[] = []
    do {
      const res = await listKeys(gw.url, token, `?limit=3${cursor === null ? '' : `&cursor=${cursor}`}`)
      t.equal(res.status, 200)
      const page: KeyPage = res.json<KeyPage>()
      sizes.push(page.items.length)
      seen.push(...page.items.map((k) => k.apiKey))
      cursor = page.next_cursor
      // registered between pages: newer than every cursor, so on no later page
      if (sizes.length === 1) t.equal((await register(gw.url, token, edPair(), 'meanwhile')).status, 201)
    } while (cursor !== null)
    t.same(sizes, [3, 3, 1])
    t.same(seen, registered, 'every key once, in order, none twice, none skipped')

    for (const query of ['?limit=0', '?limit=1001', '?limit=x', '?cursor=zzz', `?cursor=${Buffer.from('["x","y"]').toString('base64url')}`, '?cursor=%7B']) {
      const res = await listKeys(gw.url, token, query)
      t.equal(res.status, 400, `${query}: 400`)
      t.equal(res.json().code, 'VALIDATION_FAILED', `${query}: VALIDATION_FAILED`)
    }
  })
}

t.test('redis: two gateways on one prefix share the registration count', async (t) => {
  const url = await testRedisUrl()
  const redisPrefix = uniquePrefix('key-rate')
  t.teardown(async () => { await deletePrefix(url, redisPrefix) })
  const config = { keyRegistrationsPerHour: 4 }
  const a = await startStack(t, { store: 'redis', redisPrefix, config })
  const b = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: a.upstreamUrl, config })
  await addUser(a, 'alice')
  const token = await login(a.url, 'alice')
  const statuses = []
  for (let i = 0; i < 6; i++) statuses.push((await register(i % 2 === 0 ? a.url : b.url, token, edPair(), `k${i}`)).status)
  t.same(statuses, [201, 201, 201, 201, 429, 429], '4 an hour at the two together')
})

t.test('the admin API and the CLI page their lists; a tombstone still shows as revoked', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream, config: { revokedKeyRetentionDays: 0 } })
  for (const name of ['carol', 'alice', 'bob']) {
    t.equal((await admin(gw, 'PUT', `/v1/users/${name}`, { body: { password: 'password-of-someone' } })).status, 201)
  }
  const alice = await login(gw.url, 'alice', 'password-of-someone')
  const bob = await login(gw.url, 'bob', 'password-of-someone')
  const keys: string[] = []
  for (const [token, name] of [[alice, 'a1'], [bob, 'b1'], [alice, 'a2']] as const) {
    keys.unshift((await register(gw.url, token, edPair(), name)).json<{ apiKey: string }>().apiKey)
  }

  const users1 = (await admin(gw, 'GET', '/v1/users?limit=2')).json<{ items: Array<{ username: string }>; next_cursor: string }>()
  t.same(users1.items.map((u) => u.username), ['alice', 'bob'])
  const users2 = (await admin(gw, 'GET', `/v1/users?limit=2&cursor=${users1.next_cursor}`)).json<{ items: Array<{ username: string }>; next_cursor: null }>()
  t.match(users2, { items: [{ username: 'carol', activeKeys: 0, keys: 0 }], next_cursor: null }, 'by name, a page at a time')
  t.equal(users2.items.length, 1)

  const keys1 = (await admin(gw, 'GET', '/v1/keys?limit=2')).json<{ items: Array<{ apiKey: string }>; next_cursor: string }>()
  const keys2 = (await admin(gw, 'GET', `/v1/keys?limit=2&cursor=${keys1.next_cursor}`)).json<{ items: Array<{ apiKey: string }>; next_cursor: null }>()
  t.same([...keys1.items, ...keys2.items].map((k) => k.apiKey), keys, 'every key, newest first, over two pages')
  t.equal(keys2.next_cursor, null)
  const alices = (await admin(gw, 'GET', '/v1/keys?user=alice&limit=1')).json<{ items: Array<{ name: string }>; next_cursor: string }>()
  t.same(alices.items.map((k) => k.name), ['a2'])
  t.type(alices.next_cursor, 'string')
  for (const query of ['/v1/keys?limit=0', '/v1/keys?cursor=nope', '/v1/users?limit=5000', '/v1/users?cursor=%5B%5D']) {
    t.equal((await admin(gw, 'GET', query)).json().code, 'VALIDATION_FAILED', query)
  }

  // the CLI, on the store and through the admin API: one page and the way to the next, or every item
  const redisUrl = await testRedisUrl()
  const direct = { REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: gw.config.redisPrefix }
  const viaAdmin = { KEYGATE_ADMIN_URL: gw.adminUrl, KEYGATE_ADMIN_TOKEN: gw.token }
  for (const [way, env] of [['direct', direct], ['admin API', viaAdmin]] as const) {
    const first = await inProcess(['keys', 'list', '--limit', '2', '--json'], env)
    t.equal(first.error, undefined, way)
    const page = JSON.parse(first.stdout) as { items: Array<{ apiKey: string }>; next_cursor: string }
    t.same(page.items.map((k) => k.apiKey), keys.slice(0, 2), `${way}: keys list --limit 2 --json`)
    const table = await inProcess(['keys', 'list', '--cursor', page.next_cursor], env)
    t.match(table.stdout, new RegExp(`^APIKEY .*\\n${keys[2] ?? ''} .*\\n1 key\\n$`), `${way}: --cursor: the page after`)
    const limited = await inProcess(['users', 'list', '--limit', '1'], env)
    t.match(limited.stdout, /\nalice .*\n1 user\nmore: users list --cursor [A-Za-z0-9_-]+ --limit 1\n$/, `${way}: users list --limit 1 says how to go on`)
    const everything = JSON.parse((await inProcess(['users', 'list', '--json'], env)).stdout) as Array<{ username: string }>
    t.same(everything.map((u) => u.username), ['alice', 'bob', 'carol'], `${way}: without --limit, every user (an array, as before)`)
    t.equal((await inProcess(['keys', 'list', '--limit', '0'], env)).error?.message.includes('limit'), true, `${way}: a bad limit is refused`)
  }

  // a revoked key past its retention (0 days here): out of the lists, a tombstone to GET /v1/keys/{apiKey}
  const a1 = keys[2] ?? ''
  t.equal((await revoke(gw.url, alice, a1)).status, 204)
  const listed = (await admin(gw, 'GET', '/v1/keys?user=alice')).json<{ items: Array<{ apiKey: string }> }>()
  t.notOk(listed.items.some((k) => k.apiKey === a1), 'pruned at the listing')
  const shown = (await admin(gw, 'GET', `/v1/keys/${a1}`)).json<Record<string, unknown>>()
  t.match(shown, { apiKey: a1, owner: 'alice', name: 'a1', status: 'revoked', revokedAt: String, prunedAt: String })
  t.notOk('publicKey' in shown, 'no public key')
  const cli = await inProcess(['keys', 'show', a1], direct)
  t.match(cli.stdout, /status: +revoked[\s\S]*public key pruned/, 'keys show says it')
  t.match((await admin(gw, 'GET', '/v1/users/alice')).json(), { activeKeys: 1, keys: 1 }, 'the user\'s counts leave it out')
})
