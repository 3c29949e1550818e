// The key directories of signed agents (Web Bot Auth), by the URL their Signature-Agent names:
// each kept by remote-keys/remote-key-set.ts (refreshed by its Cache-Control within bounds, an
// unknown keyid fetched again at most once per interval, never used past maxStale), looked up by
// the keys' RFC 7638 thumbprints (Web Bot Auth's keyid), each fetched set believed only once the
// check the caller gives passes (the directory's own signature: auth/directory-signature.ts).
//
// An agent names the URL, so what it may cost is bounded: at most `maxDirectories` directories
// are kept (least recently used first out, its timers stopped); a directory whose first fetch
// failed is remembered as failed for `retryIntervalMs` (no fetch meanwhile, whoever asks); and
// first fetches of directories keygate does not hold start at most `newPerMinute` times a minute
// across all agents. The fetch itself is the caller's (net/guarded-fetch.ts: HTTPS, no private
// address, bounded). Directories an operator pins come with their keys and are never fetched.
import { GatewayError } from '../errors.js'
import { LruCache } from '../lib/lru-cache.js'
import type { DocumentCheck } from '../remote-keys/key-set-fetch.js'
import type { PublishedKey } from '../remote-keys/published-keys.js'
import { createRemoteKeySet, type RemoteKeySet, type RemoteKeySetErrors, type RemoteKeySetFetchOutcome } from '../remote-keys/remote-key-set.js'
import type { SignatureAgent } from './signature-agent.js'

/** the JWS algorithms of the keys an agent may sign with: Ed25519, RSA (RFC 9421's rsa-pss-sha512, rsa-v1_5-sha256), P-256 */
export const AGENT_KEY_ALGORITHMS = ['EdDSA', 'PS512', 'RS256', 'ES256'] as const
export const DEFAULT_MAX_DIRECTORIES = 1000
export const DEFAULT_NEW_DIRECTORIES_PER_MINUTE = 60
export const DEFAULT_RETRY_INTERVAL_MS = 60_000
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
  maxDirectories?: number
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
  /** the key `keyid` (an RFC 7638 thumbprint) of `agent`'s directory: from what is held, else fetched within the bounds */
  keyFor: (agent: SignatureAgent, keyid: string) => AgentKey | Promise<AgentKey>
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
  | { kind: 'failed'; until: number; error: string }

/** the pinned directories by origin, each one's keys by thumbprint */
function pinsOf (directories: readonly PinnedDirectory[]): Map<string, Map<string, PublishedKey>> {
  return new Map(directories.map((directory) => [directory.origin, new Map(directory.keys.map((key) => [key.thumbprint, key]))]))
}

/** what was fetched (or failed) of these origins, dropped: fetched again under the agents file now in force */
function dropFetched (entries: LruCache<string, Entry>, origins: ReadonlySet<string>): void {
  for (const url of [...entries.keys()]) {
    if (!origins.has(new URL(url).origin)) continue
    const entry = entries.get(url)
    if (entry?.kind === 'set') entry.set.close()
    entries.delete(url)
  }
}

export function createAgentDirectories (options: AgentDirectoriesOptions): AgentDirectories {
  const now = options.now ?? Date.now
  const retryIntervalMs = options.retryIntervalMs ?? DEFAULT_RETRY_INTERVAL_MS
  const newPerMinute = options.newPerMinute ?? DEFAULT_NEW_DIRECTORIES_PER_MINUTE
  const entries = new LruCache<string, Entry>(options.maxDirectories ?? DEFAULT_MAX_DIRECTORIES, (_url, entry) => {
    if (entry.kind === 'set') entry.set.close()
  })
  let pinned = pinsOf(options.pinned ?? [])
  let fetches = 0
  /** the first fetches started in the current minute */
  let windowStart = Number.NEGATIVE_INFINITY
  let startedInWindow = 0

  const setFor = (agent: SignatureAgent): RemoteKeySet => createRemoteKeySet({
    url: agent.url,
    name: agent.origin,
    algorithms: AGENT_KEY_ALGORITHMS,
    keyIds: 'thumbprint',
    accept: agent.type === 'directory' ? `${DIRECTORY_MEDIA_TYPE}, application/jwk-set+json;q=0.5` : 'application/jwk-set+json, application/json',
    fetch: async (input, init) => {
      fetches++
      return await options.fetch(input, init)
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

  /** A first fetch may start now: within this minute's budget (counted). */
  const mayStart = (): boolean => {
    const at = now()
    if (at - windowStart >= 60_000) {
      windowStart = at
      startedInWindow = 0
    }
    if (startedInWindow >= newPerMinute) return false
    startedInWindow++
    return true
  }

  /** The first fetch of a directory: its set, or a failure remembered for retryIntervalMs. */
  const first = (agent: SignatureAgent): Promise<RemoteKeySet> => {
    const set = setFor(agent)
    const entry: Entry = { kind: 'set', set }
    entries.set(agent.url, entry)
    entry.first = (async () => {
      try {
        await set.start()
        return set
      } catch (err) {
        set.close()
        const error = (err as Error).message
        // unless another fetch of it started meanwhile (this entry dropped as the least recently used)
        const current = entries.get(agent.url)
        if (current === undefined || current === entry) entries.set(agent.url, { kind: 'failed', until: now() + retryIntervalMs, error })
        throw unavailable(agent.origin)(publicReason(error), Math.ceil(retryIntervalMs / 1000))
      } finally {
        delete entry.first
      }
    })()
    return entry.first
  }

  const lookUp = (agent: SignatureAgent, keyid: string): AgentKey | Promise<AgentKey> => {
    const held = pinned.get(agent.origin)
    if (held !== undefined && agent.type === 'directory') {
      const key = held.get(keyid)
      if (key === undefined) throw unknownKey(agent.origin)(`${agent.origin}'s pinned keys hold no key ${JSON.stringify(keyid)}`)
      return { agent, key, pinned: true }
    }
    const entry = entries.get(agent.url)
    if (entry?.kind === 'set' && entry.first !== undefined) {
      return entry.first.then(async (set) => ({ agent, key: await set.publishedKey(keyid), pinned: false }))
    }
    if (entry?.kind === 'set') {
      const key = entry.set.publishedKey(keyid)
      return key instanceof Promise ? key.then((found) => ({ agent, key: found, pinned: false })) : { agent, key, pinned: false }
    }
    if (entry?.kind === 'failed' && entry.until > now()) {
      throw unavailable(agent.origin)(publicReason(entry.error), Math.max(1, Math.ceil((entry.until - now()) / 1000)))
    }
    if (!mayStart()) {
      throw unavailable(agent.origin)(`keygate fetches at most ${newPerMinute} directories it does not hold a minute, and has this minute`,
        Math.max(1, Math.ceil((windowStart + 60_000 - now()) / 1000)))
    }
    return first(agent).then(async (set) => ({ agent, key: await set.publishedKey(keyid), pinned: false }))
  }

  return {
    keyFor: lookUp,
    stats: () => {
      let held = pinned.size
      let failed = 0
      for (const entry of entries.values()) {
        if (entry.kind === 'set') held++
        else failed++
      }
      return { held, failed, fetches }
    },
    repin: (directories, touched) => {
      pinned = pinsOf(directories)
      dropFetched(entries, touched)
    },
    close: () => {
      for (const entry of entries.values()) if (entry.kind === 'set') entry.set.close()
      entries.clear()
    }
  }
}
