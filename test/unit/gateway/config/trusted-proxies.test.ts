// KEYGATE_TRUSTED_PROXIES and KEYGATE_TRUSTED_PROXY_HEADER: checked at start, a bad entry named.
import t from 'tap'
import { loadConfig } from '../../../../gateway/src/config/env.js'

t.test('by default nobody is trusted and X-Forwarded-For is the header', async (t) => {
  t.same(loadConfig({}).clientAddress, { trustedProxies: [], header: 'x-forwarded-for' })
  t.same(loadConfig({ KEYGATE_TRUSTED_PROXIES: '' }).clientAddress.trustedProxies, [], 'an empty value is unset')
})

t.test('addresses and CIDRs, IPv4 and IPv6, comma-separated', async (t) => {
  const config = loadConfig({ KEYGATE_TRUSTED_PROXIES: '127.0.0.1, 10.0.0.0/8,fd00::/8 , 2001:db8::1,::ffff:192.168.0.0/112' })
  t.same(config.clientAddress.trustedProxies, ['127.0.0.1', '10.0.0.0/8', 'fd00::/8', '2001:db8::1', '::ffff:192.168.0.0/112'])
  t.equal(loadConfig({ KEYGATE_TRUSTED_PROXY_HEADER: 'forwarded' }).clientAddress.header, 'forwarded')
  t.equal(loadConfig({ KEYGATE_TRUSTED_PROXY_HEADER: 'x-forwarded-for' }).clientAddress.header, 'x-forwarded-for')
})

t.test('a bad entry stops the start, named with its position and what the variable takes', async (t) => {
  const use = 'is not allowed: use IPv4 or IPv6 addresses and CIDRs, comma-separated (10.0.0.5,10.1.0.0/16,fd00::/8)'
  const cases: Array<[string, string]> = [
    ['10.0.0.300', `KEYGATE_TRUSTED_PROXIES: "10.0.0.300" (entry 1) ${use}`],
    ['127.0.0.1,10.0.0.0/33', `KEYGATE_TRUSTED_PROXIES: "10.0.0.0/33" (entry 2) ${use}`],
    ['127.0.0.1,,10.0.0.1', `KEYGATE_TRUSTED_PROXIES: "" (entry 2) ${use}`],
    ['fd00::/129', `KEYGATE_TRUSTED_PROXIES: "fd00::/129" (entry 1) ${use}`],
    ['nginx', `KEYGATE_TRUSTED_PROXIES: "nginx" (entry 1) ${use}`],
    ['10.0.0.1 10.0.0.2', `KEYGATE_TRUSTED_PROXIES: "10.0.0.1 10.0.0.2" (entry 1) ${use}`],
    ['[::1]', `KEYGATE_TRUSTED_PROXIES: "[::1]" (entry 1) ${use}`]
  ]
  for (const [value, message] of cases) {
    t.throws(() => loadConfig({ KEYGATE_TRUSTED_PROXIES: value }), { name: 'ConfigError', message }, value)
  }
  t.throws(() => loadConfig({ KEYGATE_TRUSTED_PROXY_HEADER: 'x-real-ip' }), {
    name: 'ConfigError',
    message: 'KEYGATE_TRUSTED_PROXY_HEADER: "x-real-ip" is not allowed: use one of x-forwarded-for or forwarded'
  })
  t.throws(() => loadConfig({ KEYGATE_TRUSTED_PROXY_HEADER: 'X-Forwarded-For' }), { name: 'ConfigError' }, 'lower case, as HTTP/2 writes names')
})
