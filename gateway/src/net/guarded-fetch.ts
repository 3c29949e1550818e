// One GET of a URL that someone else named (an agent's key directory: the agent names it), made so
// that it cannot be turned against what stands near keygate (server-side request forgery):
// - https: only, no credentials in the URL; redirects not followed, or (maxRedirects > 0) only
//   within the same origin, each checked again;
// - the address connected to must be public (addresses.ts): the name is resolved by the socket's
//   own lookup, which asks the resolver, drops every refused address and hands the socket only
//   checked ones, so a name that resolves differently the next time (DNS rebinding) cannot move
//   the connection; an IP-literal host (which the socket does not look up) is checked before
//   connecting; and the address the socket did connect to is checked again before the request;
// - an origin the operator pinned (allowedPrivateOrigins) may be on any address but a metadata one;
// - bounds: the whole exchange within timeoutMs, the body within maxBytes (refused by its
//   Content-Length before it is read, else once the bytes read pass it);
// - TLS as usual: the certificate checked against the URL's host name, which is also the SNI.
// Every failure is a GuardedFetchError naming the URL and its reason (and whether the guard refused
// it before any connection: refusedBeforeConnecting); no message quotes a body.
import { lookup as dnsLookup } from 'node:dns/promises'
import { isIP, type LookupFunction } from 'node:net'
import { rootCertificates } from 'node:tls'
import { Agent, buildConnector, request } from 'undici'
import { classifyAddress } from './addresses.js'

export const DEFAULT_TIMEOUT_MS = 5_000
export const DEFAULT_MAX_BYTES = 512 * 1024

export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>

export type GuardedFetchReason = 'scheme' | 'credentials' | 'address' | 'resolve' | 'redirect' | 'too-large' | 'timeout' | 'status' | 'connect' | 'tls'

export class GuardedFetchError extends Error {
  override readonly name = 'GuardedFetchError'
  readonly reason: GuardedFetchReason
  /** the URL being fetched when it failed (a redirect's target, once one is followed) */
  readonly url: string
  /** 'address': the refused address; 'status': the status answered */
  readonly detail: { address?: string; status?: number; cause?: unknown }
  /**
   * refused by the guard's own rules before any connection was tried: the URL (scheme,
   * credentials), or every address the name resolved to (or its IP literal). Nothing was sent to
   * the host. A name that did not resolve is not such a refusal: the lookup went out and may have
   * taken the whole time allowed.
   */
  readonly refusedBeforeConnecting: boolean
  constructor (reason: GuardedFetchReason, url: string, message: string,
    detail: { address?: string; status?: number; cause?: unknown } = {}, refusedBeforeConnecting = false) {
    super(`${url}: ${message}`, detail.cause === undefined ? undefined : { cause: detail.cause })
    this.reason = reason
    this.url = url
    this.detail = detail
    this.refusedBeforeConnecting = refusedBeforeConnecting
  }
}

export interface GuardedFetchOptions {
  /** resolves a host name to its addresses; default the system's (dns.lookup, all addresses) */
  resolver?: Resolver
  /** origins ("https://keys.internal:8443") the operator pinned: they may be on non-public addresses, metadata ones excepted */
  allowedPrivateOrigins?: Iterable<string>
  /** the whole exchange: resolving, connecting, TLS, the answer and its body (default 5 s) */
  timeoutMs?: number
  /** the body's bound (default 512 KiB) */
  maxBytes?: number
  /** same-origin redirects followed (default 0: none); a redirect to another origin is always refused */
  maxRedirects?: number
  /** the Accept header (default any) */
  accept?: string
  /** more request headers */
  headers?: Record<string, string>
  /** CA certificates (PEM) trusted besides Node's own (a test's CA) */
  ca?: string | string[]
}

export interface GuardedResponse {
  /** 2xx: any other status is a GuardedFetchError */
  status: number
  headers: Headers
  body: Buffer
  /** the URL answered: the one asked for, or the last same-origin redirect's */
  url: string
  /** the IP address the answer came from */
  address: string
}

const systemResolver: Resolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true })).map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }))

const REDIRECTS = new Set([301, 302, 303, 307, 308])

function nonNegativeInteger (option: string, value: number | undefined, fallback: number): number {
  const chosen = value ?? fallback
  if (!Number.isSafeInteger(chosen) || chosen < 0) throw new RangeError(`guardedFetch: ${option} must be a non-negative integer, not ${chosen}`)
  return chosen
}

/** The URL, if keygate may fetch it: https:, no credentials; the fragment dropped. */
function checkedUrl (raw: string): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new GuardedFetchError('scheme', JSON.stringify(raw), 'is not a URL', {}, true)
  }
  url.hash = ''
  if (url.protocol !== 'https:') throw new GuardedFetchError('scheme', url.href, `must be https://, not ${url.protocol}//`, {}, true)
  if (url.username !== '' || url.password !== '') throw new GuardedFetchError('credentials', url.href, 'must not carry credentials', {}, true)
  return url
}

