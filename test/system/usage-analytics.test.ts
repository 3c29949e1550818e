// Usage over time (issue 24, part 2): business requests counted by key, user, route and outcome,
// flushed to Redis (two gateways on one prefix add up) or the embedded store, and read through
// the admin API, `keygate usage` and a user's bearer endpoint. Flushes are made by hand (the
// counter's flush, as the timer and shutdown call it) so nothing waits on a timer. docs/cli.md's
// "Usage over time" runs here: each command of its block, and the outputs it shows compared in
// form (columns, footer, JSON members) with what the same commands print.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import t from 'tap'
import { admin, startAdminGateway, type AdminGateway } from '../helpers/admin.js'
import { keygateCli } from '../helpers/cli.js'
import { docBlocks, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders, type TestKeyPair } from '../helpers/keys.js'
import { testRedisUrl } from '../helpers/redis.js'
import { addUser, login, registerKey, sendSigned, startStack, startUpstreamStub } from '../helpers/stack.js'

const FLUSH_BY_HAND = { enabled: true, flushMs: 60_000, maxSeries: 50_000 }
const run = promisify(execFile)

/** What an output looks like, whatever its numbers: a table's columns, its rows' widths in columns and its last lines; a JSON answer's members. */
function formOf (output: string): unknown {
  if (output.startsWith('{')) {
    const answer = JSON.parse(output) as Record<string, unknown> & { points?: Array<Record<string, unknown>> }
    return { members: Object.keys(answer), points: answer.points?.length, pointMembers: [...new Set(answer.points?.flatMap((point) => Object.keys(point)))] }
  }
  const [header = '', ...rows] = output.trimEnd().split('\n')
  const columns = (line: string): number => line.split(/ {2,}/).length
  return {
    columns: header.split(/ {2,}/),
    rows: [...new Set(rows.filter((row) => columns(row) === columns(header)).map(columns))],
    footer: rows.filter((row) => columns(row) !== columns(header)).map((row) => row.replace(/\d+/g, 'N'))
  }
}

async function flush (gw: { app: AdminGateway['app'] }): Promise<void> {
  const usage = gw.app.keygate.usage
  if (usage === undefined) throw new Error('usage analytics is off')
  await usage.flush()
}

/** a signed request whose signature is of other bytes: refused once its key is known */
async function badlySigned (url: string, keys: TestKeyPair, token: string) {
  const headers = signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' })
  const otherBytes = signedHeaders({ keys, token, method: 'GET', target: '/v1/other' })['x-api-signature'] as string
  return await send(url, '/v1/clients/', { method: 'GET', headers: { ...headers, 'x-api-signature': otherBytes } })
}

