// A JWK Set fetched from a URL someone else controls (an OpenID Provider's JWKS; later an agent's
// key directory), and the rules for keeping it: what is fetched, how often, what is believed of it,
// and for how long through an outage. Verifiers ask keyFor(kid, alg) and get a public key or a
// GatewayError: the client's fault (UNKNOWN_SIGNING_KEY, 401) or nobody's (IDP_KEYS_UNAVAILABLE, 503).
//
// The schedule, all measured on the injected clock:
// - a successful fetch is next refreshed after Cache-Control's max-age, held within
//   [minRefreshMs, maxRefreshMs] (no max-age: defaultRefreshMs; no-store or no-cache: minRefreshMs),
//   and never later than half of maxStaleMs after it, so a failing refresh has the other half to
//   retry in before the keys go stale;
// - a failed fetch keeps the keys it had and is retried after 5 s, then 10, 20, 40 s, ... up to
//   minRefreshMs (or 5 s, if that is shorter) between tries, with no end: an outage costs the
//   provider one request a minute per gateway by default;
// - keys are used until maxStaleMs after the last successful fetch, never past it: then every
//   keyFor() is IDP_KEYS_UNAVAILABLE, until a fetch succeeds again;
// - a kid the set does not hold makes one fetch, and fetches for unknown kids start at most once
//   per unknownKidIntervalMs, whatever the kids: made-up kids cannot make keygate hammer the
//   provider. Concurrent callers share whatever fetch is under way.
import { createHash, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto'
import { importJWK, type CryptoKey, type JWK } from 'jose'
import { GatewayError } from '../errors.js'
import { readBounded } from '../lib/read-bounded.js'

export const DEFAULT_MIN_REFRESH_MS = 60_000
export const DEFAULT_MAX_REFRESH_MS = 86_400_000
export const DEFAULT_REFRESH_MS = 300_000
export const DEFAULT_UNKNOWN_KID_INTERVAL_MS = 30_000
export const DEFAULT_MAX_STALE_MS = 86_400_000
export const DEFAULT_TIMEOUT_MS = 5_000
export const DEFAULT_MAX_BYTES = 512 * 1024
export const DEFAULT_MAX_KEYS = 100
/** the wait before the first retry after a failed fetch; each further failure doubles it, up to minRefreshMs */
export const FIRST_RETRY_MS = 5_000
/** RSA keys under this are left out: jose would refuse them at verification anyway, per request */
export const MIN_RSA_BITS = 2048

/** The key each JWS algorithm takes; EdDSA is Ed25519 only (no Ed448: WebCrypto's support varies). */
const KEY_TYPE_OF: Readonly<Record<string, { kty: 'RSA' | 'EC' | 'OKP'; crv?: string }>> = {
  RS256: { kty: 'RSA' },
  RS384: { kty: 'RSA' },
  RS512: { kty: 'RSA' },
  PS256: { kty: 'RSA' },
  PS384: { kty: 'RSA' },
  PS512: { kty: 'RSA' },
  ES256: { kty: 'EC', crv: 'P-256' },
  ES384: { kty: 'EC', crv: 'P-384' },
  ES512: { kty: 'EC', crv: 'P-521' },
  EdDSA: { kty: 'OKP', crv: 'Ed25519' },
  Ed25519: { kty: 'OKP', crv: 'Ed25519' }
}
export const SUPPORTED_ALGORITHMS: readonly string[] = Object.keys(KEY_TYPE_OF)

/** JWK members that hold private (or secret) key material: a JWK with any of them is never used. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const
/** the members that make each type's public key: only these reach importJWK */
const PUBLIC_MEMBERS = { RSA: ['n', 'e'], EC: ['crv', 'x', 'y'], OKP: ['crv', 'x'] } as const

/** One fetch's outcome, for metrics and a trace span. */
export interface RemoteKeySetFetchOutcome {
  ok: boolean
  /** how long the fetch took */
  seconds: number
  /** what was wrong with it, naming the URL */
  error?: string
  /** how many of the set's keys are usable */
  keys?: number
  /** the keys left out, and why ("kid \"a\": carries private key members"); on success only */
  ignored?: string[]
}

/**
 * The errors keyFor() throws. A remote key set's two answers are the same whoever publishes it,
 * but a client may need to tell them apart by source: the default speaks of an IdP's bearer
 * tokens (IDP_KEYS_UNAVAILABLE, UNKNOWN_SIGNING_KEY with a Bearer challenge); an agent's key
 * directory passes its own (its own 503 code, its own challenge).
 */
export interface RemoteKeySetErrors {
  /** 503: no usable key set; `retryAfterSeconds` is when the next fetch is due */
  unavailable: (detail: string, retryAfterSeconds: number) => GatewayError
  /** 401: the credential names a key the set does not hold */
  unknownKey: (detail: string) => GatewayError
}

export const IDP_KEY_SET_ERRORS: RemoteKeySetErrors = {
  unavailable: (detail, retryAfterSeconds) =>
    new GatewayError('IDP_KEYS_UNAVAILABLE', detail, { headers: { 'retry-after': String(retryAfterSeconds) } }),
  unknownKey: (detail) =>
    new GatewayError('UNKNOWN_SIGNING_KEY', detail, { headers: { 'www-authenticate': 'Bearer realm="keygate", error="invalid_token"' } })
}

/**
 * One usable key of the set as published, by its id: its `kid`, or (an agent's key directory,
 * where keyid is the key's RFC 7638 JWK thumbprint) its thumbprint. `nbf` and `exp`, when the JWK
 * carries them (seconds), bound when it is used.
 */
export interface PublishedKey {
  id: string
  /** RFC 7638 thumbprint (SHA-256, base64url) of its public members */
  thumbprint: string
  /** the public members only */
  jwk: JWK
  keyObject: KeyObject
  nbf?: number
  exp?: number
}

/** What a set's published keys are looked up by with publishedKey(). */
export type KeyIds = 'kid' | 'thumbprint'

/**
 * Checks a fetched set before it is believed (an agent's directory: its content type and its own
 * signature, by one of its keys): throws an Error saying why it is refused, and the keys held stay.
 */
export type DocumentCheck = (fetched: { url: URL; headers: Headers; keys: readonly PublishedKey[] }) => void

/** Runs `task` after `delayMs`; returns what cancels it. */
export type Scheduler = (task: () => void, delayMs: number) => () => void

/** setTimeout, unref'd: a refresh timer never keeps the process alive. */
export const unrefScheduler: Scheduler = (task, delayMs) => {
  const timer = setTimeout(task, delayMs)
  timer.unref()
  return () => clearTimeout(timer)
}

export interface RemoteKeySetOptions {
  /** the JWKS URL (https:, or http: only for a loopback host: 127.0.0.0/8, ::1, localhost) */
  url: string
  /** a name for messages, metrics and logs (e.g. the issuer's name) */
  name: string
  /** injectable; default globalThis.fetch */
  fetch?: typeof globalThis.fetch
  /** injectable clock (ms) */
  now?: () => number
  /** injectable timer for the background refresh; default setTimeout, unref'd */
  schedule?: Scheduler
  /** refresh bounds: Cache-Control max-age honoured within [minRefreshMs, maxRefreshMs]; default refresh when none */
  minRefreshMs?: number
  maxRefreshMs?: number
  defaultRefreshMs?: number
  /** a token naming an unknown kid refetches at most once per this interval (coalesced) */
  unknownKidIntervalMs?: number
  /** keys stay usable through fetch failures for this long after the last successful fetch; never past it */
  maxStaleMs?: number
  /** one fetch's bounds */
  timeoutMs?: number
  maxBytes?: number
  maxKeys?: number
  /** allowed JWS algorithms: a key whose alg (or kty/crv) cannot serve one of them is left out */
  algorithms: readonly string[]
  /** each fetch's outcome (for metrics and a trace span): duration in seconds, and the error's message on failure */
  onFetch?: (outcome: RemoteKeySetFetchOutcome) => void
  /** the errors keyFor() throws; default IDP_KEY_SET_ERRORS */
  errors?: RemoteKeySetErrors
  /** what publishedKey() looks keys up by: kid (default) or RFC 7638 thumbprint */
  keyIds?: KeyIds
  /** the Accept header of each fetch; default `application/jwk-set+json, application/json` */
  accept?: string
  /** a check of each fetched set before it is believed */
  checkDocument?: DocumentCheck
}

export interface RemoteKeySetState {
  /** keys were fetched, and the last successful fetch is at most maxStaleMs old */
  usable: boolean
  /** the keys of the last successful fetch that keygate uses */
  keys: number
  /** when the last successful fetch completed (ms); undefined before one */
  fetchedAt: number | undefined
  ageSeconds: number | undefined
  /** failed fetches since the last successful one */
  failures: number
  /** the last failure's message, naming the URL; cleared by a success */
  lastError: string | undefined
  /** when the background refresh fetches next (ms); undefined when none is scheduled */
  nextFetchAt: number | undefined
}

export interface RemoteKeySet {
  /** the first fetch (started by start()); resolves when keys are usable, rejects with why not (readiness reports it) */
  start: () => Promise<void>
  /** the key for a JWS header's kid and alg: from the cache; an unknown kid refetches (coalesced, at most once per unknownKidIntervalMs) */
  keyFor: (kid: string | undefined, alg: string) => Promise<CryptoKey>
  /** keyFor() from the cache only: undefined when it would have to fetch or throw (no promise: the hot path) */
  keyForSync: (kid: string | undefined, alg: string) => CryptoKey | undefined
  /**
   * A published key by its id (keyIds), within its nbf and exp: from the cache, else as keyFor()
   * fetches (the first fetch, or an unknown id: at most once per unknownKidIntervalMs)
   */
  publishedKey: (id: string) => PublishedKey | Promise<PublishedKey>
  /** what metrics and readiness read */
  state: () => RemoteKeySetState
  /** stops the background refresh timer (unref'd; never holds the process) and aborts a fetch under way */
  close: () => void
}

/** The keys of one successful fetch, imported once, for each algorithm they serve. */
interface KeyTable {
  /** by kid, then alg; null where one kid names two keys for one alg: ambiguous, so neither is used */
  byKid: Map<string, Map<string, CryptoKey | null>>
  /** every key (with a kid or without) by alg: a token without a kid takes the one key there, if only one */
  byAlg: Map<string, CryptoKey[]>
  /** by the set's key ids (kid or thumbprint); null where one id names two keys: ambiguous, so neither is used */
  published: Map<string, PublishedKey | null>
  count: number
}

/** RFC 7638: the SHA-256 of the required public members, in lexicographic order, base64url. */
function thumbprintOf (jwk: JWK): string {
  const members = jwk.kty === 'RSA'
    ? { e: jwk.e, kty: jwk.kty, n: jwk.n }
    : jwk.kty === 'EC' ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y } : { crv: jwk.crv, kty: jwk.kty, x: jwk.x }
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url')
}

