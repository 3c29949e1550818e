// The client's address behind trusted proxies, as values: the trusted list (addresses and CIDRs,
// IPv4 and IPv6, IPv4-mapped), the walk over X-Forwarded-For or Forwarded from the right, what an
// entry that is not an address does, and what is passed on upstream. Through real sockets:
// test/unit/gateway/http/plugins/client-address.test.ts; behind a real nginx:
// test/system/trusted-proxies.test.ts.
import t from 'tap'
import {
  clientAddress, entryAddress, forwardedForEntries, forwardedForValues, InvalidProxyEntry, trustedProxies, type ClientAddressHeader
} from '../../../../gateway/src/lib/client-address.js'

t.test('trusted proxies: addresses and CIDRs, IPv4 and IPv6, whatever the spelling', async (t) => {
  const proxies = trustedProxies(' 127.0.0.1 ,10.0.0.0/8, 192.168.1.0/24,2001:db8::1, fd00::/8,::ffff:172.16.0.0/108')
  t.same(proxies.entries, ['127.0.0.1', '10.0.0.0/8', '192.168.1.0/24', '2001:db8::1', 'fd00::/8', '::ffff:172.16.0.0/108'], 'entries trimmed')
  const cases: Array<[string, boolean, string]> = [
    ['127.0.0.1', true, 'an address'],
    ['127.0.0.2', false, 'the next address'],
    ['::ffff:127.0.0.1', true, 'IPv4-mapped IPv6, as a dual-stack socket reports an IPv4 peer'],
    ['::FFFF:7f00:1', true, 'IPv4-mapped, in hex and upper case'],
    ['0:0:0:0:0:ffff:127.0.0.1', true, 'IPv4-mapped, spelt out'],
    ['10.255.3.4', true, 'inside a /8'],
    ['11.0.0.1', false, 'outside it'],
    ['192.168.1.254', true, 'inside a /24'],
    ['192.168.2.1', false, 'outside it'],
    ['2001:db8::1', true, 'an IPv6 address'],
    ['2001:DB8:0:0::1', true, 'the same, written otherwise'],
    ['2001:db8::2', false, 'another IPv6 address'],
    ['fd12:3456::9', true, 'inside an IPv6 CIDR'],
    ['fe80::1', false, 'outside it'],
    ['172.16.9.9', true, 'inside an IPv4-mapped CIDR (::ffff:172.16.0.0/108 is 172.16.0.0/12)'],
    ['172.32.0.1', false, 'outside it'],
    ['::ffff:10.1.1.1', true, 'an IPv4-mapped address inside an IPv4 CIDR'],
    ['::ffff:0a01:0101', true, 'the same in hex'],
    ['::10.1.1.1', false, 'IPv4-compatible (deprecated) is not IPv4-mapped'],
    ['unknown', false, 'not an address'],
    ['', false, 'nothing'],
    ['127.0.0.1:8080', false, 'an address with a port is not a socket address']
  ]
  for (const [address, trusted, label] of cases) t.equal(proxies.trusts(address), trusted, `${address}: ${label}`)

  t.equal(trustedProxies('').trusts('127.0.0.1'), false, 'an empty list trusts nobody')
  t.same(trustedProxies('').entries, [])
  t.equal(trustedProxies('::/0').trusts('1.2.3.4'), false, '::/0 is every IPv6 address, not IPv4 too')
  t.equal(trustedProxies('0.0.0.0/0').trusts('::1'), false, '0.0.0.0/0 is every IPv4 address, not IPv6')
  t.equal(trustedProxies('0.0.0.0/0').trusts('::ffff:8.8.8.8'), true, 'IPv4-mapped peers are IPv4')
  t.equal(trustedProxies('::ffff:10.0.0.1').trusts('10.0.0.1'), true, 'an IPv4-mapped entry trusts the IPv4 address')
  t.equal(trustedProxies('10.0.0.1/8').trusts('10.9.9.9'), true, 'a CIDR with host bits set is its network')
  t.equal(trustedProxies('fe80::/10').trusts('fe80::1%eth0'), true, 'a socket address with a zone is matched by its address')
  t.equal(trustedProxies(['127.0.0.1']).trusts('127.0.0.1'), true, 'an array of entries')
})

