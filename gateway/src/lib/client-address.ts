// Who the client is when keygate sits behind a load balancer: the trusted proxies (addresses and
// CIDRs), and the client address read from the forwarding header they write.
//
// The rule (nginx's real_ip_recursive, Envoy's trusted hops, Express's trust proxy): a request's
// peer that is not a trusted proxy is the client, and whatever forwarding headers it sent are
// ignored. When the peer is trusted, the header's entries are read from the right (the entry the
// peer itself appended first); each trusted entry is skipped, and the first one that is not trusted
// is the client. An entry that is not an IP address (garbage, `unknown`, an RFC 7239 obfuscated
// name, a malformed element) ends the walk: nobody trusted vouched for anything to its left, so the
// client is the last trusted hop that reported it. The client address is therefore always an IP
// address that a trusted proxy, or the socket, gave; never text a client chose.
//
// Exactly one header is read, the one the trusted proxies write (`x-forwarded-for`, or RFC 7239
// `forwarded`): a proxy that writes one usually passes the other on from the client untouched
// (nginx's `$proxy_add_x_forwarded_for` leaves a client's `Forwarded` as it came), so reading both
// would let a client choose its own address.
import { isIPv4, isIPv6 } from 'node:net'
import { sha256Base64url } from './sha256.js'

export const CLIENT_ADDRESS_HEADERS = ['x-forwarded-for', 'forwarded'] as const
export type ClientAddressHeader = typeof CLIENT_ADDRESS_HEADERS[number]

/** An address in a form that can be compared: IPv4 (also IPv4-mapped IPv6) as 4 bytes, IPv6 as 16. */
interface ParsedAddress {
  v4: boolean
  bytes: number[]
}

/** The longest text an address with a port and brackets can be: anything longer is not one. */
const MAX_ADDRESS_LENGTH = 64

/** Eight 16-bit groups of an IPv6 address (already checked by isIPv6, zone removed). */
export function ipv6Groups (ip: string): number[] {
  const toGroups = (part: string): number[] => part === ''
    ? []
    : part.split(':').flatMap((group) => {
      if (!group.includes('.')) return [parseInt(group, 16)]
      const [a = 0, b = 0, c = 0, d = 0] = group.split('.').map(Number)
      return [(a << 8) | b, (c << 8) | d]
    })
  const [head = '', tail] = ip.split('::')
  const first = toGroups(head)
  if (tail === undefined) return first
  const last = toGroups(tail)
  return [...first, ...new Array<number>(8 - first.length - last.length).fill(0), ...last]
}

const ipv6Bytes = (ip: string): number[] => ipv6Groups(ip).flatMap((g) => [g >> 8, g & 0xff])

/** A bare IP address (IPv6 with or without a zone), parsed; undefined when it is not one. */
function parseAddress (ip: string): ParsedAddress | undefined {
  if (isIPv4(ip)) return { v4: true, bytes: ip.split('.').map(Number) }
  const bare = ip.split('%', 1)[0] ?? ''
  if (!isIPv6(ip) || !isIPv6(bare)) return undefined
  const bytes = ipv6Bytes(bare)
  // ::ffff:a.b.c.d is the IPv4 address a.b.c.d (what a dual-stack socket reports for IPv4 peers)
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff
  return mapped ? { v4: true, bytes: bytes.slice(12) } : { v4: false, bytes }
}

/**
 * The IP address a forwarding header's entry names, without port or brackets: `192.0.2.1`,
 * `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:4711`. Undefined for anything
 * else (`unknown`, `_hidden`, a host name, garbage), and for IPv6 zones, which no proxy reports.
 */
export function entryAddress (entry: string): string | undefined {
  const text = entry.trim()
  if (text.length === 0 || text.length > MAX_ADDRESS_LENGTH || text.includes('%')) return undefined
  if (text.startsWith('[')) {
    const close = text.indexOf(']')
    const rest = text.slice(close + 1)
    const ip = text.slice(1, close)
    if (close === -1 || !isIPv6(ip) || (rest !== '' && !/^:[0-9]{1,5}$/.test(rest))) return undefined
    return ip
  }
  if (isIPv4(text) || isIPv6(text)) return text
  const colon = text.indexOf(':')
  if (colon !== -1 && text.indexOf(':', colon + 1) === -1 && /^[0-9]{1,5}$/.test(text.slice(colon + 1)) && isIPv4(text.slice(0, colon))) {
    return text.slice(0, colon)
  }
  return undefined
}

interface Rule extends ParsedAddress {
  prefix: number
}

