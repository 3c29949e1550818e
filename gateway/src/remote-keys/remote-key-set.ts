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
//   provider.
//
// The waits: a caller waits for one fetch at most, so never longer than one timeoutMs in all. It
// joins the fetch under way (whatever started it) and takes that fetch's outcome, as every caller
// joining it does; it never starts another after it. After a failed fetch, until the retry its
// back-off schedules, a kid the set does not hold is answered at once: unavailable (the set could
// not be checked for it, which is no fault of the client's), with Retry-After.
//
// This file keeps the set (the schedule, the lookups); key-set-fetch.ts is one fetch within its
// bounds; published-keys.ts which of a set's keys are believed, for which algorithms.
import type { CryptoKey } from 'jose'
import { GatewayError } from '../errors.js'
import { downloadKeySet, keySetUrl, type DocumentCheck, type KeySetSource } from './key-set-fetch.js'
import { SUPPORTED_ALGORITHMS, type KeyIds, type KeyTable, type PublishedKey } from './published-keys.js'

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
  /**
   * The first fetch (once; later calls share it); resolves when keys are usable, rejects with why
   * not (readiness reports it). `withinMs`: that fetch's time limit, when shorter than timeoutMs
   * (what is left of a wait that began with an issuer's discovery).
   */
  start: (withinMs?: number) => Promise<void>
  /**
   * The key for a JWS header's kid and alg: from the cache; an unknown kid refetches (coalesced,
   * at most once per unknownKidIntervalMs). `afterFetch`: the caller has just waited for a fetch
   * (its discovery and first fetch): answer from what is held, never fetch again.
   */
  keyFor: (kid: string | undefined, alg: string, afterFetch?: boolean) => Promise<CryptoKey>
  /** keyFor() from the cache only: undefined when it would have to fetch or throw (no promise: the hot path) */
  keyForSync: (kid: string | undefined, alg: string) => CryptoKey | undefined
  /**
   * A published key by its id (keyIds), within its nbf and exp: from the cache, else as keyFor()
   * fetches (the first fetch, or an unknown id: at most once per unknownKidIntervalMs);
   * `afterFetch` as keyFor's
   */
  publishedKey: (id: string, afterFetch?: boolean) => PublishedKey | Promise<PublishedKey>
  /** what metrics and readiness read */
  state: () => RemoteKeySetState
  /** stops the background refresh timer (unref'd; never holds the process) and aborts a fetch under way */
  close: () => void
}

function positiveInteger (name: string, option: string, value: number | undefined, fallback: number): number {
  const chosen = value ?? fallback
  if (!Number.isSafeInteger(chosen) || chosen < 1) throw new RangeError(`${name}: ${option} must be a positive integer, not ${chosen}`)
  return chosen
}

/** A key set's options, checked, with every default filled in. */
interface Settings extends KeySetSource {
  name: string
  now: () => number
  schedule: Scheduler
  errors: RemoteKeySetErrors
  minRefreshMs: number
  maxRefreshMs: number
  defaultRefreshMs: number
  unknownKidIntervalMs: number
  maxStaleMs: number
  algorithms: string[]
  onFetch: RemoteKeySetOptions['onFetch']
}

function settingsOf (options: RemoteKeySetOptions): Settings {
  const { name } = options
  const url = keySetUrl(options.url, name)
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
  const unsupported = algorithms.filter((alg) => !SUPPORTED_ALGORITHMS.includes(alg))
  if (unsupported.length > 0) {
    throw new RangeError(`${name}: ${unsupported.join(', ')} not supported for a remote key set; use ${SUPPORTED_ALGORITHMS.join(', ')}`)
  }
  return {
    name,
    url,
    where: `${name}: the key set at ${url.href}`,
    fetch: options.fetch ?? globalThis.fetch,
    accept: options.accept ?? 'application/jwk-set+json, application/json',
    now: options.now ?? Date.now,
    schedule: options.schedule ?? unrefScheduler,
    errors: options.errors ?? IDP_KEY_SET_ERRORS,
    minRefreshMs,
    maxRefreshMs,
    defaultRefreshMs,
    unknownKidIntervalMs,
    maxStaleMs,
    timeoutMs,
    maxBytes,
    maxKeys,
    algorithms,
    keyIds: options.keyIds ?? 'kid',
    checkDocument: options.checkDocument,
    onFetch: options.onFetch
  }
}

/** What a key set holds between fetches: its refresh writes it, its lookups read it. */
interface Held {
  table: KeyTable | undefined
  /** when the last successful fetch completed (ms) */
  fetchedAt: number | undefined
  failures: number
  lastError: string | undefined
  nextFetchAt: number | undefined
  /** the fetch under way, which every caller joins: true when it succeeded */
  inFlight: Promise<boolean> | undefined
  closed: boolean
}