t.test('trusted proxies: an entry that is neither an address nor a CIDR is refused, named with its position', async (t) => {
  const bad: Array<[string, string, number]> = [
    ['10.0.0.300', '10.0.0.300', 1],
    ['127.0.0.1,10.0.0.0/33', '10.0.0.0/33', 2],
    ['::1/129', '::1/129', 1],
    ['fd00::/x', 'fd00::/x', 1],
    ['10.0.0.0/', '10.0.0.0/', 1],
    ['10.0.0.0/08', '10.0.0.0/08', 1],
    ['10.0.0.0/8/8', '10.0.0.0/8/8', 1],
    ['10.0.0.1,,10.0.0.2', '', 2],
    ['10.0.0.1,', '', 2],
    ['localhost', 'localhost', 1],
    ['[::1]', '[::1]', 1],
    ['fe80::1%eth0', 'fe80::1%eth0', 1],
    ['1.2.3.4 5.6.7.8', '1.2.3.4 5.6.7.8', 1],
    ['10.0.0.1-10.0.0.9', '10.0.0.1-10.0.0.9', 1],
    ['loopback', 'loopback', 1]
  ]
  for (const [list, entry, position] of bad) {
    t.throws(() => trustedProxies(list), new InvalidProxyEntry(entry, position), JSON.stringify(list))
  }
  t.match(new InvalidProxyEntry('x', 3).message, /^entry 3 \("x"\) is not an IPv4 or IPv6 address or CIDR$/)
})

t.test('a header entry\'s address: IPv4, IPv6, with a port, in brackets; nothing else', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['203.0.113.7', '203.0.113.7'],
    [' 203.0.113.7 ', '203.0.113.7'],
    ['203.0.113.7:4711', '203.0.113.7'],
    ['2001:db8::1', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['[2001:db8::1]:4711', '2001:db8::1'],
    ['::ffff:127.0.0.1', '::ffff:127.0.0.1'],
    ['unknown', undefined],
    ['_hidden', undefined],
    ['example.com', undefined],
    ['203.0.113.7:', undefined],
    ['203.0.113.7:123456', undefined],
    ['203.0.113', undefined],
    ['0203.0.113.7', undefined],
    ['[203.0.113.7]', undefined],
    ['[2001:db8::1', undefined],
    ['[2001:db8::1]x', undefined],
    ['fe80::1%eth0', undefined],
    ['1.2.3.4 5.6.7.8', undefined],
    ['', undefined],
    ['1'.repeat(100), undefined]
  ]
  for (const [entry, address] of cases) t.equal(entryAddress(entry), address, JSON.stringify(entry))
})