/** A TLS failure (handshake, certificate), as against a connection's. */
const isTlsError = (err: unknown): boolean => {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && (/^ERR_(SSL|TLS)_/.test(code) || /CERT|ISSUER|SIGNATURE|SELF_SIGNED/.test(code))
}

/** The guard's side of one fetch: the agent whose sockets connect only where keygate may, and what it found. */
interface ConnectionGuard {
  agent: Agent
  /** why keygate may not connect to `address` for this origin, or undefined */
  addressProblem: (address: string) => string | undefined
  /** the first failure the guard itself raised: the request's own error would only say the socket failed */
  refusal: () => GuardedFetchError | undefined
  /** the address the last socket connected to */
  connectedTo: () => string | undefined
}

/**
 * The address guard: a lookup that hands the socket only the resolver's answers keygate may
 * connect to, and a check of the address each socket did connect to. `pinned`: the origin is one
 * the operator allowed on non-public addresses; `currentUrl`: the URL being fetched, for messages.
 */
function connectionGuard (options: GuardedFetchOptions, pinned: boolean, timeoutMs: number, currentUrl: () => string): ConnectionGuard {
  const resolver = options.resolver ?? systemResolver
  /** why keygate may not connect to `address` for this origin, or undefined */
  const addressProblem = (address: string): string | undefined => {
    const verdict = classifyAddress(address)
    if (verdict.public || (pinned && !verdict.metadata)) return undefined
    return `${address} is ${verdict.description}${pinned ? ' (refused even for a pinned origin)' : ''}`
  }
  /** the first failure the guard itself raised: the request's own error would only say the socket failed */
  let refusal: GuardedFetchError | undefined
  const refuse = (error: GuardedFetchError): GuardedFetchError => {
    refusal ??= error
    return error
  }
  let connectedTo: string | undefined

  /** The resolver's answers that keygate may connect to; throws when there is none. */
  const resolveChecked = async (hostname: string): Promise<Array<{ address: string; family: 4 | 6 }>> => {
    let answers: Array<{ address: string; family: 4 | 6 }>
    try {
      answers = await resolver(hostname)
    } catch (err) {
      throw refuse(new GuardedFetchError('resolve', currentUrl(), `${hostname} did not resolve: ${(err as Error).message}`, { cause: err }))
    }
    if (!Array.isArray(answers) || answers.length === 0) throw refuse(new GuardedFetchError('resolve', currentUrl(), `${hostname} resolved to no address`))
    const problems = answers.map(({ address }) => ({ address, problem: addressProblem(String(address)) }))
    const allowed = problems.filter(({ problem }) => problem === undefined)
      .map(({ address }) => ({ address, family: isIP(address) === 6 ? 6 as const : 4 as const }))
    if (allowed.length > 0) return allowed
    const [first] = problems
    throw refuse(new GuardedFetchError('address', currentUrl(),
      `${hostname} resolves to no address keygate may connect to: ${problems.map(({ problem }) => problem).join('; ')}`, { address: first?.address }, true))
  }

  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    resolveChecked(hostname).then((addresses) => {
      const family = lookupOptions.family === 'IPv4' ? 4 : lookupOptions.family === 'IPv6' ? 6 : lookupOptions.family
      const fitting = family === 4 || family === 6 ? addresses.filter((candidate) => candidate.family === family) : addresses
      const [chosen] = fitting
      if (chosen === undefined) {
        callback(refuse(new GuardedFetchError('resolve', currentUrl(), `${hostname} has no allowed IPv${String(family)} address`)), '', 0)
      } else if (lookupOptions.all === true) {
        callback(null, fitting)
      } else {
        callback(null, chosen.address, chosen.family)
      }
    }, (err: Error) => callback(err, '', 0))
  }

  const connectTls = buildConnector({
    lookup,
    timeout: timeoutMs,
    maxCachedSessions: 0,
    ...(options.ca === undefined ? {} : { ca: [...rootCertificates, ...[options.ca].flat()] })
  })
  const agent = new Agent({
    connect: (connectOptions, callback) => {
      connectTls(connectOptions, (err, socket) => {
        if (err !== null) return callback(err, null)
        // the address the socket is connected to: resolved by the lookup above, or the URL's IP literal
        const address = socket.remoteAddress ?? ''
        const problem = addressProblem(address)
        if (problem !== undefined) {
          socket.destroy()
          return callback(refuse(new GuardedFetchError('address', currentUrl(), problem, { address })), null)
        }
        connectedTo = address
        callback(null, socket)
      })
    }
  })
  return { agent, addressProblem, refusal: () => refusal, connectedTo: () => connectedTo }
}

