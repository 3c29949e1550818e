// The key directories of signed agents (Web Bot Auth), by the URL their Signature-Agent names:
// each kept by remote-keys/remote-key-set.ts (refreshed by its Cache-Control within bounds, an
// unknown keyid fetched again at most once per interval, never used past maxStale), looked up by
// the keys' RFC 7638 thumbprints (Web Bot Auth's keyid), each fetched set believed only once the
// check the caller gives passes (the directory's own signature: auth/directory-signature.ts).
//
// An agent names the URL, so what it may cost is bounded: at most `maxDirectories` directories
// are kept (least recently used first out, its timers stopped); a directory whose first fetch
// failed is remembered as failed for `retryIntervalMs` (no fetch meanwhile, whoever asks), in a
// list of its own (at most `maxFailures`, so failures never push out directories held); and
// first fetches of directories keygate does not hold start at most `newPerMinute` times a minute
// across all agents. A first fetch the address guard refused before connecting (the name
// resolved to refused addresses only, or an IP literal) sent nothing and is given back to that
// budget; a name that did not resolve is not (its lookup went out, and may have taken the whole
// 3 s: that is the cost the budget bounds). Agents the configuration names (the route's agents
// list, the agents file's origins: `named`) take nothing from the budget, so they never wait
// behind unknown ones; what they may cost is the operator's list. The fetch itself is the
// caller's (net/guarded-fetch.ts: HTTPS, no private address, bounded). Directories an operator
// pins come with their keys and are never fetched.
import { GatewayError } from '../errors.js'
import { LruCache } from '../lib/lru-cache.js'
import { GuardedFetchError } from '../net/guarded-fetch.js'
import type { DocumentCheck } from '../remote-keys/key-set-fetch.js'
import type { PublishedKey } from '../remote-keys/published-keys.js'
import { createRemoteKeySet, type RemoteKeySet, type RemoteKeySetErrors, type RemoteKeySetFetchOutcome } from '../remote-keys/remote-key-set.js'
import type { SignatureAgent } from './signature-agent.js'

/** the JWS algorithms of the keys an agent may sign with: Ed25519, RSA (RFC 9421's rsa-pss-sha512, rsa-v1_5-sha256), P-256 */
export const AGENT_KEY_ALGORITHMS = ['EdDSA', 'PS512', 'RS256', 'ES256'] as const
export const DEFAULT_MAX_DIRECTORIES = 1000
export const DEFAULT_NEW_DIRECTORIES_PER_MINUTE = 60
export const DEFAULT_RETRY_INTERVAL_MS = 60_000
export const DEFAULT_MAX_FAILED_DIRECTORIES = 10_000
/** a directory is small: a few keys */
export const DIRECTORY_MAX_BYTES = 64 * 1024
export const DIRECTORY_MAX_KEYS = 32
export const DIRECTORY_TIMEOUT_MS = 3_000
/** what keygate asks for: the directory's media type (draft-meunier-http-message-signatures-directory), or a JWK Set */
export const DIRECTORY_MEDIA_TYPE = 'application/http-message-signatures-directory+json'

/** An agent's key, found: whose it is and the key. */
export interface AgentKey {
  agent: SignatureAgent
  key: PublishedKey
  /** an operator pinned this directory (its keys from the agents file, never fetched) */
  pinned: boolean
}

/** A directory an operator pins: its keys given (remote-key-set.ts's publishedKeysOf), never fetched. */
export interface PinnedDirectory {
  origin: string
  keys: readonly PublishedKey[]
}

export interface AgentDirectoriesOptions {
  /** the fetch the key sets use (net/guarded-fetch.ts's, adapted); injectable */
  fetch: typeof globalThis.fetch
  /** the check of each fetched directory (its own signature, for the agent it was fetched for) */
  checkDirectory: (agent: SignatureAgent) => DocumentCheck | undefined
  pinned?: readonly PinnedDirectory[]
  /** the agents file names this directory origin: its first fetch takes nothing from the new-directory budget */
  named?: (origin: string) => boolean
  maxDirectories?: number
  /** failed directories remembered (each for retryIntervalMs), apart from those held */
  maxFailures?: number
  newPerMinute?: number
  retryIntervalMs?: number
  /** the key sets' bounds (remote-key-set.ts); defaults: refreshed every 1 to 60 minutes by Cache-Control, kept 1 hour through an outage */
  minRefreshMs?: number
  maxRefreshMs?: number
  maxStaleMs?: number
  unknownKeyIntervalMs?: number
  now?: () => number
  /** each fetch's outcome, for metrics and traces */
  onFetch?: (agent: SignatureAgent, outcome: RemoteKeySetFetchOutcome) => void
}

export interface AgentDirectories {
  /**
   * the key `keyid` (an RFC 7638 thumbprint) of `agent`'s directory: from what is held, else
   * fetched within the bounds; `routeNamesAgent`: the route's agents list names it (not `any`)
   */
  keyFor: (agent: SignatureAgent, keyid: string, routeNamesAgent?: boolean) => AgentKey | Promise<AgentKey>
  /** directories held now (pinned ones included) and fetches started since start */
  stats: () => { held: number; failed: number; fetches: number }
  /** a reloaded agents file's pins in force; what was fetched of `touched` origins (their entry changed) is dropped */
  repin: (pinned: readonly PinnedDirectory[], touched: ReadonlySet<string>) => void
  close: () => void
}

