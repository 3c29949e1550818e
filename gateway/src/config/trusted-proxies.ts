// KEYGATE_TRUSTED_PROXIES and KEYGATE_TRUSTED_PROXY_HEADER: which peers may tell keygate the
// client's address, and in which header (lib/client-address.ts has the rule).
import { InvalidProxyEntry, trustedProxies, type ClientAddressHeader } from '../lib/client-address.js'
import { ConfigError } from './config-error.js'

export interface ClientAddressConfig {
  /** addresses and CIDRs, as configured; empty: every peer is the client itself */
  trustedProxies: string[]
  /** the header the trusted proxies write */
  header: ClientAddressHeader
}

/** Checks the list at start: an entry that is neither an address nor a CIDR is named in the error. */
export function clientAddressFrom (
  e: { KEYGATE_TRUSTED_PROXIES?: string | undefined; KEYGATE_TRUSTED_PROXY_HEADER?: ClientAddressHeader | undefined },
  variable = 'KEYGATE_TRUSTED_PROXIES'
): ClientAddressConfig {
  const header = e.KEYGATE_TRUSTED_PROXY_HEADER ?? 'x-forwarded-for'
  if (e.KEYGATE_TRUSTED_PROXIES === undefined) return { trustedProxies: [], header }
  try {
    return { trustedProxies: [...trustedProxies(e.KEYGATE_TRUSTED_PROXIES).entries], header }
  } catch (err) {
    if (!(err instanceof InvalidProxyEntry)) throw err
    throw new ConfigError(`${variable}: ${JSON.stringify(err.entry)} (entry ${err.position}) is not allowed: ` +
      'use IPv4 or IPv6 addresses and CIDRs, comma-separated (10.0.0.5,10.1.0.0/16,fd00::/8)')
  }
}