/** a JWK's nbf or exp: seconds, when it is a number */
const secondsMember = (jwk: Record<string, unknown>, name: 'nbf' | 'exp'): number | undefined =>
  typeof jwk[name] === 'number' && Number.isFinite(jwk[name]) ? jwk[name] : undefined

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** A loopback host: 127.0.0.0/8, [::1], localhost (the only hosts a plain http: URL may name). */
export const isLoopbackHost = (host: string): boolean =>
  host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)

/**
 * Why `value` is not a URL keygate fetches keys (or a discovery document) from, or undefined: https,
 * or http to a loopback host only (an IdP on the same machine), without credentials or fragment.
 */
export function remoteUrlProblem (value: string): string | undefined {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return `${JSON.stringify(value)} is not a URL`
  }
  if (url.username !== '' || url.password !== '') return 'must not carry credentials'
  if (url.hash !== '') return 'must not have a fragment'
  if (url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname))) return undefined
  return `must be https:// (http:// only to a loopback address: 127.0.0.1, [::1], localhost), not ${url.protocol}//`
}

function keySetUrl (raw: string, name: string): URL {
  const problem = remoteUrlProblem(raw)
  if (problem !== undefined) throw new Error(`${name}: the key set URL ${problem}`)
  return new URL(raw)
}