const unavailable = (origin: string) => (detail: string, retryAfterSeconds: number): GatewayError =>
  new GatewayError('AGENT_DIRECTORY_UNAVAILABLE', `The key directory of ${origin} cannot be used: ${detail}`,
    { headers: { 'retry-after': String(retryAfterSeconds) }, extra: { agent: origin } })

const unknownKey = (origin: string) => (detail: string): GatewayError =>
  new GatewayError('UNKNOWN_AGENT_KEY', `${detail}: the keyid of a Web Bot Auth signature is the JWK thumbprint (RFC 7638) of a key ` +
    `that ${origin}'s directory publishes`, { extra: { agent: origin } })

/**
 * What a client is told of a directory that failed: the kind of failure, in keygate's words. Never
 * an address, a name's resolution or a connection's error, which say what keygate's network holds
 * and reaches (anyone could name db.internal and learn whether it resolves, and to what): those
 * stay in the operator's log (onFetch). What the directory's own answer was (a status, its size,
 * its type, its signature) is the agent's to know.
 */
export function publicReason (error: string): string {
  const refused = /is refused: (.*)$/s.exec(error)
  if (refused !== null) return refused[1] as string
  if (/redirect/.test(error)) return 'it answered with a redirect; keygate follows none'
  if (/did not answer within (\d+) ms/.test(error)) return `it did not answer within ${DIRECTORY_TIMEOUT_MS} ms`
  const status = /answered (\d{3})$/.exec(error)
  if (status !== null) return `it answered ${status[1] as string}`
  if (/holds \d+ keys, over/.test(error)) return `it holds more than the ${DIRECTORY_MAX_KEYS} keys allowed`
  if (/bytes.*allowed/.test(error)) return `it is over the ${DIRECTORY_MAX_BYTES} bytes allowed`
  if (/is not JSON|is not a JWK Set|holds no key usable/.test(error)) return 'it is not a key directory keygate can use (JSON, a JWK Set with a key for Ed25519, RSA or P-256)'
  return 'it could not be fetched from a public address over HTTPS'
}

type Entry =
  /** `first`: its first fetch, under way (a request during it shares its outcome, a failure's reason included) */
  | { kind: 'set'; set: RemoteKeySet; first?: Promise<RemoteKeySet> }
/** a directory whose first fetch failed: not fetched again until `until` */
interface Failure { until: number; error: string }

/**
 * The budget of first fetches: at most `perMinute` in each minute (a fixed window from the first
 * one). `take` counts one and says in which window, or undefined when this one is spent;
 * `giveBack` returns one taken in `window`, if that window still runs.
 */
function newDirectoryBudget (perMinute: number, now: () => number) {
  let windowStart = Number.NEGATIVE_INFINITY
  let started = 0
  return {
    take: (): number | undefined => {
      const at = now()
      if (at - windowStart >= 60_000) {
        windowStart = at
        started = 0
      }
      if (started >= perMinute) return undefined
      started++
      return windowStart
    },
    giveBack: (window: number | undefined): void => { if (window !== undefined && window === windowStart) started-- },
    retryAfterSeconds: (): number => Math.max(1, Math.ceil((windowStart + 60_000 - now()) / 1000))
  }
}

/** the pinned directories by origin, each one's keys by thumbprint */
function pinsOf (directories: readonly PinnedDirectory[]): Map<string, Map<string, PublishedKey>> {
  return new Map(directories.map((directory) => [directory.origin, new Map(directory.keys.map((key) => [key.thumbprint, key]))]))
}

/** what was fetched (or failed) of these origins, dropped: fetched again under the agents file now in force */
function dropFetched (entries: LruCache<string, Entry>, failures: LruCache<string, Failure>, origins: ReadonlySet<string>): void {
  for (const url of [...entries.keys()]) {
    if (!origins.has(new URL(url).origin)) continue
    entries.get(url)?.set.close()
    entries.delete(url)
  }
  for (const url of [...failures.keys()]) if (origins.has(new URL(url).origin)) failures.delete(url)
}