function matches (rule: Rule, address: ParsedAddress): boolean {
  if (rule.v4 !== address.v4) return false
  let bits = rule.prefix
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff
    if (((rule.bytes[i] ?? 0) & mask) !== ((address.bytes[i] ?? 0) & mask)) return false
  }
  return true
}

/** A trusted-proxies entry that is neither an address nor a CIDR; `entry` is the text as given. */
export class InvalidProxyEntry extends RangeError {
  override name = 'InvalidProxyEntry'
  readonly entry: string
  readonly position: number
  constructor (entry: string, position: number) {
    super(`entry ${position} (${JSON.stringify(entry)}) is not an IPv4 or IPv6 address or CIDR`)
    this.entry = entry
    this.position = position
  }
}

/** One entry of the trusted proxies: `10.0.0.5`, `10.0.0.0/8`, `2001:db8::1`, `fd00::/8`, `::ffff:10.0.0.0/104`. */
function parseRule (entry: string, position: number): Rule {
  const slash = entry.indexOf('/')
  const ip = slash === -1 ? entry : entry.slice(0, slash)
  const prefixText = slash === -1 ? undefined : entry.slice(slash + 1)
  const address = ip.includes('%') ? undefined : parseAddress(ip)
  if (address === undefined || (prefixText !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(prefixText))) throw new InvalidProxyEntry(entry, position)
  const written = isIPv4(ip) ? 32 : 128
  let prefix = prefixText === undefined ? written : Number(prefixText)
  if (prefix > written) throw new InvalidProxyEntry(entry, position)
  if (address.v4 && written === 128) {
    // an IPv4-mapped IPv6 range (::ffff:10.0.0.0/104) is the IPv4 range it covers (10.0.0.0/8);
    // a shorter prefix spans more than IPv4 and stays an IPv6 range, as proxy-addr treats it
    if (prefix < 96) return { v4: false, bytes: ipv6Bytes(ip), prefix }
    prefix -= 96
  }
  return { ...address, prefix }
}

export interface TrustedProxies {
  /** the entries as configured (normalised: trimmed) */
  readonly entries: readonly string[]
  /** whether this address (as a socket or a header gives it) is one of the trusted proxies */
  trusts: (address: string) => boolean
}

/**
 * The trusted proxies from a comma-separated list of addresses and CIDRs (empty: none). Throws
 * InvalidProxyEntry for the first entry that is not one, empty entries included.
 */
export function trustedProxies (list: string | readonly string[]): TrustedProxies {
  const entries = typeof list === 'string' ? (list.trim() === '' ? [] : list.split(',').map((entry) => entry.trim())) : [...list]
  const rules = entries.map((entry, index) => parseRule(entry, index + 1))
  return {
    entries,
    trusts: (address) => {
      if (rules.length === 0) return false
      const parsed = parseAddress(address)
      return parsed !== undefined && rules.some((rule) => matches(rule, parsed))
    }
  }
}

/** RFC 9110 tchar, by character code */
const TOKEN_CHARS = new Uint8Array(128)
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") TOKEN_CHARS[c.charCodeAt(0)] = 1
const isTokenChar = (c: string): boolean => TOKEN_CHARS[c.charCodeAt(0)] === 1

/**
 * The `for=` value of each element of a `Forwarded` header (RFC 7239), in order; undefined for an
 * element without one, with two, or that does not parse. Quoted strings may hold `,` and `;`.
 * Linear in the header's length whatever it holds.
 */
export function forwardedForValues (header: string): Array<string | undefined> {
  const out: Array<string | undefined> = []
  const n = header.length
  let i = 0
  const skipSpace = (): void => { while (i < n && (header[i] === ' ' || header[i] === '\t')) i++ }
  while (i <= n) {
    let forValue: string | undefined
    let fors = 0
    let ok = true
    skipSpace()
    // an empty element (",,", a trailing ","): lists may hold them, and they say nothing
    if (i >= n || header[i] === ',') { i++; continue }
    // one element: pairs separated by ";", up to a "," outside quotes or the end
    for (;;) {
      skipSpace()
      if (i >= n || header[i] === ',') break
      if (header[i] === ';') { i++; continue }
      const nameStart = i
      while (i < n && isTokenChar(header[i] as string)) i++
      const name = header.slice(nameStart, i).toLowerCase()
      if (name === '' || header[i] !== '=') { ok = false; break }
      i++
      let value = ''
      if (header[i] === '"') {
        i++
        let closed = false
        while (i < n) {
          const c = header[i] as string
          if (c === '\\' && i + 1 < n) { value += header[i + 1]; i += 2; continue }
          i++
          if (c === '"') { closed = true; break }
          value += c
        }
        if (!closed) { ok = false; break }
      } else {
        const valueStart = i
        while (i < n && isTokenChar(header[i] as string)) i++
        value = header.slice(valueStart, i)
        if (value === '') { ok = false; break }
      }
      if (name === 'for') { fors++; forValue = value }
      skipSpace()
      if (i < n && header[i] !== ';' && header[i] !== ',') { ok = false; break }
    }
    if (!ok) {
      // skip to the next element: the next "," outside a quoted string
      let quoted = false
      while (i < n && (quoted || header[i] !== ',')) {
        if (header[i] === '\\' && quoted) i++
        else if (header[i] === '"') quoted = !quoted
        i++
      }
    }
    out.push(ok && fors === 1 ? forValue : undefined)
    i++ // past the ","
  }
  return out
}