/**
 * The refresh: fetch() fetches the set (within `withinMs` when given), or joins the fetch under
 * way, and schedules the next (Cache-Control's max-age within the bounds after a success, a
 * growing wait after a failure); it never rejects: it resolves true on success, and the outcome
 * is in `held`. close() stops the timer and aborts a fetch.
 */
function keySetRefresh (settings: Settings, held: Held): { fetch: (withinMs?: number) => Promise<boolean>; close: () => void } {
  const { now, minRefreshMs, maxRefreshMs, maxStaleMs } = settings
  let cancelTimer: (() => void) | undefined
  const closing = new AbortController()

  const scheduleNext = (delayMs: number): void => {
    cancelTimer?.()
    cancelTimer = undefined
    held.nextFetchAt = undefined
    if (held.closed) return
    held.nextFetchAt = now() + delayMs
    cancelTimer = settings.schedule(() => {
      cancelTimer = undefined
      void fetchCoalesced()
    }, delayMs)
  }

  const report = (outcome: RemoteKeySetFetchOutcome): void => {
    try {
      settings.onFetch?.(outcome)
    } catch {
      // a metrics callback that throws must not stop the refresh
    }
  }

  const fetchCoalesced = (withinMs?: number): Promise<boolean> => {
    held.inFlight ??= (async () => {
      await null // `inFlight` is set before the finally below can clear it
      const startedAt = now()
      const bounds = withinMs === undefined || withinMs >= settings.timeoutMs ? settings : { ...settings, timeoutMs: Math.max(1, Math.floor(withinMs)) }
      try {
        const fetched = await downloadKeySet(bounds, closing.signal)
        held.table = fetched.table
        held.fetchedAt = now()
        held.failures = 0
        held.lastError = undefined
        const asked = fetched.delayMs === undefined ? settings.defaultRefreshMs : Math.max(fetched.delayMs, minRefreshMs)
        scheduleNext(Math.max(1, Math.min(asked, maxRefreshMs, Math.floor(maxStaleMs / 2))))
        report({ ok: true, seconds: (now() - startedAt) / 1000, keys: held.table.count, ignored: fetched.ignored })
        return true
      } catch (err) {
        held.failures++
        held.lastError = (err as Error).message
        scheduleNext(Math.min(FIRST_RETRY_MS * 2 ** Math.min(held.failures - 1, 30), Math.max(minRefreshMs, FIRST_RETRY_MS)))
        report({ ok: false, seconds: (now() - startedAt) / 1000, error: held.lastError })
        return false
      } finally {
        held.inFlight = undefined
      }
    })()
    return held.inFlight
  }

  return {
    fetch: fetchCoalesced,
    close () {
      held.closed = true
      cancelTimer?.()
      cancelTimer = undefined
      held.nextFetchAt = undefined
      closing.abort()
    }
  }
}

/** What a set's lookups answer, beside a key: the two errors, worded from what is held now. */
function lookupErrors (settings: Settings, held: Held): {
  unavailable: () => GatewayError
  unknownKey: (kid: string | undefined, alg: string) => GatewayError
  unknownId: (id: string) => GatewayError
} {
  const { name, now, errors, maxStaleMs, keyIds } = settings
  return {
    unavailable () {
      const at = now()
      const retryAfter = Math.max(1, Math.ceil(((held.nextFetchAt ?? at + FIRST_RETRY_MS) - at) / 1000))
      const why = held.fetchedAt === undefined
        ? 'they have not been fetched yet'
        : at - held.fetchedAt > maxStaleMs
          ? `the last good fetch was ${Math.round((at - held.fetchedAt) / 1000)} s ago, ` +
            `over the ${Math.round(maxStaleMs / 1000)} s they are kept through an outage`
          : 'they hold no such key, and the last fetch of them failed, so a key published since cannot be looked for; ' +
            `the next try is in ${retryAfter} s`
      // the fetch's own error (addresses, answers) is for the operator's log and metrics, not the client
      return errors.unavailable(`${name}'s signing keys are unavailable: ${why}`, retryAfter)
    },
    unknownKey (kid, alg) {
      if (kid !== undefined) return errors.unknownKey(`${name}'s key set holds no key ${JSON.stringify(kid)} for ${alg}`)
      const fitting = held.table?.byAlg.get(alg)?.length ?? 0
      return errors.unknownKey(`the token names no kid, and ${fitting === 0 ? 'none' : fitting} of ${name}'s keys fit ${alg}: exactly one must`)
    },
    unknownId: (id) =>
      errors.unknownKey(`${name}'s key set holds no usable key ${JSON.stringify(id)}${keyIds === 'thumbprint' ? ' (by its JWK thumbprint)' : ''}`)
  }
}

