import t from 'tap'
import { ConfigError, loadConfig, parseBootstrapUsers } from '../../gateway/src/config.js'

t.test('defaults', async (t) => {
  const config = loadConfig({})
  t.equal(config.port, 8080)
  t.equal(config.host, '127.0.0.1')
  t.equal(config.redisUrl, undefined)
  t.equal(config.bodyLimit, 1024 * 1024)
  t.equal(config.jwt.ttlSeconds, 900)
  t.same(config.routes.map((r) => [r.prefix, r.upstream, r.auth, r.methods]), [
    ['/v1/clients/', 'http://127.0.0.1:8081', 'signed', ['GET', 'POST']],
    ['/v1/transactions/', 'http://127.0.0.1:8081', 'signed', ['GET', 'POST']]
  ])
  t.equal(config.routesFile, undefined)
  t.equal(config.watchRoutes, false)
})

t.test('variables', async (t) => {
  const config = loadConfig({ PORT: '9000', UPSTREAM_PORT: '9001', REDIS_URL: 'redis://r:6379', KEYGATE_BODY_LIMIT: '2048', KEYGATE_BOOTSTRAP_USERS: 'ann:pw:with:colons,bo:secret' })
  t.equal(config.port, 9000)
  t.equal(config.routes[0]?.upstream, 'http://127.0.0.1:9001', 'UPSTREAM_URL defaults to the UPSTREAM_PORT on this host')
  t.equal(config.routes[0]?.bodyLimit, 2048)
  t.equal(config.redisUrl, 'redis://r:6379')
  t.same(config.bootstrapUsers, [{ username: 'ann', password: 'pw:with:colons' }, { username: 'bo', password: 'secret' }])
  t.equal(loadConfig({ UPSTREAM_URL: 'https://api.internal:8443' }).routes[0]?.upstream, 'https://api.internal:8443')
})

t.test('bad values are refused, naming the variable', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'eighty' }, /^PORT: "eighty"/],
    [{ PORT: '70000' }, /^PORT: "70000"/],
    [{ UPSTREAM_URL: 'ftp://x' }, /^UPSTREAM_URL:/],
    [{ REDIS_URL: 'localhost:6379' }, /^REDIS_URL:/],
    [{ KEYGATE_BODY_LIMIT: '-1' }, /^KEYGATE_BODY_LIMIT:/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL:/],
    [{ KEYGATE_BOOTSTRAP_USERS: 'ann' }, /^KEYGATE_BOOTSTRAP_USERS: entry 1 is not name:password/],
    [{ KEYGATE_BOOTSTRAP_USERS: 'a b:pw' }, /^KEYGATE_BOOTSTRAP_USERS: entry 1 has no valid username/]
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
  }
  t.ok(new ConfigError('x') instanceof Error)
  t.equal(loadConfig({ REDIS_URL: 'REDIS://r:6379' }).redisUrl, 'REDIS://r:6379', 'the scheme is case-insensitive')
})

t.test('an error never quotes a secret', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ REDIS_URL: 'redis//:S3cretRedisPass@db:6379' }, 'S3cretRedisPass'],
    [{ KEYGATE_BOOTSTRAP_USERS: 'alice=Hunter2!x' }, 'Hunter2'],
    [{ KEYGATE_BOOTSTRAP_USERS: 'alice:pa,ss-word1' }, 'ss-word1'],
    [{ KEYGATE_BOOTSTRAP_USERS: 'ok:fine-password,bad user:Sekr1t' }, 'Sekr1t']
  ]
  for (const [env, secret] of cases) {
    let message = ''
    try { loadConfig(env) } catch (err) { message = (err as Error).message }
    t.ok(message.length > 0, `${JSON.stringify(Object.keys(env))} is refused`)
    t.notOk(message.includes(secret), `the message does not hold ${secret}: ${message}`)
  }
  t.same(parseBootstrapUsers(''), [])
  t.same(parseBootstrapUsers(undefined), [])
})
