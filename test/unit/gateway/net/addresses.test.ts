// Which addresses keygate may connect to for someone else: public unicast only; every other kind,
// and every IPv6 form carrying a refused IPv4 address, refused, each with words for messages.
import t from 'tap'
import { classifyAddress } from '../../../../gateway/src/net/addresses.js'

/** [address, public, what a message says it is]; a metadata address is marked "(metadata)" */
const TABLE: Array<[string, boolean, string]> = [
  // IPv4
  ['1.1.1.1', true, 'a public address'],
  ['8.8.8.8', true, 'a public address'],
  ['127.0.0.1', false, 'a loopback address'],
  ['127.255.255.254', false, 'a loopback address'],
  ['10.1.2.3', false, 'a private (RFC 1918) address'],
  ['172.16.0.1', false, 'a private (RFC 1918) address'],
  ['172.31.255.255', false, 'a private (RFC 1918) address'],
  ['192.168.1.1', false, 'a private (RFC 1918) address'],
  ['100.64.0.1', false, 'a carrier-grade NAT address'],
  ['100.127.255.255', false, 'a carrier-grade NAT address'],
  ['169.254.1.1', false, 'a link-local address'],
  ['0.0.0.0', false, 'an unspecified address'],
  ['0.1.2.3', false, 'an unspecified address'],
  ['255.255.255.255', false, 'a broadcast address'],
  ['224.0.0.1', false, 'a multicast address'],
  ['239.255.255.250', false, 'a multicast address'],
  ['240.0.0.1', false, 'a reserved address'],
  ['192.0.2.1', false, 'a reserved address'],
  ['198.51.100.1', false, 'a reserved address'],
  ['203.0.113.1', false, 'a reserved address'],
  ['198.18.0.1', false, 'a reserved address'],
  // metadata services
  ['169.254.169.254', false, 'a link-local (metadata) address'],
  ['100.100.100.200', false, 'a carrier-grade NAT (metadata) address'],
  ['192.0.0.192', false, 'a reserved (metadata) address'],
  ['168.63.129.16', false, 'a metadata address'],
  ['fd00:ec2::254', false, 'a unique-local (metadata) address'],
  // IPv6
  ['2606:4700:4700::1111', true, 'a public address'],
  ['2001:4860:4860::8888', true, 'a public address'],
  ['::1', false, 'a loopback address'],
  ['::', false, 'an unspecified address'],
  ['fe80::1', false, 'a link-local address'],
  ['fe80::1%eth0', false, 'a link-local address'],
  ['febf::1', false, 'a link-local address'],
  ['fc00::1', false, 'a unique-local address'],
  ['fd12:3456::1', false, 'a unique-local address'],
  ['fec0::1', false, 'a site-local address'],
  ['ff02::1', false, 'a multicast address'],
  ['2001:db8::1', false, 'a reserved address'],
  ['100::1', false, 'a discard-only address'],
  ['4000::1', false, 'an unallocated address (outside 2000::/3)'],
  // IPv6 carrying IPv4: judged by the IPv4 address
  ['::ffff:127.0.0.1', false, 'an IPv4-mapped address of 127.0.0.1, a loopback address'],
  ['::ffff:7f00:1', false, 'an IPv4-mapped address of 127.0.0.1, a loopback address'],
  ['::ffff:10.0.0.1', false, 'an IPv4-mapped address of 10.0.0.1, a private (RFC 1918) address'],
  ['::ffff:169.254.169.254', false, 'an IPv4-mapped address of 169.254.169.254, a link-local (metadata) address'],
  ['::ffff:1.1.1.1', true, 'a public address (IPv4-mapped, of 1.1.1.1)'],
  ['::ffff:0:10.0.0.1', false, 'an IPv4-translated address of 10.0.0.1, a private (RFC 1918) address'],
  ['::127.0.0.1', false, 'an IPv4-compatible address (::/96, deprecated)'],
  ['::1.1.1.1', false, 'an IPv4-compatible address (::/96, deprecated)'],
  ['64:ff9b::127.0.0.1', false, 'a NAT64 address of 127.0.0.1, a loopback address'],
  ['64:ff9b::a9fe:a9fe', false, 'a NAT64 address of 169.254.169.254, a link-local (metadata) address'],
  ['64:ff9b::192.168.0.1', false, 'a NAT64 address of 192.168.0.1, a private (RFC 1918) address'],
  ['64:ff9b::1.1.1.1', true, 'a public address (NAT64, of 1.1.1.1)'],
  ['64:ff9b:1::1', false, 'a local-use NAT64 address (64:ff9b:1::/48)'],
  ['2002:a00:1::1', false, 'a 6to4 address of 10.0.0.1, a private (RFC 1918) address'],
  ['2002:a9fe:a9fe::1', false, 'a 6to4 address of 169.254.169.254, a link-local (metadata) address'],
  ['2002:101:101::1', true, 'a public address (6to4, of 1.1.1.1)'],
  // Teredo: the server's address, then the client's, stored inverted (RFC 4380's example: 65.54.227.120 and 192.0.2.45)
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', false, 'a Teredo address of 192.0.2.45, a reserved address'],
  ['2001:0:a00:1::', false, 'a Teredo address of 10.0.0.1, a private (RFC 1918) address'],
  ['2001:0:101:101:0:0:f7f7:f7f7', true, 'a public address (Teredo, of 1.1.1.1 and 8.8.8.8)'],
  // not an address
  ['127.1', false, 'not an IP address'],
  ['0x7f.0.0.1', false, 'not an IP address'],
  ['localhost', false, 'not an IP address'],
  ['', false, 'not an IP address']
]

t.test('each address: public or not, and what it is', async (t) => {
  for (const [address, isPublic, description] of TABLE) {
    const verdict = classifyAddress(address)
    t.same({ public: verdict.public, description: verdict.description }, { public: isPublic, description }, address)
    t.equal(verdict.metadata, description.includes('(metadata)') || description === 'a metadata address', `${address}: metadata or not`)
  }
})