t.test('parsing: X-Forwarded-For entries and Forwarded elements (RFC 7239)', async (t) => {
  t.same(forwardedForEntries('203.0.113.7, 10.0.0.2'), ['203.0.113.7', '10.0.0.2'])
  t.same(forwardedForEntries(' ,203.0.113.7,, 10.0.0.2 ,'), ['203.0.113.7', '10.0.0.2'], 'empty entries are skipped')
  t.same(forwardedForEntries(''), [])

  const cases: Array<[string, Array<string | undefined>, string]> = [
    ['for=192.0.2.60;proto=http;by=203.0.113.43', ['192.0.2.60'], 'the RFC\'s example'],
    ['for="[2001:db8:cafe::17]:4711"', ['[2001:db8:cafe::17]:4711'], 'quoted IPv6 with a port'],
    ['for=192.0.2.43, for=198.51.100.17', ['192.0.2.43', '198.51.100.17'], 'two elements'],
    ['For=192.0.2.43;PROTO=https', ['192.0.2.43'], 'parameter names in any case'],
    ['proto=https; for = 192.0.2.43', [undefined], 'no whitespace around "="'],
    ['  proto=https ;for=192.0.2.43  ', ['192.0.2.43'], 'for= need not come first; whitespace around pairs'],
    ['for=unknown', ['unknown'], 'unknown, as written'],
    ['for="_gazonk"', ['_gazonk'], 'an obfuscated identifier, as written'],
    ['for="a, b; c", for=1.2.3.4', ['a, b; c', '1.2.3.4'], 'quoted strings hold "," and ";"'],
    ['for="a\\"b"', ['a"b'], 'quoted-pair'],
    ['by=10.0.0.1', [undefined], 'an element without for='],
    ['for=1.1.1.1;for=2.2.2.2', [undefined], 'for= twice in one element'],
    ['for=', [undefined], 'an empty value'],
    ['for=1.2.3.4 x, for=5.6.7.8', [undefined, '5.6.7.8'], 'a malformed element, then a good one'],
    ['for="unterminated, for=5.6.7.8', [undefined], 'an unterminated quote takes the rest of the header'],
    ['=x, for=5.6.7.8', [undefined, '5.6.7.8'], 'no parameter name'],
    [',, for=5.6.7.8 ,', ['5.6.7.8'], 'empty elements are skipped'],
    ['', [], 'empty'],
    [';', [undefined], 'an element of nothing but ";"']
  ]
  for (const [header, values, label] of cases) t.same(forwardedForValues(header), values, `${label}: ${header}`)
})

t.test('a hostile header costs linear time', async (t) => {
  const hostile = ['"'.repeat(16_000), 'for='.repeat(4000), 'for=1.2.3.4;'.repeat(1300), ',"\\'.repeat(5000), `for="${'a'.repeat(16_000)}"`, ','.repeat(16_000)]
  const proxies = trustedProxies('127.0.0.1,10.0.0.0/8')
  const started = performance.now()
  for (const header of hostile) {
    for (const mode of ['forwarded', 'x-forwarded-for'] as const) {
      clientAddress('127.0.0.1', { forwarded: header, 'x-forwarded-for': header }, proxies, mode)
    }
  }
  const ms = performance.now() - started
  t.ok(ms < 500, `${hostile.length} 16 KB headers in both modes: ${ms.toFixed(1)} ms`)
})

const proxies = trustedProxies('127.0.0.1,10.0.0.0/8,2001:db8:1::/48')
const resolve = (peer: string, headers: Record<string, string | string[]>, header: ClientAddressHeader = 'x-forwarded-for') =>
  clientAddress(peer, headers, proxies, header)

