// Each trusted issuer's verification keys: its JWK Set, kept by remote-keys/remote-key-set.ts (the
// rules for a key set someone else publishes: refresh, unknown kids, outages, fetch bounds). Where
// the issuer's configuration gives no jwksUri, the key set's URL comes from the issuer's OpenID
// discovery document (`<issuer>/.well-known/openid-configuration`), fetched under the same bounds,
// whose `issuer` must be the configured one exactly (OpenID Connect Discovery 1.0 §4.3).
//
// The wait (issue 40): discovery and the first fetch of the key set share one time limit, the
// issuer's keys.fetchTimeoutSeconds (5 s by default), and a request waits for them together at
// most that long. A discovery that fails is tried again in the background every 30 s; meanwhile
// the issuer's tokens get IDP_KEYS_UNAVAILABLE (503) at once, with Retry-After: keygate never
// blames the client for its IdP, nor holds it waiting for one that is down.
import { GatewayError } from '../errors.js'
import { readBounded } from '../lib/read-bounded.js'
import { remoteUrlProblem } from '../remote-keys/key-set-fetch.js'
import {
  createRemoteKeySet, DEFAULT_TIMEOUT_MS, unrefScheduler, type RemoteKeySet, type RemoteKeySetFetchOutcome, type RemoteKeySetOptions
} from '../remote-keys/remote-key-set.js'
import type { KeySource } from './idp-tokens.js'
import type { IssuerConfig } from './issuers.js'

const DISCOVERY_PATH = '/.well-known/openid-configuration'
const DISCOVERY_MAX_BYTES = 64 * 1024
/** a failed discovery is tried again, in the background, after this */
export const DISCOVERY_RETRY_MS = 30_000

export interface IssuerKeys extends KeySource {
  readonly issuer: IssuerConfig
  /** discovery (when needed) and the first fetch of the key set; rejects with why the keys are not usable yet */
  start: () => Promise<void>
  /** what metrics and readiness read: the key set's state, or why discovery failed */
  state: () => { usable: boolean, ageSeconds: number | undefined, failures: number, lastError: string | undefined }
  close: () => void
}

export interface IssuerKeysOptions extends Partial<Pick<RemoteKeySetOptions, 'fetch' | 'now' | 'minRefreshMs' | 'maxRefreshMs' |
'defaultRefreshMs' | 'unknownKidIntervalMs' | 'maxStaleMs' | 'timeoutMs' | 'schedule'>> {
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

/** `issuer`'s discovery document: fetched with no redirect, bounded in time (`timeoutMs`) and size, checked. */
export async function discoverProvider (issuer: IssuerConfig, fetchImpl: typeof globalThis.fetch = globalThis.fetch,
  timeoutMs = issuer.keys.timeoutMs ?? DEFAULT_TIMEOUT_MS): Promise<ProviderMetadata> {
  const url = `${issuer.issuer.replace(/\/$/, '')}${DISCOVERY_PATH}`
  const fail = (why: string): Error => new Error(`${issuer.name}: discovery at ${url}: ${why}`)
  let response: Response
  try {
    response = await fetchImpl(url, { redirect: 'manual', signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'application/json' } })
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') throw fail(`did not answer within ${timeoutMs} ms`)
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
export async function discoverJwksUri (issuer: IssuerConfig, fetchImpl: typeof globalThis.fetch = globalThis.fetch,
  timeoutMs?: number): Promise<string> {
  return (await discoverProvider(issuer, fetchImpl, timeoutMs)).jwksUri
}

export function createIssuerKeys (issuer: IssuerConfig, options: IssuerKeysOptions = {}): IssuerKeys {
  const now = options.now ?? Date.now
  const fetchImpl = options.fetch ?? globalThis.fetch
  const schedule = options.schedule ?? unrefScheduler
  /** the longest a request waits for this issuer's keys: discovery and the first fetch together */
  const waitMs = options.timeoutMs ?? issuer.keys.timeoutMs ?? DEFAULT_TIMEOUT_MS
  let keySet: RemoteKeySet | undefined
  /** discovery, then the key set's first fetch within what is left of waitMs */
  let discovering: Promise<void> | undefined
  /** when the background retry of a failed discovery is due; undefined before the first discovery */
  let retryAt: number | undefined
  let cancelRetry: (() => void) | undefined
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
    ...(options.schedule !== undefined && { schedule: options.schedule }),
    ...(options.minRefreshMs !== undefined && { minRefreshMs: options.minRefreshMs }),
    ...(options.maxRefreshMs !== undefined && { maxRefreshMs: options.maxRefreshMs }),
    ...(options.defaultRefreshMs !== undefined && { defaultRefreshMs: options.defaultRefreshMs }),
    ...(options.unknownKidIntervalMs !== undefined && { unknownKidIntervalMs: options.unknownKidIntervalMs }),
    ...(options.maxStaleMs !== undefined && { maxStaleMs: options.maxStaleMs }),
    timeoutMs: waitMs,
    onFetch: (outcome) => { options.onFetch?.(issuer, { ...outcome, what: 'jwks' }) }
  })

  /** 503 while discovery has failed: at once, Retry-After until the background retry */
  const undiscovered = (): GatewayError => new GatewayError('IDP_KEYS_UNAVAILABLE',
    `keygate has no keys of the issuer ${issuer.name} yet: ${discoveryError ?? 'its discovery has not succeeded'}`,
    { headers: { 'retry-after': String(Math.max(1, Math.ceil(((retryAt ?? now()) - now()) / 1000))) } })

  /** Discovery, then the first fetch of the key set, within waitMs together; a failed discovery is retried in the background. */
  const discover = (): Promise<void> => {
    discovering ??= (async () => {
      const began = performance.now()
      const startedAt = now()
      let url: string
      try {
        url = await discoverJwksUri(issuer, fetchImpl, waitMs)
      } catch (err) {
        discoveryFailures++
        discoveryError = (err as Error).message
        options.onFetch?.(issuer, { what: 'discovery', ok: false, seconds: (now() - startedAt) / 1000, error: discoveryError })
        retryAt = now() + DISCOVERY_RETRY_MS
        if (!closed) cancelRetry = schedule(() => { void discover().catch(() => undefined) }, DISCOVERY_RETRY_MS)
        throw undiscovered()
      }
      options.onFetch?.(issuer, { what: 'discovery', ok: true, seconds: (now() - startedAt) / 1000 })
      discoveryError = undefined
      retryAt = undefined
      const made = keySetAt(url)
      if (closed) {
        made.close()
        return
      }
      keySet = made
      await made.start(waitMs - (performance.now() - began))
    })().finally(() => { discovering = undefined })
    return discovering
  }
  if (issuer.jwksUri !== undefined) keySet = keySetAt(issuer.jwksUri)
  /** the key set as it is now (discovery sets it while a caller waits) */
  const current = (): RemoteKeySet | undefined => keySet

  return {
    issuer,
    async start () {
      await (keySet === undefined ? discover() : keySet.start())
    },
    async keyFor (kid, alg) {
      if (keySet !== undefined) return await keySet.keyFor(kid, alg)
      // one wait at most: the discovery under way (or the first, on first use), then answered from it
      if (discovering === undefined && (retryAt !== undefined || closed)) throw undiscovered()
      await (discovering ?? discover()).catch(() => undefined)
      const discovered = current()
      if (discovered === undefined) throw undiscovered()
      return await discovered.keyFor(kid, alg, true)
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
      cancelRetry?.()
      keySet?.close()
    }
  }
}