t.test('two gateways on one Redis prefix: counts by key, user, route and outcome, read through the admin API, the CLI and the bearer endpoint', async (t) => {
  const upstream = await startUpstreamStub(t)
  const one = await startAdminGateway(t, { upstreamUrl: upstream, config: { usageAnalytics: FLUSH_BY_HAND } })
  const two = await startAdminGateway(t, { upstreamUrl: upstream, redisPrefix: one.config.redisPrefix, config: { usageAnalytics: FLUSH_BY_HAND } })
  for (const name of ['alice', 'bob']) await one.app.keygate.users.upsert(name, `${name}'s password`)
  const alice = { token: await login(one.url, 'alice', 'alice\'s password'), keys: rsaKeyPair() }
  const bob = { token: await login(one.url, 'bob', 'bob\'s password'), keys: rsaKeyPair() }
  t.equal((await registerKey(one.url, alice.token, alice.keys)).status, 201)
  t.equal((await registerKey(one.url, bob.token, bob.keys)).status, 201)

  for (let i = 0; i < 3; i++) t.equal((await sendSigned(one.url, { ...alice, method: 'GET', target: '/v1/clients/' })).status, 200)
  for (let i = 0; i < 2; i++) t.equal((await sendSigned(two.url, { ...alice, method: 'GET', target: '/v1/transactions/' })).status, 200)
  const refused = await badlySigned(two.url, alice.keys, alice.token)
  t.equal(refused.status, 401)
  const refusedCode = refused.json<{ code: string }>().code
  t.equal((await sendSigned(one.url, { ...bob, method: 'GET', target: '/v1/clients/' })).status, 200)
  // no credentials at all: no key, no user
  t.equal((await send(one.url, '/v1/clients/')).status, 401)
  // keygate's own endpoints are not counted
  t.equal((await send(one.url, '/v1/api-keys', { headers: { authorization: `Bearer ${alice.token}` } })).status, 200)
  await flush(one)
  await flush(two)

  await t.test('top keys by requests, added up over both gateways', async (t) => {
    const res = await admin(one, 'GET', '/v1/usage/top?by=key&since=1h')
    t.equal(res.status, 200, res.text)
    const top = res.json<{ resolution: string; bucketSeconds: number; items: Array<Record<string, unknown>> }>()
    t.match(top, { by: 'key', order: 'requests', since: '1h', resolution: 'minute', bucketSeconds: 60 })
    t.same(top.items.map((item) => [item.name, item.requests, item.refusals]), [[alice.keys.apiKey, 6, 1], [bob.keys.apiKey, 1, 0], [null, 1, 1]])
    t.same(top.items[0], { name: alice.keys.apiKey, requests: 6, refusals: 1, statuses: { '2xx': 5, '4xx': 1 }, codes: { [refusedCode]: 1 } })
  })

  await t.test('top users by refusals, top routes', async (t) => {
    const users = (await admin(one, 'GET', '/v1/usage/top?by=user&order=refusals&since=15m')).json<{ items: Array<Record<string, unknown>> }>()
    t.same(users.items.map((item) => [item.name, item.refusals]), [['alice', 1], [null, 1]], 'bob had no refusal: not listed')
    const routes = (await admin(one, 'GET', '/v1/usage/top?by=route&limit=1')).json<{ items: Array<Record<string, unknown>> }>()
    t.equal(routes.items.length, 1)
    // the clients route: alice's 3 and her refused one, bob's, the unsigned one; the transactions route had 2
    t.match(routes.items[0], { name: String, requests: 6, refusals: 2, statuses: { '2xx': 4, '4xx': 2 } })
  })

  await t.test('a key\'s series, a route\'s series; a window past the data kept, two subjects', async (t) => {
    const res = await admin(one, 'GET', `/v1/usage/series?key=${alice.keys.apiKey}&since=30m`)
    t.equal(res.status, 200, res.text)
    const series = res.json<{ points: Array<{ at: string; requests: number }>; resolution: string }>()
    t.equal(series.resolution, 'minute')
    t.equal(series.points.length, 30)
    t.equal(series.points.reduce((sum, point) => sum + point.requests, 0), 6)
    const days = (await admin(one, 'GET', '/v1/usage/series?user=alice&since=2d')).json<{ points: Array<{ requests: number }>; resolution: string }>()
    t.equal(days.resolution, 'hour')
    t.equal(days.points.length, 48)
    t.equal(days.points.reduce((sum, point) => sum + point.requests, 0), 6, 'the hour buckets hold the same counts')
    const tooLong = await admin(one, 'GET', '/v1/usage/top?by=key&since=15d')
    t.equal(tooLong.status, 400)
    t.match(tooLong.json(), { code: 'VALIDATION_FAILED', errors: [{ field: 'since' }] })
    const both = await admin(one, 'GET', `/v1/usage/series?key=${alice.keys.apiKey}&user=alice`)
    t.match(both.json(), { code: 'VALIDATION_FAILED' })
    t.match((await admin(one, 'GET', `/v1/usage/series?key=${'0'.repeat(64)}`)).json(), { code: 'API_KEY_NOT_FOUND' })
    const top = (await admin(one, 'GET', '/v1/usage/top?by=route')).json<{ items: Array<{ name: string }> }>()
    const transactions = top.items[1]?.name as string
    const route = (await admin(one, 'GET', `/v1/usage/series?route=${encodeURIComponent(transactions)}`)).json<{ points: Array<{ requests: number }> }>()
    t.equal(route.points.reduce((sum, point) => sum + point.requests, 0), 2, 'alice\'s two on the transactions route')
  })

  await t.test('keygate usage top and series through the admin API: a table and --json', async (t) => {
    const env = { KEYGATE_ADMIN_URL: one.adminUrl, KEYGATE_ADMIN_TOKEN: one.token }
    const table = await keygateCli(['usage', 'top', '--by', 'key', '--since', '1h'], '', env)
    t.equal(table.code, 0, table.stderr)
    const lines = table.stdout.trimEnd().split('\n')
    t.match(lines[0], /^KEY +REQUESTS +REFUSALS +2XX +3XX +4XX +5XX +CODES$/)
    t.same(lines[1]?.split(/ {2,}/), [alice.keys.apiKey, '6', '1', '5', '0', '1', '0', `${refusedCode} 1`])
    t.same(lines[3]?.split(/ {2,}/).slice(0, 3), ['(none)', '1', '1'])
    const json = await keygateCli(['usage', 'top', '--by', 'user', '--json'], '', env)
    t.equal(json.code, 0, json.stderr)
    t.match(JSON.parse(json.stdout), { by: 'user', items: [{ name: 'alice', requests: 6 }, { name: 'bob', requests: 1 }, { name: null }] })
    const series = await keygateCli(['usage', 'series', '--key', alice.keys.apiKey, '--since', '6h'], '', env)
    t.equal(series.code, 0, series.stderr)
    t.match(series.stdout, /^MINUTE +REQUESTS +REFUSALS +2XX +3XX +4XX +5XX +CODES\n\d{4}-\d\d-\d\d \d\d:\d\dZ +6 +1 +5 +0 +1 +0 +\S+ 1\n1 of 360 minute buckets had requests\n$/)
    const wrong = await keygateCli(['usage', 'top'], '', env)
    t.equal(wrong.code, 2)
    t.match(wrong.stderr, /usage top needs --by key, user, route or agent/)
  })

  await t.test('docs/cli.md, "Usage over time": each command of the block, through the admin API; the outputs shown are theirs', async (t) => {
    const env = { KEYGATE_ADMIN_URL: one.adminUrl, KEYGATE_ADMIN_TOKEN: one.token }
    const commands = docSnippet('docs/cli.md', 'Usage over time', 'sh').split('\n').filter((line) => line.startsWith('keygate '))
      .map((line) => line.replace(/ +#.*$/, ''))
    t.ok(commands.length >= 5, `${commands.length} commands`)
    // the page's route is named clients in a route file; this gateway's built-in one is named by its prefix
    const clients = '/v1/clients/'
    const printed = new Map<string, string>()
    for (const command of commands) {
      // the words bash makes of the command, $APIKEY one of alice's
      const words = `printf '%s\\0' ${command.slice('keygate '.length)}`
      const { stdout } = await run('bash', ['-c', words], { env: { PATH: process.env.PATH ?? '', APIKEY: alice.keys.apiKey } })
      const args = stdout.split('\0').slice(0, -1).map((word) => word === 'clients' ? clients : word)
      const result = await keygateCli(args, '', env)
      t.equal(result.code, 0, `${command}: ${result.stderr}`)
      printed.set(command, result.stdout)
    }
    const route = printed.get(commands.find((c) => c.includes('--route')) ?? '') ?? ''
    t.match(route, /^HOUR +REQUESTS/, 'a route over 7 days: hour by hour')
    t.match(route, /\n[12] of 168 hour buckets had requests\n$/, 'this hour (or the one before, when the test runs across the hour)')

    const shown = docBlocks('docs/cli.md', 'Usage over time', '')
    t.ok(shown.length >= 3, 'the page shows a top table, a series table and a series in JSON')
    for (const block of shown) {
      const [dollar = '', ...output] = block.split('\n')
      const command = dollar.replace(/^\$ /, '')
      t.ok(printed.has(command), `${dollar}: a command of the block`)
      t.same(formOf(output.join('\n')), formOf(printed.get(command) ?? ''), `${command}: the page shows what it prints, in form`)
    }
  })

  await t.test('the bearer endpoint: your own key\'s series; another\'s 404; no token 401', async (t) => {
    const own = await send(one.url, `/v1/api-keys/${alice.keys.apiKey}/usage/series?since=1h`, { headers: { authorization: `Bearer ${alice.token}` } })
    t.equal(own.status, 200, own.text)
    const series = own.json<{ by: string; name: string; points: Array<{ requests: number; codes: Record<string, number> }> }>()
    t.match(series, { by: 'key', name: alice.keys.apiKey })
    t.equal(series.points.reduce((sum, point) => sum + point.requests, 0), 6)
    const other = await send(one.url, `/v1/api-keys/${bob.keys.apiKey}/usage/series`, { headers: { authorization: `Bearer ${alice.token}` } })
    t.equal(other.status, 404)
    t.match(other.json(), { code: 'API_KEY_NOT_FOUND' })
    const none = await send(one.url, `/v1/api-keys/${alice.keys.apiKey}/usage/series`)
    t.equal(none.status, 401)
  })

  await t.test('buckets expire: a minute bucket after 6 hours, an hour bucket after 14 days', async (t) => {
    const redis = new Redis(await testRedisUrl())
    t.teardown(() => { redis.disconnect() })
    const minute = Math.floor(Date.now() / 60_000)
    const hour = Math.floor(Date.now() / 3_600_000)
    const minuteTtl = await redis.ttl(`${one.config.redisPrefix}usage:m:${minute}`)
    const hourTtl = await redis.ttl(`${one.config.redisPrefix}usage:h:${hour}`)
    // flushed this minute (the test takes seconds; a minute boundary in between leaves the key of the minute before)
    const minuteTtlOrBefore = minuteTtl > 0 ? minuteTtl : await redis.ttl(`${one.config.redisPrefix}usage:m:${minute - 1}`)
    t.ok(minuteTtlOrBefore > 6 * 3600 - 120 && minuteTtlOrBefore <= 6 * 3600 + 60, `minute bucket TTL ${minuteTtlOrBefore}`)
    const hourTtlOrBefore = hourTtl > 0 ? hourTtl : await redis.ttl(`${one.config.redisPrefix}usage:h:${hour - 1}`)
    t.ok(hourTtlOrBefore > 14 * 86400 - 3600 - 60 && hourTtlOrBefore <= 14 * 86400 + 3600, `hour bucket TTL ${hourTtlOrBefore}`)
  })

  await t.test('a gateway flushes what it counted when it shuts down', async (t) => {
    t.equal((await sendSigned(two.url, { ...bob, method: 'GET', target: '/v1/clients/' })).status, 200)
    await two.close()
    const top = (await admin(one, 'GET', '/v1/usage/top?by=user')).json<{ items: Array<{ name: string | null; requests: number }> }>()
    t.equal(top.items.find((item) => item.name === 'bob')?.requests, 2)
  })
})

t.test('the embedded store: counted and read the same; the in-process bound counts the rest as other', async (t) => {
  const gw = await startStack(t, { store: 'memory', config: { usageAnalytics: { enabled: true, flushMs: 60_000, maxSeries: 2 } } })
  await addUser(gw, 'carol')
  await addUser(gw, 'dave')
  const carol = { token: await login(gw.url, 'carol'), keys: rsaKeyPair() }
  const dave = { token: await login(gw.url, 'dave'), keys: rsaKeyPair() }
  t.equal((await registerKey(gw.url, carol.token, carol.keys)).status, 201)
  t.equal((await registerKey(gw.url, dave.token, dave.keys)).status, 201)
  // two distinct (key, user, route, outcome): carol's 2xx and carol's refusal; dave's is a third, past the bound
  t.equal((await sendSigned(gw.url, { ...carol, method: 'GET', target: '/v1/clients/' })).status, 200)
  t.equal((await sendSigned(gw.url, { ...carol, method: 'GET', target: '/v1/clients/' })).status, 200)
  t.equal((await badlySigned(gw.url, carol.keys, carol.token)).status, 401)
  t.equal((await sendSigned(gw.url, { ...dave, method: 'GET', target: '/v1/clients/' })).status, 200)
  await flush(gw)
  const series = async (who: typeof carol) => (await send(gw.url, `/v1/api-keys/${who.keys.apiKey}/usage/series?since=10m`, {
    headers: { authorization: `Bearer ${who.token}` }
  })).json<{ points: Array<{ requests: number; refusals: number }> }>().points
  const carolPoints = await series(carol)
  t.equal(carolPoints.length, 10)
  t.same([carolPoints.reduce((sum, p) => sum + p.requests, 0), carolPoints.reduce((sum, p) => sum + p.refusals, 0)], [3, 1])
  t.equal((await series(dave)).reduce((sum, p) => sum + p.requests, 0), 0, 'dave\'s request is counted as other')
  const { body } = await gw.app.keygate.metrics.scrape()
  t.match(body, /^keygate_usage_overflow_total 1$/m)
})

t.test('off: no hook, no writes', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream, config: { usageAnalytics: { enabled: false, flushMs: 100, maxSeries: 10 } } })
  t.equal(gw.app.keygate.usage, undefined)
  await gw.app.keygate.users.upsert('erin', 'erin\'s password')
  const erin = { token: await login(gw.url, 'erin', 'erin\'s password'), keys: rsaKeyPair() }
  t.equal((await registerKey(gw.url, erin.token, erin.keys)).status, 201)
  t.equal((await sendSigned(gw.url, { ...erin, method: 'GET', target: '/v1/clients/' })).status, 200)
  await gw.close()
  const redis = new Redis(await testRedisUrl())
  t.teardown(() => { redis.disconnect() })
  t.same(await redis.keys(`${gw.config.redisPrefix}usage:*`), [])
  const { body } = await gw.app.keygate.metrics.scrape()
  t.notMatch(body, /keygate_usage_/)
})
