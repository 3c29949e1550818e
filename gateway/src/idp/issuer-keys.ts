// Each trusted issuer's verification keys: its JWK Set, kept by remote-keys/remote-key-set.ts (the
// rules for a key set someone else publishes: refresh, unknown kids, outages, fetch bounds). Where
// the issuer's configuration gives no jwksUri, the key set's URL comes from the issuer's OpenID
// discovery document (`<issuer>/.well-known/openid-configuration`), fetched under the same bounds,
// whose `issuer` must be the configured one exactly (OpenID Connect Discovery 1.0 §4.3). A
// discovery that fails is tried again at most once per interval, and until it succeeds the
// issuer's tokens get IDP_KEYS_UNAVAILABLE (503): keygate never blames the client for its IdP.
import { GatewayError } from '../errors.js'
import { readBounded } from '../lib/read-bounded.js'
import { remoteUrlProblem } from '../remote-keys/key-set-fetch.js'
import { createRemoteKeySet, type RemoteKeySet, type RemoteKeySetFetchOutcome, type RemoteKeySetOptions } from '../remote-keys/remote-key-set.js'
import type { KeySource } from './idp-tokens.js'
import type { IssuerConfig } from './issuers.js'

const DISCOVERY_PATH = '/.well-known/openid-configuration'
const DISCOVERY_MAX_BYTES = 64 * 1024
const DISCOVERY_TIMEOUT_MS = 5_000
/** a failed discovery is tried again no sooner than this */
const DISCOVERY_RETRY_MS = 30_000

export interface IssuerKeys extends KeySource {
  readonly issuer: IssuerConfig
  /** discovery (when needed) and the first fetch of the key set; rejects with why the keys are not usable yet */
  start: () => Promise<void>
  /** what metrics and readiness read: the key set's state, or why discovery failed */
  state: () => { usable: boolean, ageSeconds: number | undefined, failures: number, lastError: string | undefined }
  close: () => void
}

export interface IssuerKeysOptions extends Partial<Pick<RemoteKeySetOptions, 'fetch' | 'now' | 'minRefreshMs' | 'maxRefreshMs' |
'defaultRefreshMs' | 'unknownKidIntervalMs' | 'maxStaleMs' | 'timeoutMs'>> {
  /** each JWKS (or discovery) fetch's outcome, for metrics and traces */
  onFetch?: (issuer: IssuerConfig, outcome: RemoteKeySetFetchOutcome & { what: 'jwks' | 'discovery' }) => void
}

/**
 * What keygate reads of an issuer's discovery document: where its keys are and, for an issuer the
 * portal logs in through (idp/portal-login.ts), where its users log in and where keygate trades a
 * code for tokens. Every URL passes the rule of remote-keys (https, or http to loopback).
 */
export interface ProviderMetadata {
  jwksUri: string
  /** with portalLogin only: `authorization_endpoint` */
  authorizationEndpoint: string | undefined
  /** with portalLogin only: `token_endpoint` */
  tokenEndpoint: string | undefined
  /** RFC 9207's `authorization_response_iss_parameter_supported`: the callback then must carry `iss` */
  issParameterSupported: boolean
  /** with portalLogin: why the document does not serve the login (an endpoint missing or not a URL keygate uses, no S256) */
  loginProblem: string | undefined
}

/** `issuer`'s discovery document: fetched with no redirect, bounded in time and size, checked. */
export async function discoverProvider (issuer: IssuerConfig, fetchImpl: typeof globalThis.fetch = globalThis.fetch): Promise<ProviderMetadata> {
  const url = `${issuer.issuer.replace(/\/$/, '')}${DISCOVERY_PATH}`
  const fail = (why: string): Error => new Error(`${issuer.name}: discovery at ${url}: ${why}`)
  let response: Response
  try {
    response = await fetchImpl(url, { redirect: 'manual', signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), headers: { accept: 'application/json' } })
  } catch (err) {
    throw fail(`cannot be fetched (${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message})`)
  }
  if (response.status !== 200) {
    await response.body?.cancel()
    throw fail(`answered ${response.status}${response.status >= 300 && response.status < 400 ? ' (a redirect: keygate follows none)' : ''}`)
  }
  const length = Number(response.headers.get('content-length') ?? '0')
  if (length > DISCOVERY_MAX_BYTES) {
    await response.body?.cancel()
    throw fail(`is ${length} bytes; at most ${DISCOVERY_MAX_BYTES}`)
  }
  // counted as it is read, not after: a chunked answer says no length
  const body = await readBounded(response, DISCOVERY_MAX_BYTES).catch((err: unknown) => {
    throw fail(`cannot be read (${(err as Error).message})`)
  })
  if (body === undefined) throw fail(`is over ${DISCOVERY_MAX_BYTES} bytes`)
  let document: unknown
  try {
    document = JSON.parse(Buffer.from(body).toString('utf8'))
  } catch {
    throw fail('is not JSON')
  }
  const metadata = (document ?? {}) as Record<string, unknown>
  const { issuer: named, jwks_uri: jwksUri } = metadata
  if (named !== issuer.issuer) throw fail(`names the issuer ${JSON.stringify(named)}, not ${JSON.stringify(issuer.issuer)} (they must be the same exactly)`)
  if (typeof jwksUri !== 'string') throw fail('has no jwks_uri')
  const problem = remoteUrlProblem(jwksUri)
  if (problem !== undefined) throw fail(`its jwks_uri ${JSON.stringify(jwksUri)} ${problem}`)
  // the login's endpoints: a problem with them is the login's (it says so), never the keys'
  let loginProblem: string | undefined
  const endpoint = (member: string): string | undefined => {
    if (issuer.portalLogin === undefined) return undefined
    const value = metadata[member]
    const wrong = typeof value === 'string' ? remoteUrlProblem(value) : 'is missing, and the portal\'s login needs it'
    if (wrong === undefined) return value as string
    loginProblem ??= `${url}: its ${member}${typeof value === 'string' ? ` ${JSON.stringify(value)}` : ''} ${wrong}`
    return undefined
  }
  const authorizationEndpoint = endpoint('authorization_endpoint')
  const tokenEndpoint = endpoint('token_endpoint')
  const challenges = metadata.code_challenge_methods_supported
  if (issuer.portalLogin !== undefined && Array.isArray(challenges) && !challenges.includes('S256')) {
    loginProblem ??= `${url}: its code_challenge_methods_supported lacks S256: the portal's login uses PKCE with S256 only`
  }
  return {
    jwksUri,
    authorizationEndpoint,
    tokenEndpoint,
    issParameterSupported: metadata.authorization_response_iss_parameter_supported === true,
    loginProblem
  }
}

