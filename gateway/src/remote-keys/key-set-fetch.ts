// One fetch of a JWK Set from a URL someone else controls, within bounds: https only (http to a
// loopback host), no redirect followed, a time limit for the whole answer, the body and its
// Content-Length bounded, at most so many keys, and at least one usable (published-keys.ts); an
// optional check of the document before it is believed. Every failure is an Error whose message
// names the set and its URL.
import { readBounded } from '../lib/read-bounded.js'
import { isRecord, keyTableOf, type KeyIds, type KeyTable, type PublishedKey } from './published-keys.js'

/**
 * Checks a fetched set before it is believed (an agent's directory: its content type and its own
 * signature, by one of its keys, over the exact bytes received): throws an Error saying why it is
 * refused, and the keys held stay.
 */
export type DocumentCheck = (fetched: { url: URL; headers: Headers; keys: readonly PublishedKey[]; body: Uint8Array }) => void

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

/** the URL of a key set, as remoteUrlProblem allows it; an Error naming the set otherwise */
export function keySetUrl (raw: string, name: string): URL {
  const problem = remoteUrlProblem(raw)
  if (problem !== undefined) throw new Error(`${name}: the key set URL ${problem}`)
  return new URL(raw)
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

/** Where a key set is fetched from, how, and within which bounds. */
export interface KeySetSource {
  url: URL
  /** the set's name and URL, for messages */
  where: string
  fetch: typeof globalThis.fetch
  accept: string
  timeoutMs: number
  maxBytes: number
  maxKeys: number
  /** the JWS algorithms a key must serve to be used */
  algorithms: readonly string[]
  keyIds: KeyIds
  checkDocument?: DocumentCheck | undefined
}

/** One GET of the set, within the bounds (`closing`: the set was closed); throws an Error whose message says what was wrong. */
export async function downloadKeySet (set: KeySetSource, closing: AbortSignal):
Promise<{ table: KeyTable; ignored: string[]; delayMs: number | undefined }> {
  const { url, where, timeoutMs, maxBytes, maxKeys, algorithms } = set
  const timeout = AbortSignal.timeout(timeoutMs)
  const signal = AbortSignal.any([timeout, closing])
  const interrupted = (err: unknown): Error => new Error(timeout.aborted
    ? `${where} did not answer within ${timeoutMs} ms`
    : `${where} was not fetched: the key set was closed`, { cause: err })
  let response: Response
  try {
    response = await set.fetch(url.href, { redirect: 'manual', signal, headers: { accept: set.accept } })
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
    const { table: fetched, ignored } = await keyTableOf(document.keys, algorithms, set.keyIds)
    // An empty set verifies nothing: better the keys kept from before (until they are stale)
    // than none, if a provider's misconfiguration publishes only what keygate cannot use.
    if (fetched.count === 0) {
      throw new Error(`${where} holds no key usable for ${algorithms.join(', ')}${ignored.length === 0 ? '' : `: ${ignored.join('; ')}`}`)
    }
    if (set.checkDocument !== undefined) {
      const keys = [...fetched.published.values()].filter((key): key is PublishedKey => key !== null)
      try {
        set.checkDocument({ url, headers: response.headers, keys, body })
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
