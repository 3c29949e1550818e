import t from 'tap'
import { ConfigError, loadConfig, parseBootstrapUsers } from '../../gateway/src/config.js'

t.test('defaults', async (t) => {
  const config = loadConfig({})
  t.equal(config.port, 8080)
  t.equal(config.host, '127.0.0.1')
  t.equal(config.redisUrl, undefined)
  t.equal(config.bodyLimit, 1024 * 1024)
  t.equal(config.jwt.ttlSeconds, 900)
  t.same(config.routes.map((r) => [r.prefix, r.upstream, r.auth, r.methods]), [['/v1/clients/', 'http://127.0.0.1:8081', 'signed', ['GET', 'POST']]])
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
    [{ KEYGATE_BOOTSTRAP_USERS: 'ann' }, /^KEYGATE_BOOTSTRAP_USERS: entry 1 \(ann\)/],
    [{ KEYGATE_BOOTSTRAP_USERS: 'a b:pw' }, /^KEYGATE_BOOTSTRAP_USERS: entry 1:/]
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
  }
  t.ok(new ConfigError('x') instanceof Error)
  t.same(parseBootstrapUsers(''), [])
  t.same(parseBootstrapUsers(undefined), [])
})