/** The answer's headers, as fetch's Headers. */
function headersOf (raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers()
  for (const [name, value] of Object.entries(raw)) {
    for (const one of [value ?? []].flat()) headers.append(name, one)
  }
  return headers
}

/** GETs `url` within the rules above; resolves with a 2xx answer, else throws a GuardedFetchError. */
export async function guardedFetch (url: string, options: GuardedFetchOptions = {}): Promise<GuardedResponse> {
  const timeoutMs = nonNegativeInteger('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS)
  const maxBytes = nonNegativeInteger('maxBytes', options.maxBytes, DEFAULT_MAX_BYTES)
  const maxRedirects = nonNegativeInteger('maxRedirects', options.maxRedirects, 0)
  let current = checkedUrl(url)
  const origin = current.origin
  const pinned = [...options.allowedPrivateOrigins ?? []].some((entry) => URL.canParse(entry) && new URL(entry).origin === origin)
  const { agent, addressProblem, refusal, connectedTo } = connectionGuard(options, pinned, timeoutMs, () => current.href)
  const abort = new AbortController()
  const timer = setTimeout(() => abort.abort(), timeoutMs)
  // undici acts on an abort only once a connection is made: the timeout must not wait for that
  const timedOut = new Promise<never>((_resolve, reject) => {
    abort.signal.addEventListener('abort', () => reject(new Error('timed out')), { once: true })
  })
  timedOut.catch(() => undefined)
  const failure = (err: unknown, doing: string): GuardedFetchError => {
    const refused = refusal()
    if (refused !== undefined) return refused
    if (err instanceof GuardedFetchError) return err
    if (abort.signal.aborted) return new GuardedFetchError('timeout', current.href, `did not answer within ${timeoutMs} ms`, { cause: err })
    const message = err instanceof Error ? err.message : String(err)
    return new GuardedFetchError(isTlsError(err) ? 'tls' : 'connect', current.href, `${doing}: ${message}`, { cause: err })
  }

  try {
    for (let redirects = 0; ; redirects++) {
      // an IP-literal host is not looked up: check it before connecting
      const literal = current.hostname.replace(/^\[(.*)\]$/, '$1')
      if (isIP(literal) !== 0) {
        const problem = addressProblem(literal)
        if (problem !== undefined) throw new GuardedFetchError('address', current.href, problem, { address: literal }, redirects === 0)
      }
      let answer: Awaited<ReturnType<typeof request>>
      try {
        const sent = request(current, {
          dispatcher: agent,
          method: 'GET',
          signal: abort.signal,
          headers: { accept: options.accept ?? '*/*', ...options.headers }
        })
        // an answer that comes after the timeout is dropped; a failure after it is no one's concern
        sent.then(({ body }) => { if (abort.signal.aborted) body.on('error', () => undefined).destroy() }, () => undefined)
        answer = await Promise.race([timedOut, sent])
      } catch (err) {
        throw failure(err, 'could not be fetched')
      }
      const { statusCode: status, body } = answer
      // a body not read (a refusal) is dropped with its connection; its abort error is expected
      body.on('error', () => undefined)
      const headers = headersOf(answer.headers)
      if (REDIRECTS.has(status) && headers.has('location')) {
        body.destroy()
        const location = headers.get('location') ?? ''
        const target = URL.canParse(location, current.href) ? new URL(location, current) : undefined
        const refused = (why: string): GuardedFetchError =>
          new GuardedFetchError('redirect', current.href, `answered ${status}, a redirect to ${location}: ${why}`)
        if (maxRedirects === 0) throw refused('redirects are not followed')
        if (target === undefined || target.origin !== origin) throw refused('not the same origin')
        if (redirects >= maxRedirects) throw refused(`over ${maxRedirects} redirects`)
        target.hash = ''
        current = target
        continue
      }
      if (status < 200 || status > 299) {
        body.destroy()
        throw new GuardedFetchError('status', current.href, `answered ${status}`, { status })
      }
      const declared = Number(headers.get('content-length') ?? Number.NaN)
      if (declared > maxBytes) {
        body.destroy()
        throw new GuardedFetchError('too-large', current.href, `is ${declared} bytes (Content-Length), over the ${maxBytes} allowed`)
      }
      const chunks: Buffer[] = []
      let size = 0
      try {
        for await (const chunk of body) {
          size += (chunk as Buffer).length
          if (size > maxBytes) {
            body.destroy()
            throw new GuardedFetchError('too-large', current.href, `is over the ${maxBytes} bytes allowed`)
          }
          chunks.push(chunk as Buffer)
        }
      } catch (err) {
        throw failure(err, 'its body could not be read')
      }
      return { status, headers, body: Buffer.concat(chunks, size), url: current.href, address: connectedTo() ?? literal }
    }
  } finally {
    clearTimeout(timer)
    // not awaited: a connection still being made ends with its own timeout (timeoutMs), after the answer
    agent.destroy().catch(() => undefined)
  }
}