/** The jwks_uri of `issuer`'s discovery document (discoverProvider's rules). */
export async function discoverJwksUri (issuer: IssuerConfig, fetchImpl: typeof globalThis.fetch = globalThis.fetch): Promise<string> {
  return (await discoverProvider(issuer, fetchImpl)).jwksUri
}

export function createIssuerKeys (issuer: IssuerConfig, options: IssuerKeysOptions = {}): IssuerKeys {
  const now = options.now ?? Date.now
  const fetchImpl = options.fetch ?? globalThis.fetch
  let keySet: RemoteKeySet | undefined
  let discovering: Promise<RemoteKeySet> | undefined
  let discoveredAt = 0
  let discoveryError: string | undefined
  let discoveryFailures = 0
  let closed = false

  const keySetAt = (url: string): RemoteKeySet => createRemoteKeySet({
    url,
    name: issuer.name,
    algorithms: issuer.algorithms,
    ...issuer.keys,
    ...(options.fetch !== undefined && { fetch: options.fetch }),
    ...(options.now !== undefined && { now: options.now }),
    ...(options.minRefreshMs !== undefined && { minRefreshMs: options.minRefreshMs }),
    ...(options.maxRefreshMs !== undefined && { maxRefreshMs: options.maxRefreshMs }),
    ...(options.defaultRefreshMs !== undefined && { defaultRefreshMs: options.defaultRefreshMs }),
    ...(options.unknownKidIntervalMs !== undefined && { unknownKidIntervalMs: options.unknownKidIntervalMs }),
    ...(options.maxStaleMs !== undefined && { maxStaleMs: options.maxStaleMs }),
    ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
    onFetch: (outcome) => { options.onFetch?.(issuer, { ...outcome, what: 'jwks' }) }
  })

  /** The key set, once its URL is known: discovered at most once per DISCOVERY_RETRY_MS while that fails. */
  const resolved = async (): Promise<RemoteKeySet> => {
    if (keySet !== undefined) return keySet
    if (discovering !== undefined) return await discovering
    if (discoveredAt !== 0 && now() - discoveredAt < DISCOVERY_RETRY_MS) {
      throw new GatewayError('IDP_KEYS_UNAVAILABLE', `keygate has no keys of the issuer ${issuer.name} yet: ${discoveryError ?? 'discovery failed'}`, {
        headers: { 'retry-after': String(Math.ceil((DISCOVERY_RETRY_MS - (now() - discoveredAt)) / 1000)) }
      })
    }
    discoveredAt = now()
    const started = now()
    discovering = discoverJwksUri(issuer, fetchImpl).then((url) => {
      options.onFetch?.(issuer, { what: 'discovery', ok: true, seconds: (now() - started) / 1000 })
      discoveryError = undefined
      const made = keySetAt(url)
      if (closed) made.close()
      else keySet = made
      return made
    }, (err: Error) => {
      discoveryFailures++
      discoveryError = err.message
      options.onFetch?.(issuer, { what: 'discovery', ok: false, seconds: (now() - started) / 1000, error: err.message })
      throw new GatewayError('IDP_KEYS_UNAVAILABLE', `keygate has no keys of the issuer ${issuer.name} yet: ${err.message}`, {
        headers: { 'retry-after': String(Math.ceil(DISCOVERY_RETRY_MS / 1000)) }
      })
    }).finally(() => { discovering = undefined })
    return await discovering
  }
  if (issuer.jwksUri !== undefined) keySet = keySetAt(issuer.jwksUri)

  return {
    issuer,
    async start () {
      await (await resolved()).start()
    },
    async keyFor (kid, alg) {
      return await (keySet ?? await resolved()).keyFor(kid, alg)
    },
    keyForSync (kid, alg) {
      return keySet?.keyForSync(kid, alg)
    },
    state () {
      if (keySet === undefined) return { usable: false, ageSeconds: undefined, failures: discoveryFailures, lastError: discoveryError }
      const { usable, ageSeconds, failures, lastError } = keySet.state()
      return { usable, ageSeconds, failures, lastError }
    },
    close () {
      closed = true
      keySet?.close()
    }
  }
}