function positiveInteger (name: string, option: string, value: number | undefined, fallback: number): number {
  const chosen = value ?? fallback
  if (!Number.isSafeInteger(chosen) || chosen < 1) throw new RangeError(`${name}: ${option} must be a positive integer, not ${chosen}`)
  return chosen
}

/** The refresh delay Cache-Control asks for: undefined without max-age; 0 for no-store, no-cache. */
export function cacheControlDelayMs (header: string | null): number | undefined {
  if (header === null) return undefined
  let maxAge: number | undefined
  for (const directive of header.toLowerCase().split(',')) {
    const [key = '', value] = directive.trim().split('=', 2)
    if (key === 'no-store' || key === 'no-cache') return 0
    if (key === 'max-age' && value !== undefined && /^\d+$/.test(value.replace(/^"|"$/g, ''))) {
      maxAge = Number(value.replace(/^"|"$/g, '')) * 1000
    }
  }
  return maxAge
}

/** The algorithms a JWK may serve, or why it is left out. */
function algorithmsOf (jwk: Record<string, unknown>, allowed: readonly string[]): string[] | string {
  if (typeof jwk.kty !== 'string' || !['RSA', 'EC', 'OKP'].includes(jwk.kty)) return `kty ${JSON.stringify(jwk.kty)} is not RSA, EC or OKP`
  const privateMember = PRIVATE_MEMBERS.find((member) => member in jwk)
  if (privateMember !== undefined) return `carries private key material ("${privateMember}"): a published key must be public only`
  if (jwk.use !== undefined && jwk.use !== 'sig') return `use ${JSON.stringify(jwk.use)} is not "sig"`
  if (jwk.key_ops !== undefined && !(Array.isArray(jwk.key_ops) && jwk.key_ops.includes('verify'))) return 'key_ops does not include "verify"'
  if (jwk.kid !== undefined && (typeof jwk.kid !== 'string' || jwk.kid === '')) return 'kid is not a non-empty string'
  if (jwk.kty === 'RSA' && typeof jwk.n === 'string' && Buffer.from(jwk.n, 'base64url').length * 8 < MIN_RSA_BITS) {
    return `an RSA key under ${MIN_RSA_BITS} bits`
  }
  const fits = (alg: string): boolean => KEY_TYPE_OF[alg]?.kty === jwk.kty && (KEY_TYPE_OF[alg]?.crv === undefined || KEY_TYPE_OF[alg]?.crv === jwk.crv)
  if (jwk.alg !== undefined) {
    if (typeof jwk.alg !== 'string' || !allowed.includes(jwk.alg)) return `alg ${JSON.stringify(jwk.alg)} is not allowed (${allowed.join(', ')})`
    if (!fits(jwk.alg)) return `alg ${jwk.alg} does not fit its kty ${jwk.kty}${jwk.crv === undefined ? '' : ` and crv ${String(jwk.crv)}`}`
    return [jwk.alg]
  }
  const algorithms = allowed.filter(fits)
  if (algorithms.length > 0) return algorithms
  return `no allowed algorithm (${allowed.join(', ')}) takes a ${jwk.kty} key${jwk.crv === undefined ? '' : ` on ${String(jwk.crv)}`}`
}

