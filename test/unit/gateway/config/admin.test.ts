// KEYGATE_ADMIN_PORT, KEYGATE_ADMIN_HOST, KEYGATE_ADMIN_TOKEN: off by default, a port needs a
// token of at least 32 characters, never the public or the metrics port; the token is never quoted.
import t from 'tap'
import { loadConfig } from '../../../../gateway/src/config/env.js'

const TOKEN = 'a'.repeat(16) + 'B'.repeat(16)

t.test('off unless KEYGATE_ADMIN_PORT is set; on 127.0.0.1 by default', async (t) => {
  t.same(loadConfig({}).admin, { port: undefined, host: '127.0.0.1', token: undefined })
  t.same(loadConfig({ KEYGATE_ADMIN_TOKEN: TOKEN }).admin, { port: undefined, host: '127.0.0.1', token: TOKEN }, 'a token alone turns nothing on')
  t.same(loadConfig({ KEYGATE_ADMIN_PORT: '9180', KEYGATE_ADMIN_TOKEN: TOKEN }).admin, { port: 9180, host: '127.0.0.1', token: TOKEN })
  t.same(loadConfig({ KEYGATE_ADMIN_PORT: '9180', KEYGATE_ADMIN_HOST: '10.0.0.7', KEYGATE_ADMIN_TOKEN: TOKEN }).admin,
    { port: 9180, host: '10.0.0.7', token: TOKEN })
  t.equal(loadConfig({ KEYGATE_ADMIN_PORT: '0', PORT: '0', KEYGATE_ADMIN_TOKEN: TOKEN }).admin.port, 0, 'port 0 (a free one) never clashes')
})

t.test('refused: a port without a token, a short or odd token, the public or the metrics port', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ KEYGATE_ADMIN_PORT: '9180' }, /^KEYGATE_ADMIN_TOKEN is not set: KEYGATE_ADMIN_PORT turns the admin API on/],
    [{ KEYGATE_ADMIN_PORT: '9180', KEYGATE_ADMIN_TOKEN: TOKEN.slice(1) }, /^KEYGATE_ADMIN_TOKEN: the value given is not allowed: use 32 to 1024 visible ASCII/],
    [{ KEYGATE_ADMIN_TOKEN: TOKEN.slice(1) }, /^KEYGATE_ADMIN_TOKEN: the value given is not allowed/],
    [{ KEYGATE_ADMIN_TOKEN: `${TOKEN} with spaces` }, /^KEYGATE_ADMIN_TOKEN: the value given is not allowed/],
    [{ KEYGATE_ADMIN_TOKEN: `${TOKEN}\n` }, /^KEYGATE_ADMIN_TOKEN: the value given is not allowed/],
    [{ KEYGATE_ADMIN_PORT: 'admin', KEYGATE_ADMIN_TOKEN: TOKEN }, /^KEYGATE_ADMIN_PORT: "admin" is not allowed: use a whole number from 0 to 65535/],
    [{ KEYGATE_ADMIN_PORT: '8080', KEYGATE_ADMIN_TOKEN: TOKEN }, /^KEYGATE_ADMIN_PORT: 8080 is not allowed: it is the gateway's PORT on the same host/],
    [{ KEYGATE_ADMIN_PORT: '9000', PORT: '9000', KEYGATE_ADMIN_TOKEN: TOKEN }, /it is the gateway's PORT/],
    [{ KEYGATE_ADMIN_PORT: '9000', PORT: '9000', HOST: '0.0.0.0', KEYGATE_ADMIN_TOKEN: TOKEN }, /it is the gateway's PORT/],
    [{ KEYGATE_ADMIN_PORT: '9464', KEYGATE_METRICS_PORT: '9464', KEYGATE_ADMIN_TOKEN: TOKEN }, /^KEYGATE_ADMIN_PORT: 9464 is not allowed: it is KEYGATE_METRICS_PORT/],
    [{ KEYGATE_ADMIN_PORT: '9464', KEYGATE_ADMIN_HOST: '::', KEYGATE_METRICS_PORT: '9464', KEYGATE_ADMIN_TOKEN: TOKEN }, /it is KEYGATE_METRICS_PORT/]
  ]
  for (const [env, message] of cases) {
    const name = JSON.stringify({ ...env, ...(env.KEYGATE_ADMIN_TOKEN !== undefined && { KEYGATE_ADMIN_TOKEN: '...' }) })
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, name)
    try {
      loadConfig(env)
    } catch (err) {
      const token = env.KEYGATE_ADMIN_TOKEN
      t.ok(token === undefined || !(err as Error).message.includes(token.trim()), `${name}: the token is not quoted back`)
    }
  }
  t.same(loadConfig({ KEYGATE_ADMIN_PORT: '9000', PORT: '9000', HOST: '10.0.0.1', KEYGATE_ADMIN_HOST: '127.0.0.1', KEYGATE_ADMIN_TOKEN: TOKEN }).admin.port,
    9000, 'one port on two addresses is two listeners')
})