t.test('X-Forwarded-For: the right-most entry that is not a trusted proxy; from any other peer, ignored', async (t) => {
  const cases: Array<[string, string | undefined, string, string]> = [
    // peer, X-Forwarded-For, client, why
    ['203.0.113.7', '1.2.3.4', '203.0.113.7', 'an untrusted peer is the client, whatever it says'],
    ['127.0.0.1', undefined, '127.0.0.1', 'a trusted peer that reports nobody is the client (its own health check)'],
    ['127.0.0.1', '', '127.0.0.1', 'an empty header reports nobody'],
    ['127.0.0.1', '203.0.113.7', '203.0.113.7', 'one hop: the entry the proxy appended'],
    ['127.0.0.1', '1.2.3.4, 203.0.113.7', '203.0.113.7', 'what the client sent itself (left) is not believed'],
    ['127.0.0.1', '1.2.3.4, 203.0.113.7, 10.0.0.2', '203.0.113.7', 'two trusted hops: the balancer, then the proxy before it'],
    ['10.1.1.1', '203.0.113.7, 10.0.0.3, 10.0.0.2', '203.0.113.7', 'three trusted hops, the peer in a CIDR'],
    ['127.0.0.1', '10.0.0.3, 10.0.0.2', '10.0.0.3', 'every hop trusted: the left-most'],
    ['::ffff:127.0.0.1', '203.0.113.7', '203.0.113.7', 'a trusted peer written IPv4-mapped'],
    ['127.0.0.1', '::ffff:10.0.0.2, 198.51.100.1, ::ffff:10.0.0.3', '198.51.100.1', 'IPv4-mapped hops are trusted as IPv4'],
    ['2001:db8:1::5', '2001:db8:2::9, 2001:db8:1::7', '2001:db8:2::9', 'IPv6 peer and hops, trusted by CIDR'],
    ['127.0.0.1', '[2001:db8:2::9]:4711, 10.0.0.2:80', '2001:db8:2::9', 'entries with ports and brackets'],
    ['127.0.0.1', ' ,203.0.113.7 ,, ', '203.0.113.7', 'empty entries are skipped'],
    // an entry that is not an address ends the walk at the last trusted hop
    ['127.0.0.1', 'garbage', '127.0.0.1', 'garbage where the proxy\'s entry should be: the proxy itself'],
    ['127.0.0.1', '203.0.113.7, garbage, 10.0.0.2', '10.0.0.2', 'garbage behind a trusted hop: that hop, never what is left of the garbage'],
    ['127.0.0.1', 'garbage, 203.0.113.7', '203.0.113.7', 'garbage left of the client is never read'],
    ['127.0.0.1', 'unknown, 10.0.0.2', '10.0.0.2', 'unknown (what Squid writes): the hop that reported it'],
    ['127.0.0.1', '203.0.113.7, fe80::1%eth0', '127.0.0.1', 'an address with a zone is no entry'],
    ['127.0.0.1', '203.0.113.7, 10.0.0.2 10.0.0.3', '127.0.0.1', 'two addresses with no comma'],
    ['127.0.0.1', '203.0.113.7, <script>', '127.0.0.1', 'markup']
  ]
  for (const [peer, xff, client, why] of cases) {
    t.equal(resolve(peer, xff === undefined ? {} : { 'x-forwarded-for': xff }).ip, client, `${why}: ${peer} said ${JSON.stringify(xff)}`)
  }
  t.equal(resolve('127.0.0.1', { 'x-forwarded-for': ['1.2.3.4', '203.0.113.7'] }).ip, '203.0.113.7', 'two header lines are one list')
})