/** Imports each usable key once for each algorithm it serves; says which keys were left out and why. */
async function keyTableOf (keys: unknown[], allowed: readonly string[], keyIds: KeyIds): Promise<{ table: KeyTable; ignored: string[] }> {
  const table: KeyTable = { byKid: new Map(), byAlg: new Map(), published: new Map(), count: 0 }
  const ignored: string[] = []
  for (const [index, jwk] of keys.entries()) {
    const label = isRecord(jwk) && typeof jwk.kid === 'string' ? `kid ${JSON.stringify(jwk.kid)}` : `keys[${index}]`
    if (!isRecord(jwk)) {
      ignored.push(`${label}: not an object`)
      continue
    }
    const algorithms = algorithmsOf(jwk, allowed)
    if (typeof algorithms === 'string') {
      ignored.push(`${label}: ${algorithms}`)
      continue
    }
    const kty = jwk.kty as keyof typeof PUBLIC_MEMBERS
    const publicJwk: JWK = { kty }
    for (const member of PUBLIC_MEMBERS[kty]) if (typeof jwk[member] === 'string') publicJwk[member] = jwk[member]
    const kid = typeof jwk.kid === 'string' ? jwk.kid : undefined
    let imported = 0
    for (const alg of algorithms) {
      let key: CryptoKey | Uint8Array
      try {
        key = await importJWK(publicJwk, alg)
      } catch (err) {
        ignored.push(`${label}: does not import for ${alg}: ${(err as Error).message}`)
        continue
      }
      if (key instanceof Uint8Array) continue
      imported++
      const sameAlg = table.byAlg.get(alg)
      if (sameAlg === undefined) table.byAlg.set(alg, [key])
      else sameAlg.push(key)
      if (kid === undefined) continue
      const byAlg = table.byKid.get(kid) ?? new Map<string, CryptoKey | null>()
      table.byKid.set(kid, byAlg)
      if (byAlg.has(alg)) {
        if (byAlg.get(alg) !== null) ignored.push(`kid ${JSON.stringify(kid)}: names more than one key for ${alg}: neither is used for it`)
        byAlg.set(alg, null)
      } else {
        byAlg.set(alg, key)
      }
    }
    if (imported === 0) continue
    table.count++
    let keyObject: KeyObject
    try {
      keyObject = createPublicKey({ key: publicJwk as JsonWebKey, format: 'jwk' })
    } catch (err) {
      ignored.push(`${label}: does not import: ${(err as Error).message}`)
      continue
    }
    const thumbprint = thumbprintOf(publicJwk)
    const id = keyIds === 'thumbprint' ? thumbprint : kid
    if (id === undefined) continue
    const nbf = secondsMember(jwk, 'nbf')
    const exp = secondsMember(jwk, 'exp')
    if (table.published.has(id)) {
      if (table.published.get(id) !== null) ignored.push(`${keyIds} ${JSON.stringify(id)}: names more than one key: neither is used by it`)
      table.published.set(id, null)
    } else {
      table.published.set(id, { id, thumbprint, jwk: publicJwk, keyObject, ...(nbf !== undefined && { nbf }), ...(exp !== undefined && { exp }) })
    }
  }
  return { table, ignored }
}