/** The entries of an X-Forwarded-For header, in order; empty entries (",,", a trailing ",") are skipped. */
export function forwardedForEntries (header: string): string[] {
  return header.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
}

/** What keygate passes on for a request that came through a trusted proxy. */
export interface ProxyHop {
  /** X-Forwarded-For for the upstream: the chain as the trusted proxy sent it, then that proxy's address */
  forwardedFor: string
  /**
   * the trusted proxy's other forwarding headers, passed on: X-Forwarded-Proto and -Host (with
   * `x-forwarded-for`), or Forwarded with keygate's element for the proxy appended (with `forwarded`)
   */
  headers: Record<string, string>
}

export interface ClientAddress {
  /** the client's address */
  ip: string
  /** set when the peer is a trusted proxy */
  hop: ProxyHop | undefined
}

/** The right-most entry that is not trusted, or the last trusted hop before an entry that is no address. */
function walk (peer: string, entries: ReadonlyArray<string | undefined>, proxies: TrustedProxies): string {
  let client = peer
  for (let i = entries.length - 1; i >= 0; i--) {
    const address = entries[i] === undefined ? undefined : entryAddress(entries[i] as string)
    if (address === undefined) break
    client = address
    if (!proxies.trusts(address)) break
  }
  return client
}

const single = (value: string | string[] | undefined): string | undefined => Array.isArray(value) ? value.join(', ') : value

/** An RFC 7239 node for an address: IPv6 in brackets and quotes. */
const forwardedNode = (address: string): string => address.includes(':') ? `"[${address}]"` : address

/**
 * The client of a request whose socket peer is `peer`: the peer itself unless it is a trusted
 * proxy; then the address the trusted hops report in `header` (see the rule at the top).
 */
export function clientAddress (
  peer: string,
  headers: Record<string, string | string[] | undefined>,
  proxies: TrustedProxies,
  header: ClientAddressHeader
): ClientAddress {
  if (!proxies.trusts(peer)) return { ip: peer, hop: undefined }
  const passOn: Record<string, string> = {}
  if (header === 'forwarded') {
    const received = single(headers.forwarded)?.trim() ?? ''
    const fors = forwardedForValues(received)
    const chain = fors.map((value) => value === undefined ? 'unknown' : entryAddress(value) ?? 'unknown')
    passOn.forwarded = `${received === '' ? '' : `${received}, `}for=${forwardedNode(peer)}`
    return { ip: walk(peer, fors, proxies), hop: { forwardedFor: [...chain, peer].join(', '), headers: passOn } }
  }
  const received = single(headers['x-forwarded-for'])?.trim() ?? ''
  for (const name of ['x-forwarded-proto', 'x-forwarded-host']) {
    const value = single(headers[name])
    if (value !== undefined) passOn[name] = value
  }
  return {
    ip: walk(peer, forwardedForEntries(received), proxies),
    hop: { forwardedFor: received === '' ? peer : `${received}, ${peer}`, headers: passOn }
  }
}

/** Eight 16-bit groups of an IPv6 address (zone dropped), or null when it is not one. */
function ipv6GroupsOf (address: string): number[] | null {
  const ip = address.split('%', 1)[0] ?? ''
  return isIPv6(ip) ? ipv6Groups(ip) : null
}

/**
 * What one client address counts as, for every per-address count (login failures, failed
 * signatures, rate limits): an IPv4 address itself (also when IPv4-mapped), an IPv6
 * address its /64, since anyone holding one IPv6 address holds the 2^64 of its network.
 */
export function addressBucket (address: string): string {
  address = String(address) // a socket that went away may leave request.ip undefined
  if (isIPv4(address)) return address
  const groups = ipv6GroupsOf(address)
  if (groups === null) return `other:${sha256Base64url(address)}`
  const isMapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff
  if (isMapped) return [groups[6] ?? 0, groups[7] ?? 0].flatMap((g) => [g >> 8, g & 0xff]).join('.')
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`
}
