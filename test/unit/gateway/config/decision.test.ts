// KEYGATE_DECISION_PORT, KEYGATE_DECISION_HOST, KEYGATE_DECISION_TRUSTED_PROXIES: off by default; a
// port needs the proxies it believes (its own list, else KEYGATE_TRUSTED_PROXIES); never another
// listener's port; an entry that is not an address or a CIDR is named, under its own variable.
import t from 'tap'
import { loadConfig } from '../../../../gateway/src/config/env.js'

t.test('off unless KEYGATE_DECISION_PORT is set; on 127.0.0.1 by default', async (t) => {
  t.same(loadConfig({}).decision, { port: undefined, host: '127.0.0.1', trustedProxies: [] })
  t.same(loadConfig({ KEYGATE_DECISION_TRUSTED_PROXIES: '10.0.0.5' }).decision.port, undefined, 'a list alone turns nothing on')
  t.same(loadConfig({ KEYGATE_DECISION_PORT: '9181', KEYGATE_DECISION_TRUSTED_PROXIES: '127.0.0.1, 10.1.0.0/16' }).decision,
    { port: 9181, host: '127.0.0.1', trustedProxies: ['127.0.0.1', '10.1.0.0/16'] })
  t.same(loadConfig({ KEYGATE_DECISION_PORT: '9181', KEYGATE_DECISION_HOST: '10.0.0.7', KEYGATE_TRUSTED_PROXIES: '10.0.0.1' }).decision,
    { port: 9181, host: '10.0.0.7', trustedProxies: ['10.0.0.1'] }, 'KEYGATE_TRUSTED_PROXIES when it has no list of its own')
  const both = { KEYGATE_DECISION_PORT: '9181', KEYGATE_TRUSTED_PROXIES: '10.0.0.1', KEYGATE_DECISION_TRUSTED_PROXIES: '10.0.0.2' }
  t.same(loadConfig(both).decision.trustedProxies, ['10.0.0.2'], 'its own list wins')
  t.equal(loadConfig({ KEYGATE_DECISION_PORT: '0', PORT: '0', KEYGATE_DECISION_TRUSTED_PROXIES: '::1' }).decision.port, 0, 'port 0 never clashes')
})

t.test('refused at start: no proxies to believe, a bad entry, another listener\'s port', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ KEYGATE_DECISION_PORT: '9181' }, /^KEYGATE_DECISION_TRUSTED_PROXIES is not set: KEYGATE_DECISION_PORT turns decision mode on/],
    [{ KEYGATE_DECISION_PORT: '9181', KEYGATE_DECISION_TRUSTED_PROXIES: '' }, /^KEYGATE_DECISION_TRUSTED_PROXIES is not set/],
    [{ KEYGATE_DECISION_PORT: '9181', KEYGATE_DECISION_TRUSTED_PROXIES: '10.0.0.1,nginx' }, /^KEYGATE_DECISION_TRUSTED_PROXIES: "nginx" \(entry 2\) is not allowed/],
    [{ KEYGATE_DECISION_PORT: 'nine', KEYGATE_DECISION_TRUSTED_PROXIES: '10.0.0.1' }, /^KEYGATE_DECISION_PORT: "nine" is not allowed/],
    [{ KEYGATE_DECISION_PORT: '8080', KEYGATE_DECISION_TRUSTED_PROXIES: '10.0.0.1' }, /^KEYGATE_DECISION_PORT: 8080 is not allowed: it is PORT on the same host/],
    [{ KEYGATE_DECISION_PORT: '9464', KEYGATE_METRICS_PORT: '9464', KEYGATE_DECISION_TRUSTED_PROXIES: '10.0.0.1' }, /it is KEYGATE_METRICS_PORT/],
    [{
      KEYGATE_DECISION_PORT: '9180',
      KEYGATE_DECISION_HOST: '0.0.0.0',
      KEYGATE_ADMIN_PORT: '9180',
      KEYGATE_ADMIN_TOKEN: 'a'.repeat(32),
      KEYGATE_DECISION_TRUSTED_PROXIES: '10.0.0.1'
    }, /it is KEYGATE_ADMIN_PORT/]
  ]
  for (const [env, message] of cases) t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
})