/**
 * The usable keys of a JWK Set given rather than fetched (an operator's pinned keys), checked as a
 * fetched set's are: those left out, and why, in `ignored`.
 */
export async function publishedKeysOf (keys: unknown[], algorithms: readonly string[], keyIds: KeyIds): Promise<{ keys: PublishedKey[]; ignored: string[] }> {
  const { table, ignored } = await keyTableOf(keys, algorithms, keyIds)
  return { keys: [...table.published.values()].filter((key): key is PublishedKey => key !== null), ignored }
}

export function createRemoteKeySet (options: RemoteKeySetOptions): RemoteKeySet {
  const { name } = options
  const url = keySetUrl(options.url, name)
  const fetchImpl = options.fetch ?? globalThis.fetch
  const now = options.now ?? Date.now
  const schedule = options.schedule ?? unrefScheduler
  const errors = options.errors ?? IDP_KEY_SET_ERRORS
  const minRefreshMs = positiveInteger(name, 'minRefreshMs', options.minRefreshMs, DEFAULT_MIN_REFRESH_MS)
  const maxRefreshMs = positiveInteger(name, 'maxRefreshMs', options.maxRefreshMs, DEFAULT_MAX_REFRESH_MS)
  const defaultRefreshMs = positiveInteger(name, 'defaultRefreshMs', options.defaultRefreshMs, DEFAULT_REFRESH_MS)
  const unknownKidIntervalMs = positiveInteger(name, 'unknownKidIntervalMs', options.unknownKidIntervalMs, DEFAULT_UNKNOWN_KID_INTERVAL_MS)
  const maxStaleMs = positiveInteger(name, 'maxStaleMs', options.maxStaleMs, DEFAULT_MAX_STALE_MS)
  const timeoutMs = positiveInteger(name, 'timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS)
  const maxBytes = positiveInteger(name, 'maxBytes', options.maxBytes, DEFAULT_MAX_BYTES)
  const maxKeys = positiveInteger(name, 'maxKeys', options.maxKeys, DEFAULT_MAX_KEYS)
  if (minRefreshMs > maxRefreshMs) throw new RangeError(`${name}: minRefreshMs (${minRefreshMs}) is over maxRefreshMs (${maxRefreshMs})`)
  const algorithms = [...new Set(options.algorithms)]
  if (algorithms.length === 0) throw new RangeError(`${name}: algorithms is empty: name the JWS algorithms its tokens are signed with`)
  const unsupported = algorithms.filter((alg) => KEY_TYPE_OF[alg] === undefined)
  if (unsupported.length > 0) {
    throw new RangeError(`${name}: ${unsupported.join(', ')} not supported for a remote key set; use ${SUPPORTED_ALGORITHMS.join(', ')}`)
  }
  const where = `${name}: the key set at ${url.href}`
  const keyIds = options.keyIds ?? 'kid'
  const accept = options.accept ?? 'application/jwk-set+json, application/json'

  let table: KeyTable | undefined
  let fetchedAt: number | undefined
  let failures = 0
  let lastError: string | undefined
  let nextFetchAt: number | undefined
  let cancelTimer: (() => void) | undefined
  let inFlight: Promise<void> | undefined
  let started: Promise<void> | undefined
  /** when the last fetch for an unknown kid started */
  let unknownKidFetchAt = Number.NEGATIVE_INFINITY
  let closed = false
  const closing = new AbortController()

  const usableAt = (at: number): boolean => table !== undefined && fetchedAt !== undefined && at - fetchedAt <= maxStaleMs

  /** One GET of the set, within the bounds; throws an Error whose message says what was wrong. */
  const download = async (): Promise<{ table: KeyTable; ignored: string[]; delayMs: number | undefined }> => {
    const timeout = AbortSignal.timeout(timeoutMs)
    const signal = AbortSignal.any([timeout, closing.signal])
    const interrupted = (err: unknown): Error => new Error(timeout.aborted
      ? `${where} did not answer within ${timeoutMs} ms`
      : `${where} was not fetched: the key set was closed`, { cause: err })
    let response: Response
    try {
      response = await fetchImpl(url.href, { redirect: 'manual', signal, headers: { accept } })
    } catch (err) {
      if (signal.aborted) throw interrupted(err)
      const cause = (err as Error).cause
      throw new Error(`${where} could not be fetched: ${(err as Error).message}${cause instanceof Error ? ` (${cause.message})` : ''}`, { cause: err })
    }
    try {
      if (response.status >= 300 && response.status < 400) {
        const location = response.headers.get('location')
        const to = location === null ? '' : ` to ${location}`
        throw new Error(`${where} answered ${response.status}, a redirect${to}: redirects are not followed; configure the URL the set is at`)
      }
      if (response.status < 200 || response.status > 299) throw new Error(`${where} answered ${response.status}`)
      const declared = Number(response.headers.get('content-length') ?? Number.NaN)
      if (declared > maxBytes) throw new Error(`${where} is ${declared} bytes (Content-Length), over the ${maxBytes} allowed`)
      let body: Uint8Array | undefined
      try {
        body = await readBounded(response, maxBytes)
      } catch (err) {
        if (signal.aborted) throw interrupted(err)
        throw new Error(`${where}: its body could not be read: ${(err as Error).message}`, { cause: err })
      }
      if (body === undefined) throw new Error(`${where} is over the ${maxBytes} bytes allowed`)
      let document: unknown
      try {
        document = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body))
      } catch {
        throw new Error(`${where} is not JSON`)
      }
      if (!isRecord(document) || !Array.isArray(document.keys)) throw new Error(`${where} is not a JWK Set: it has no "keys" array`)
      if (document.keys.length > maxKeys) throw new Error(`${where} holds ${document.keys.length} keys, over the ${maxKeys} allowed`)
      const { table: fetched, ignored } = await keyTableOf(document.keys, algorithms, keyIds)
      // An empty set verifies nothing: better the keys kept from before (until they are stale)
      // than none, if a provider's misconfiguration publishes only what keygate cannot use.
      if (fetched.count === 0) {
        throw new Error(`${where} holds no key usable for ${algorithms.join(', ')}${ignored.length === 0 ? '' : `: ${ignored.join('; ')}`}`)
      }
      if (options.checkDocument !== undefined) {
        const keys = [...fetched.published.values()].filter((key): key is PublishedKey => key !== null)
        try {
          options.checkDocument({ url, headers: response.headers, keys })
        } catch (err) {
          throw new Error(`${where} is refused: ${(err as Error).message}`, { cause: err })
        }
      }
      return { table: fetched, ignored, delayMs: cacheControlDelayMs(response.headers.get('cache-control')) }
    } finally {
      // an unread body (an error answer, a redirect) would keep its connection busy
      if (!response.bodyUsed) await response.body?.cancel().catch(() => undefined)
    }
  }

  const scheduleNext = (delayMs: number): void => {
    cancelTimer?.()
    cancelTimer = undefined
    nextFetchAt = undefined
    if (closed) return
    nextFetchAt = now() + delayMs
    cancelTimer = schedule(() => {
      cancelTimer = undefined
      void fetchCoalesced()
    }, delayMs)
  }

  const report = (outcome: RemoteKeySetFetchOutcome): void => {
    try {
      options.onFetch?.(outcome)
    } catch {
      // a metrics callback that throws must not stop the refresh
    }
  }

  /** Fetches the set, or joins the fetch under way; never rejects: the outcome is in state(). */
  const fetchCoalesced = (): Promise<void> => {
    inFlight ??= (async () => {
      await null // `inFlight` is set before the finally below can clear it
      const startedAt = now()
      try {
        const fetched = await download()
        table = fetched.table
        fetchedAt = now()
        failures = 0
        lastError = undefined
        const asked = fetched.delayMs === undefined ? defaultRefreshMs : Math.max(fetched.delayMs, minRefreshMs)
        scheduleNext(Math.max(1, Math.min(asked, maxRefreshMs, Math.floor(maxStaleMs / 2))))
        report({ ok: true, seconds: (now() - startedAt) / 1000, keys: table.count, ignored: fetched.ignored })
      } catch (err) {
        failures++
        lastError = (err as Error).message
        scheduleNext(Math.min(FIRST_RETRY_MS * 2 ** Math.min(failures - 1, 30), Math.max(minRefreshMs, FIRST_RETRY_MS)))
        report({ ok: false, seconds: (now() - startedAt) / 1000, error: lastError })
      } finally {
        inFlight = undefined
      }
    })()
    return inFlight
  }

  const start = (): Promise<void> => {
    started ??= fetchCoalesced().then(() => {
      if (!usableAt(now())) throw new Error(lastError ?? `${where} has no usable keys`)
    })
    return started
  }

  const keyForSync = (kid: string | undefined, alg: string): CryptoKey | undefined => {
    if (table === undefined || fetchedAt === undefined || now() - fetchedAt > maxStaleMs) return undefined
    if (kid !== undefined) return table.byKid.get(kid)?.get(alg) ?? undefined
    const keys = table.byAlg.get(alg)
    return keys?.length === 1 ? keys[0] : undefined
  }

  /** a published key by id, from what is held now: undefined when unknown, ambiguous, not yet (nbf) or no more (exp) valid, or stale */
  const publishedSync = (id: string): PublishedKey | undefined => {
    if (table === undefined || fetchedAt === undefined) return undefined
    const at = now()
    if (at - fetchedAt > maxStaleMs) return undefined
    const key = table.published.get(id) ?? undefined
    if (key === undefined) return undefined
    if ((key.nbf !== undefined && key.nbf * 1000 > at) || (key.exp !== undefined && key.exp * 1000 <= at)) return undefined
    return key
  }

  const unavailable = (): GatewayError => {
    const at = now()
    const why = fetchedAt === undefined
      ? 'they have not been fetched yet'
      : `the last good fetch was ${Math.round((at - fetchedAt) / 1000)} s ago, over the ${Math.round(maxStaleMs / 1000)} s they are kept through an outage`
    const retryAfter = Math.max(1, Math.ceil(((nextFetchAt ?? at + FIRST_RETRY_MS) - at) / 1000))
    // the fetch's own error (addresses, answers) is for the operator's log and metrics, not the client
    return errors.unavailable(`${name}'s signing keys are unavailable: ${why}`, retryAfter)
  }

  const unknownKey = (kid: string | undefined, alg: string): GatewayError => {
    if (kid !== undefined) return errors.unknownKey(`${name}'s key set holds no key ${JSON.stringify(kid)} for ${alg}`)
    const fitting = table?.byAlg.get(alg)?.length ?? 0
    return errors.unknownKey(`the token names no kid, and ${fitting === 0 ? 'none' : fitting} of ${name}'s keys fit ${alg}: exactly one must`)
  }

  /**
   * A lookup the cache cannot answer: after the first fetch or one under way, and, when the key is
   * still unknown, one fetch for it (at most once per unknownKidIntervalMs, whatever is asked for).
   */
  const lookUpSlow = async <K>(find: () => K | undefined, notFound: () => GatewayError): Promise<K> => {
    if (inFlight !== undefined) await inFlight
    // fetched on first use, when start() was not called
    else if (started === undefined && fetchedAt === undefined && !closed) await start().catch(() => undefined)
    if (!usableAt(now())) throw unavailable()
    const cached = find()
    if (cached !== undefined) return cached
    if (closed || now() - unknownKidFetchAt < unknownKidIntervalMs) throw notFound()
    // set before the first await: every other caller in this interval sees it
    unknownKidFetchAt = now()
    await fetchCoalesced()
    if (!usableAt(now())) throw unavailable()
    const found = find()
    if (found === undefined) throw notFound()
    return found
  }

  /** keyFor() when the cache cannot answer: the first fetch, a fetch under way, or one for an unknown kid. */
  const keyForSlow = async (kid: string | undefined, alg: string): Promise<CryptoKey> => {
    if (!algorithms.includes(alg)) throw errors.unknownKey(`${name}'s tokens are not signed with ${alg}: ${algorithms.join(', ')} only`)
    return await lookUpSlow(() => keyForSync(kid, alg), () => unknownKey(kid, alg))
  }

  return {
    start,
    keyForSync,
    publishedKey (id) {
      return publishedSync(id) ?? lookUpSlow(() => publishedSync(id),
        () => errors.unknownKey(`${name}'s key set holds no usable key ${JSON.stringify(id)}${keyIds === 'thumbprint' ? ' (by its JWK thumbprint)' : ''}`))
    },
    keyFor (kid, alg) {
      const key = keyForSync(kid, alg)
      return key === undefined ? keyForSlow(kid, alg) : Promise.resolve(key)
    },
    state () {
      const at = now()
      return {
        usable: usableAt(at),
        keys: table?.count ?? 0,
        fetchedAt,
        ageSeconds: fetchedAt === undefined ? undefined : (at - fetchedAt) / 1000,
        failures,
        lastError,
        nextFetchAt
      }
    },
    close () {
      closed = true
      cancelTimer?.()
      cancelTimer = undefined
      nextFetchAt = undefined
      closing.abort()
    }
  }
}
