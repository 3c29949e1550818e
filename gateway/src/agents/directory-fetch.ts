// The one way keygate fetches a signed agent's directory, whose URL the agent names: net/
// guarded-fetch.ts (HTTPS only; loopback, private, link-local and metadata addresses refused by
// the address connected to, but for the origins an operator allows on a private address; no
// redirect; bounded in time and size), as the fetch remote-keys/remote-key-set.ts calls.
import { guardedFetch, type Resolver } from '../net/guarded-fetch.js'
import { DIRECTORY_MAX_BYTES, DIRECTORY_TIMEOUT_MS } from './agent-directories.js'

export interface DirectoryFetchOptions {
  /** origins fetched although they resolve to a private address (the agents file's privateAddress): read at each fetch */
  privateOrigins?: Iterable<string>
  /** name resolution (tests: a resolver the test controls); default the system's */
  resolver?: Resolver
  /** more CA certificates to trust (tests: their own CA) */
  ca?: string
}

export function directoryFetch (options: DirectoryFetchOptions = {}): typeof globalThis.fetch {
  return async (input, init) => {
    const accept = new Headers(init?.headers).get('accept') ?? undefined
    const answer = await guardedFetch(String(input), {
      ...(options.resolver !== undefined && { resolver: options.resolver }),
      ...(options.privateOrigins !== undefined && { allowedPrivateOrigins: options.privateOrigins }),
      ...(options.ca !== undefined && { ca: options.ca }),
      ...(accept !== undefined && { accept }),
      timeoutMs: DIRECTORY_TIMEOUT_MS,
      maxBytes: DIRECTORY_MAX_BYTES,
      maxRedirects: 0
    })
    return new Response(answer.body, { status: answer.status, headers: answer.headers })
  }
}