export function createRemoteKeySet (options: RemoteKeySetOptions): RemoteKeySet {
  const settings = settingsOf(options)
  const { name, now, errors, maxStaleMs, algorithms, where } = settings
  const held: Held = {
    table: undefined, fetchedAt: undefined, failures: 0, lastError: undefined, nextFetchAt: undefined, inFlight: undefined, closed: false
  }
  const refresh = keySetRefresh(settings, held)
  const refusals = lookupErrors(settings, held)
  let started: Promise<void> | undefined
  /** when the last fetch for an unknown kid started */
  let unknownKidFetchAt = Number.NEGATIVE_INFINITY

  const usableAt = (at: number): boolean => held.table !== undefined && held.fetchedAt !== undefined && at - held.fetchedAt <= maxStaleMs

  const start = (withinMs?: number): Promise<void> => {
    started ??= refresh.fetch(withinMs).then(() => {
      if (!usableAt(now())) throw new Error(held.lastError ?? `${where} has no usable keys`)
    })
    return started
  }

  const keyForSync = (kid: string | undefined, alg: string): CryptoKey | undefined => {
    const { table, fetchedAt } = held
    if (table === undefined || fetchedAt === undefined || now() - fetchedAt > maxStaleMs) return undefined
    if (kid !== undefined) return table.byKid.get(kid)?.get(alg) ?? undefined
    const keys = table.byAlg.get(alg)
    return keys?.length === 1 ? keys[0] : undefined
  }

  /** a published key by id, from what is held now: undefined when unknown, ambiguous, not yet (nbf) or no more (exp) valid, or stale */
  const publishedSync = (id: string): PublishedKey | undefined => {
    const { table, fetchedAt } = held
    if (table === undefined || fetchedAt === undefined) return undefined
    const at = now()
    if (at - fetchedAt > maxStaleMs) return undefined
    const key = table.published.get(id) ?? undefined
    if (key === undefined) return undefined
    if ((key.nbf !== undefined && key.nbf * 1000 > at) || (key.exp !== undefined && key.exp * 1000 <= at)) return undefined
    return key
  }

  /**
   * What is held answers: the key; unavailable when the keys are not usable, or when the last
   * fetch failed (the key may have been published since: the set could not be checked for it);
   * else the key is unknown, the client's fault.
   */
  const answer = <K>(find: () => K | undefined, notFound: () => GatewayError): K => {
    const found = find()
    if (found !== undefined) return found
    if (!usableAt(now()) || (held.failures > 0 && !held.closed)) throw refusals.unavailable()
    throw notFound()
  }

  /**
   * A lookup the cache cannot answer, after one fetch at most: the one under way (joined, its
   * outcome taken: no other is started after it), the first (on first use), or one for the
   * unknown key (at most once per unknownKidIntervalMs, and not while a failed fetch's back-off
   * runs); none when `afterFetch`.
   */
  const lookUpSlow = async <K>(find: () => K | undefined, notFound: () => GatewayError, afterFetch: boolean): Promise<K> => {
    if (afterFetch) return answer(find, notFound)
    if (held.inFlight !== undefined) await held.inFlight
    // fetched on first use, when start() was not called
    else if (started === undefined && held.fetchedAt === undefined && !held.closed) await start().catch(() => undefined)
    else if (!held.closed && usableAt(now()) && held.failures === 0 && now() - unknownKidFetchAt >= settings.unknownKidIntervalMs) {
      // set before the first await: every other caller in this interval sees it
      unknownKidFetchAt = now()
      await refresh.fetch()
    }
    return answer(find, notFound)
  }

  return {
    start,
    keyForSync,
    publishedKey (id, afterFetch = false) {
      return publishedSync(id) ?? lookUpSlow(() => publishedSync(id), () => refusals.unknownId(id), afterFetch)
    },
    keyFor (kid, alg, afterFetch = false) {
      const key = keyForSync(kid, alg)
      if (key !== undefined) return Promise.resolve(key)
      if (!algorithms.includes(alg)) return Promise.reject(errors.unknownKey(`${name}'s tokens are not signed with ${alg}: ${algorithms.join(', ')} only`))
      return lookUpSlow(() => keyForSync(kid, alg), () => refusals.unknownKey(kid, alg), afterFetch)
    },
    state () {
      const at = now()
      return {
        usable: usableAt(at),
        keys: held.table?.count ?? 0,
        fetchedAt: held.fetchedAt,
        ageSeconds: held.fetchedAt === undefined ? undefined : (at - held.fetchedAt) / 1000,
        failures: held.failures,
        lastError: held.lastError,
        nextFetchAt: held.nextFetchAt
      }
    },
    close: refresh.close
  }
}