export function createAgentDirectories (options: AgentDirectoriesOptions): AgentDirectories {
  const now = options.now ?? Date.now
  const retryIntervalMs = options.retryIntervalMs ?? DEFAULT_RETRY_INTERVAL_MS
  const newPerMinute = options.newPerMinute ?? DEFAULT_NEW_DIRECTORIES_PER_MINUTE
  const entries = new LruCache<string, Entry>(options.maxDirectories ?? DEFAULT_MAX_DIRECTORIES, (_url, entry) => {
    if (entry.kind === 'set') entry.set.close()
  })
  const failures = new LruCache<string, Failure>(options.maxFailures ?? DEFAULT_MAX_FAILED_DIRECTORIES)
  let pinned = pinsOf(options.pinned ?? [])
  let fetches = 0
  const budget = newDirectoryBudget(newPerMinute, now)

  /** `onFailure`: told of each fetch that failed (the first fetch's, to know whether it sent anything) */
  const setFor = (agent: SignatureAgent, onFailure?: (err: unknown) => void): RemoteKeySet => createRemoteKeySet({
    url: agent.url,
    name: agent.origin,
    algorithms: AGENT_KEY_ALGORITHMS,
    keyIds: 'thumbprint',
    accept: agent.type === 'directory' ? `${DIRECTORY_MEDIA_TYPE}, application/jwk-set+json;q=0.5` : 'application/jwk-set+json, application/json',
    fetch: async (input, init) => {
      fetches++
      try {
        return await options.fetch(input, init)
      } catch (err) {
        onFailure?.(err)
        throw err
      }
    },
    now,
    minRefreshMs: options.minRefreshMs ?? 60_000,
    maxRefreshMs: options.maxRefreshMs ?? 3_600_000,
    defaultRefreshMs: 300_000,
    maxStaleMs: options.maxStaleMs ?? 3_600_000,
    unknownKidIntervalMs: options.unknownKeyIntervalMs ?? 30_000,
    timeoutMs: DIRECTORY_TIMEOUT_MS,
    maxBytes: DIRECTORY_MAX_BYTES,
    maxKeys: DIRECTORY_MAX_KEYS,
    errors: { unavailable: unavailable(agent.origin), unknownKey: unknownKey(agent.origin) } satisfies RemoteKeySetErrors,
    ...(options.checkDirectory(agent) !== undefined && { checkDocument: options.checkDirectory(agent) }),
    onFetch: (outcome) => { options.onFetch?.(agent, outcome) }
  })

  /**
   * The first fetch of a directory: its set, or a failure remembered for retryIntervalMs.
   * `countedIn`: the budget's window it was counted in (given back if it fetched nothing).
   */
  const first = (agent: SignatureAgent, countedIn: number | undefined): Promise<RemoteKeySet> => {
    let sentNothing = false
    const set = setFor(agent, (err) => { sentNothing = err instanceof GuardedFetchError && err.refusedBeforeConnecting })
    const entry: Entry = { kind: 'set', set }
    entries.set(agent.url, entry)
    entry.first = (async () => {
      try {
        await set.start()
        failures.delete(agent.url)
        return set
      } catch (err) {
        set.close()
        const error = (err as Error).message
        if (sentNothing) budget.giveBack(countedIn)
        // unless another fetch of it started meanwhile (this entry dropped as the least recently used)
        const current = entries.get(agent.url)
        if (current === undefined || current === entry) {
          entries.delete(agent.url)
          failures.set(agent.url, { until: now() + retryIntervalMs, error })
        }
        throw unavailable(agent.origin)(publicReason(error), Math.ceil(retryIntervalMs / 1000))
      } finally {
        delete entry.first
      }
    })()
    return entry.first
  }

  const lookUp = (agent: SignatureAgent, keyid: string, routeNamesAgent = false): AgentKey | Promise<AgentKey> => {
    const held = pinned.get(agent.origin)
    if (held !== undefined && agent.type === 'directory') {
      const key = held.get(keyid)
      if (key === undefined) throw unknownKey(agent.origin)(`${agent.origin}'s pinned keys hold no key ${JSON.stringify(keyid)}`)
      return { agent, key, pinned: true }
    }
    const entry = entries.get(agent.url)
    if (entry?.kind === 'set' && entry.first !== undefined) {
      // the wait was that first fetch: answered from it, with no second fetch (one fetch timeout in all)
      return entry.first.then(async (set) => ({ agent, key: await set.publishedKey(keyid, true), pinned: false }))
    }
    if (entry?.kind === 'set') {
      const key = entry.set.publishedKey(keyid)
      return key instanceof Promise ? key.then((found) => ({ agent, key: found, pinned: false })) : { agent, key, pinned: false }
    }
    const failure = failures.get(agent.url)
    if (failure !== undefined && failure.until > now()) {
      throw unavailable(agent.origin)(publicReason(failure.error), Math.max(1, Math.ceil((failure.until - now()) / 1000)))
    }
    // the configuration's agents never wait behind unknown ones
    const configured = routeNamesAgent || options.named?.(agent.origin) === true
    const countedIn = configured ? undefined : budget.take()
    if (!configured && countedIn === undefined) {
      throw unavailable(agent.origin)(`keygate fetches at most ${newPerMinute} directories it does not hold a minute, and has this minute`,
        budget.retryAfterSeconds())
    }
    return first(agent, countedIn).then(async (set) => ({ agent, key: await set.publishedKey(keyid, true), pinned: false }))
  }

  return {
    keyFor: lookUp,
    stats: () => {
      return { held: pinned.size + entries.size, failed: failures.size, fetches }
    },
    repin: (directories, touched) => {
      pinned = pinsOf(directories)
      dropFetched(entries, failures, touched)
    },
    close: () => {
      for (const entry of entries.values()) entry.set.close()
      entries.clear()
      failures.clear()
    }
  }
}
