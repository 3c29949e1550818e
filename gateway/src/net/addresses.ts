// What kind of address an IP address is, for deciding whether keygate may connect to it on
// behalf of someone else (an agent naming its key directory's URL). Public unicast addresses are
// allowed; everything else is not: loopback, private, carrier-grade NAT, link-local, unique-local,
// unspecified, broadcast, multicast, reserved and documentation ranges, and the cloud metadata
// addresses. An IPv6 address that carries an IPv4 address (IPv4-mapped, IPv4-compatible, IPv4-
// translated, NAT64's 64:ff9b::/96, 6to4, Teredo) is judged by the IPv4 address it carries.
//
// The ranges are ipaddr.js's (its range()); what it does not say is added here: the metadata
// addresses, the IPv4 addresses inside NAT64, 6to4, Teredo and IPv4-compatible addresses, and
// that only 2000::/3 holds global IPv6 unicast.
import { isIP, isIPv6 } from 'node:net'
import ipaddr from 'ipaddr.js'

export interface AddressVerdict {
  /** public unicast: keygate may connect to it for anyone */
  public: boolean
  /** a cloud provider's instance metadata service (refused even for an origin the operator pinned) */
  metadata: boolean
  /** what it is, for messages: "a loopback address", "a link-local (metadata) address", "a public address" */
  description: string
}

/**
 * The instance metadata services of cloud providers (credentials live there): AWS, GCP, Azure and
 * OpenStack on 169.254.169.254, AWS's IPv6 one, Alibaba Cloud's, Oracle Cloud's, and Azure's
 * WireServer (168.63.129.16, a public address that only answers inside Azure).
 */
const METADATA = new Set(['169.254.169.254', 'fd00:ec2::254', '100.100.100.200', '192.0.0.192', '168.63.129.16'])

/** ipaddr.js's range names, in words */
const RANGE_WORDS: Readonly<Record<string, string>> = {
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT',
  private: 'private (RFC 1918)',
  reserved: 'reserved',
  uniqueLocal: 'unique-local',
  deprecatedSiteLocal: 'site-local',
  discard: 'discard-only',
  benchmarking: 'benchmarking',
  as112: 'AS112',
  as112v6: 'AS112',
  amt: 'AMT'
}

const article = (words: string): string => /^[aeiou]/i.test(words) && !/^uni/.test(words) ? `an ${words}` : `a ${words}`

/**
 * An IPv6 address as Node.js reads it (WHATWG URL's parser): ipaddr.js reads "::a.b.c.d" as
 * IPv4-mapped, where it is IPv4-compatible (::7f00:1 for ::127.0.0.1). The zone (%eth0) is dropped.
 */
const canonicalIPv6 = (address: string): string => new URL(`http://[${address.replace(/%.*$/, '')}]`).hostname.slice(1, -1)

const v4 = (high: number, low: number): ipaddr.IPv4 => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff])

/** The IPv4 address an IPv6 address carries, with the name of the way it carries it, if it does. */
function embeddedIPv4 (address: ipaddr.IPv6, range: string): { how: string; inner: ipaddr.IPv4[] } | undefined {
  const p = address.parts as [number, number, number, number, number, number, number, number]
  switch (range) {
    case 'ipv4Mapped': return { how: 'IPv4-mapped', inner: [v4(p[6], p[7])] }
    case 'rfc6145': return { how: 'IPv4-translated', inner: [v4(p[6], p[7])] }
    case '6to4': return { how: '6to4', inner: [v4(p[1], p[2])] }
    // the server's address, and the client's, stored inverted
    case 'teredo': return { how: 'Teredo', inner: [v4(p[2], p[3]), v4(~p[6] & 0xffff, ~p[7] & 0xffff)] }
  }
  if (address.match(ipaddr.IPv6.parseCIDR('64:ff9b::/96'))) return { how: 'NAT64', inner: [v4(p[6], p[7])] }
  return undefined
}

/** Whether `address` (an IPv4 or IPv6 address, as a resolver or a URL gives it) is public, and what it is. */
export function classifyAddress (address: string): AddressVerdict {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6
  // only the forms the socket takes as an address (no "127.1", "0x7f.0.0.1": those it would look up)
  if (isIP(address) === 0) return { public: false, metadata: false, description: 'not an IP address' }
  try {
    parsed = ipaddr.parse(isIPv6(address) ? canonicalIPv6(address) : address)
  } catch {
    return { public: false, metadata: false, description: 'not an IP address' }
  }
  const normal = parsed.kind() === 'ipv6' ? (parsed as ipaddr.IPv6).toRFC5952String() : parsed.toString()
  if (METADATA.has(normal)) {
    const range = parsed.range() as string
    return { public: false, metadata: true, description: `${article(range === 'unicast' ? 'metadata' : `${RANGE_WORDS[range] ?? range} (metadata)`)} address` }
  }
  if (parsed.kind() === 'ipv4') {
    const range = parsed.range() as string
    if (range === 'unicast') return { public: true, metadata: false, description: 'a public address' }
    return { public: false, metadata: false, description: `${article(RANGE_WORDS[range] ?? range)} address` }
  }
  const v6 = parsed as ipaddr.IPv6
  const range = v6.range() as string
  const embedded = embeddedIPv4(v6, range)
  if (embedded !== undefined) {
    const verdicts = embedded.inner.map((inner) => ({ inner: inner.toString(), verdict: classifyAddress(inner.toString()) }))
    const refused = verdicts.find(({ verdict }) => !verdict.public)
    if (refused === undefined) {
      return { public: true, metadata: false, description: `a public address (${embedded.how}, of ${verdicts.map(({ inner }) => inner).join(' and ')})` }
    }
    const { inner, verdict } = refused
    return { public: false, metadata: verdict.metadata, description: `${article(embedded.how)} address of ${inner}, ${verdict.description}` }
  }
  // ::a.b.c.d: IPv4-compatible, deprecated (RFC 4291) and never routed, whatever it carries
  if (range === 'unicast' && v6.parts.slice(0, 6).every((part) => part === 0)) {
    return { public: false, metadata: false, description: 'an IPv4-compatible address (::/96, deprecated)' }
  }
  if (range === 'rfc6052') return { public: false, metadata: false, description: 'a local-use NAT64 address (64:ff9b:1::/48)' }
  if (range === 'unicast') {
    if (v6.match(ipaddr.IPv6.parseCIDR('2000::/3'))) return { public: true, metadata: false, description: 'a public address' }
    return { public: false, metadata: false, description: 'an unallocated address (outside 2000::/3)' }
  }
  return { public: false, metadata: false, description: `${article(RANGE_WORDS[range] ?? range)} address` }
}
