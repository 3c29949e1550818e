// The listeners besides the public port, as the environment configures them: the admin API
// (KEYGATE_ADMIN_*) and decision mode (KEYGATE_DECISION_*), each off without a port, and neither on
// another listener's port of the same host.
import type { ClientAddressHeader } from '../lib/client-address.js'
import { ConfigError } from './config-error.js'
import { clientAddressFrom } from './trusted-proxies.js'

/** where every listener listens unless told otherwise (HOST, KEYGATE_METRICS_HOST, KEYGATE_ADMIN_HOST, KEYGATE_DECISION_HOST) */
export const DEFAULT_HOST = '127.0.0.1'
/** the admin API's bearer token: long enough that guessing it is hopeless, short enough for a header */
export const MIN_ADMIN_TOKEN_LENGTH = 32
export const MAX_ADMIN_TOKEN_LENGTH = 1024

export interface DecisionConfig {
  port: number | undefined
  host: string
  /** addresses and CIDRs of the proxies that ask for decisions */
  trustedProxies: string[]
}

export interface AdminConfig {
  port: number | undefined
  host: string
  /** a secret: never in a log line or an error message */
  token: string | undefined
}

/** the variables the listeners are configured by (config/env.ts checks their values first) */
interface ListenersEnv {
  KEYGATE_ADMIN_PORT?: number | undefined
  KEYGATE_ADMIN_HOST?: string | undefined
  KEYGATE_ADMIN_TOKEN?: string | undefined
  KEYGATE_DECISION_PORT?: number | undefined
  KEYGATE_DECISION_HOST?: string | undefined
  KEYGATE_DECISION_TRUSTED_PROXIES?: string | undefined
  KEYGATE_TRUSTED_PROXIES?: string | undefined
  KEYGATE_TRUSTED_PROXY_HEADER?: ClientAddressHeader | undefined
}

/** Addresses that take every interface: a port there clashes with that port on any host. */
const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]', '::0'])

/** Two listeners on one port of one interface: port 0 (a free one, chosen at start) never clashes. */
function clashes (a: { port: number | undefined; host: string }, b: { port: number | undefined; host: string }): boolean {
  if (a.port === undefined || b.port === undefined || a.port === 0 || a.port !== b.port) return false
  return a.host === b.host || WILDCARD_HOSTS.has(a.host) || WILDCARD_HOSTS.has(b.host)
}

/**
 * KEYGATE_DECISION_*: off without a port; a port needs the proxies it believes; never another
 * listener's port.
 */
export function decisionConfigFrom (e: ListenersEnv, others: ReadonlyArray<{ name: string; port: number | undefined; host: string }>): DecisionConfig {
  const host = e.KEYGATE_DECISION_HOST ?? DEFAULT_HOST
  const port = e.KEYGATE_DECISION_PORT
  if (port === undefined) return { port, host, trustedProxies: [] }
  const own = e.KEYGATE_DECISION_TRUSTED_PROXIES
  const proxies = own === undefined
    ? clientAddressFrom(e).trustedProxies
    : clientAddressFrom({ KEYGATE_TRUSTED_PROXIES: own }, 'KEYGATE_DECISION_TRUSTED_PROXIES').trustedProxies
  if (proxies.length === 0) {
    throw new ConfigError('KEYGATE_DECISION_TRUSTED_PROXIES is not set: KEYGATE_DECISION_PORT turns decision mode on, and it believes ' +
      'what a proxy says about the request it judges only from the proxies named there (or in KEYGATE_TRUSTED_PROXIES): ' +
      'their addresses and CIDRs, comma-separated (e.g. 127.0.0.1 for an nginx on this machine)')
  }
  for (const other of others) {
    if (clashes({ port, host }, other)) {
      throw new ConfigError(`KEYGATE_DECISION_PORT: ${port} is not allowed: it is ${other.name} on the same host: use a port of its own`)
    }
  }
  return { port, host, trustedProxies: proxies }
}

/**
 * KEYGATE_ADMIN_*: off without a port; a port needs a token; never the public or the metrics
 * port. Errors never quote the token.
 */
export function adminConfigFrom (e: ListenersEnv, gateway: { port: number; host: string }, metrics: { port: number | undefined; host: string }): AdminConfig {
  const admin = { port: e.KEYGATE_ADMIN_PORT, host: e.KEYGATE_ADMIN_HOST ?? DEFAULT_HOST, token: e.KEYGATE_ADMIN_TOKEN }
  if (admin.port === undefined) return admin
  if (admin.token === undefined) {
    throw new ConfigError('KEYGATE_ADMIN_TOKEN is not set: KEYGATE_ADMIN_PORT turns the admin API on, and every request to it needs that token ' +
      `(${MIN_ADMIN_TOKEN_LENGTH} to ${MAX_ADMIN_TOKEN_LENGTH} visible ASCII characters, e.g. openssl rand -hex 32)`)
  }
  if (clashes(admin, gateway)) {
    throw new ConfigError(`KEYGATE_ADMIN_PORT: ${admin.port} is not allowed: it is the gateway's PORT on the same host; ` +
      'the admin API never shares the public port: use a port of its own')
  }
  if (clashes(admin, metrics)) {
    throw new ConfigError(`KEYGATE_ADMIN_PORT: ${admin.port} is not allowed: it is KEYGATE_METRICS_PORT on the same host: use a port of its own`)
  }
  return admin
}