t.test('X-Forwarded-For mode: what the upstream gets', async (t) => {
  t.same(resolve('203.0.113.7', { 'x-forwarded-for': '1.2.3.4', 'x-forwarded-proto': 'https', forwarded: 'for=1.2.3.4' }),
    { ip: '203.0.113.7', hop: undefined }, 'an untrusted peer: nothing of its headers (the upstream gets its address alone)')
  t.same(resolve('127.0.0.1', {
    'x-forwarded-for': '1.2.3.4, 203.0.113.7',
    'x-forwarded-proto': 'https',
    'x-forwarded-host': 'api.example.com',
    forwarded: 'for=6.6.6.6'
  }), {
    ip: '203.0.113.7',
    hop: { forwardedFor: '1.2.3.4, 203.0.113.7, 127.0.0.1', headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com' } }
  }, 'a trusted peer: its chain as received, then its address; its X-Forwarded-Proto and -Host; never Forwarded, which it did not write')
  t.same(resolve('127.0.0.1', {}), { ip: '127.0.0.1', hop: { forwardedFor: '127.0.0.1', headers: {} } }, 'nothing received: the peer alone')
  t.equal(resolve('127.0.0.1', { 'x-forwarded-for': ' 203.0.113.7 ' }).hop?.forwardedFor, '203.0.113.7, 127.0.0.1', 'trimmed')
  t.equal(resolve('127.0.0.1', { 'x-forwarded-for': 'garbage' }).hop?.forwardedFor, 'garbage, 127.0.0.1',
    'the chain passes on as received (as nginx\'s $proxy_add_x_forwarded_for does); the upstream applies the same rule')
  t.equal(resolve('127.0.0.1', { forwarded: 'for=203.0.113.7' }).ip, '127.0.0.1', 'Forwarded is not read in this mode')
})

t.test('Forwarded (RFC 7239) mode: for= from the right, the same rule', async (t) => {
  const cases: Array<[string, string | undefined, string, string]> = [
    ['203.0.113.7', 'for=1.2.3.4', '203.0.113.7', 'an untrusted peer is the client'],
    ['127.0.0.1', undefined, '127.0.0.1', 'a trusted peer that reports nobody'],
    ['127.0.0.1', 'for=192.0.2.60;proto=http;by=203.0.113.43', '192.0.2.60', 'the RFC\'s example'],
    ['127.0.0.1', 'for="[2001:db8:cafe::17]:4711"', '2001:db8:cafe::17', 'quoted IPv6 with a port'],
    ['127.0.0.1', 'for=1.2.3.4, for=203.0.113.7, for=10.0.0.2', '203.0.113.7', 'trusted hops skipped, the client\'s own element not believed'],
    ['127.0.0.1', 'for=203.0.113.7, for="[::ffff:10.0.0.2]"', '203.0.113.7', 'an IPv4-mapped hop is trusted as IPv4'],
    ['127.0.0.1', 'for=203.0.113.7, for=unknown', '127.0.0.1', 'unknown: the hop that said so'],
    ['127.0.0.1', 'for=203.0.113.7, for=_hidden, for=10.0.0.2', '10.0.0.2', 'an obfuscated node: the trusted hop that reported it'],
    ['127.0.0.1', 'for=203.0.113.7, by=10.0.0.2', '127.0.0.1', 'an element without for='],
    ['127.0.0.1', 'for=203.0.113.7, for=garbage!', '127.0.0.1', 'a malformed element'],
    ['127.0.0.1', 'for="1.2.3.4, 203.0.113.7"', '127.0.0.1', 'a quoted comma does not make two elements'],
    ['127.0.0.1', 'for=1.2.3.4, for="unterminated, for=203.0.113.7', '127.0.0.1', 'an unterminated quote'],
    ['127.0.0.1', 'for=203.0.113.7:4711', '127.0.0.1', 'an unquoted port is not RFC 7239 syntax (":" needs quotes): a malformed element']
  ]
  for (const [peer, forwarded, client, why] of cases) {
    t.equal(resolve(peer, forwarded === undefined ? {} : { forwarded }, 'forwarded').ip, client, `${why}: ${JSON.stringify(forwarded)}`)
  }
  t.equal(resolve('127.0.0.1', { 'x-forwarded-for': '203.0.113.7' }, 'forwarded').ip, '127.0.0.1', 'X-Forwarded-For is not read in this mode')
})

t.test('Forwarded mode: what the upstream gets', async (t) => {
  t.same(resolve('127.0.0.1', {
    forwarded: 'for=1.2.3.4, for="[2001:db8::9]:4711";proto=https, for=unknown',
    'x-forwarded-for': '6.6.6.6',
    'x-forwarded-proto': 'http'
  }, 'forwarded'), {
    ip: '127.0.0.1',
    hop: {
      forwardedFor: '1.2.3.4, 2001:db8::9, unknown, 127.0.0.1',
      headers: { forwarded: 'for=1.2.3.4, for="[2001:db8::9]:4711";proto=https, for=unknown, for=127.0.0.1' }
    }
  }, 'Forwarded as received with an element for the peer; X-Forwarded-For made from its for= values; no client X-Forwarded-*')
  t.same(resolve('2001:db8:1::5', {}, 'forwarded').hop, { forwardedFor: '2001:db8:1::5', headers: { forwarded: 'for="[2001:db8:1::5]"' } },
    'an IPv6 peer is quoted and bracketed')
  t.equal(resolve('127.0.0.1', { forwarded: 'for="1.2.3.4, 5.6.7.8"' }, 'forwarded').hop?.forwardedFor, 'unknown, 127.0.0.1',
    'a value that is not an address becomes unknown in X-Forwarded-For, never text that would read as more entries')
})
