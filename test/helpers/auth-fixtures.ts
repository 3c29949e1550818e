// Shared fixtures for the unit tests of the auth stages, the key helpers and the user service.
// Not a test file: it only builds fake requests, key pairs, a token service over a key file that
// the tests also hold (to sign hostile tokens), and a helper that captures a GatewayError.
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyRequest } from 'fastify'
import { headersDeclareBody, type DescribedRequest } from '../../gateway/src/auth/described-request.js'
import { GatewayError } from '../../gateway/src/errors.js'
import type { Store } from '../../gateway/src/store/index.js'
import { createMemoryStore } from '../../gateway/src/store/memory.js'
import { createTokenService, type TokenService } from '../../gateway/src/tokens/token-service.js'
import { rsaKeyPair, signBase64, type TestKeyPair } from './keys.js'

export interface FakeRequestInit {
  headers?: Record<string, string | string[] | undefined>
  method?: string
  url?: string
  body?: unknown
}

export interface DescribedRequestInit extends FakeRequestInit {
  ip?: string
  scheme?: string
  authority?: string
  /** default: bytes when `body` is a non-empty Buffer, else none */
  describedBody?: DescribedRequest['body']
}

/**
 * A request as the auth stages see it (gateway/src/auth/described-request.ts), in neither mode:
 * `field` gives each header's value as its one line.
 */
export function describedRequest (init: DescribedRequestInit = {}): DescribedRequest {
  const headers = init.headers ?? {}
  const body = init.describedBody ?? (Buffer.isBuffer(init.body) && init.body.length > 0 ? init.body : undefined)
  return {
    method: init.method ?? 'GET',
    target: init.url ?? '/v1/clients/',
    headers,
    field: (name) => {
      const value = headers[name]
      return value === undefined ? undefined : Array.isArray(value) ? value : [value]
    },
    scheme: init.scheme ?? 'http',
    authority: init.authority ?? 'gateway.test',
    ip: init.ip ?? '192.0.2.1',
    declaresBody: headersDeclareBody(headers) || body !== undefined,
    declaredLength: headers['content-length'] === undefined ? undefined : Number(headers['content-length']),
    body
  }
}

/** Only what the inline glue reads: headers, method, raw.method, raw.url and body. */
export function fakeRequest (init: FakeRequestInit = {}): FastifyRequest {
  const method = init.method ?? 'GET'
  const url = init.url ?? '/v1/clients/'
  return {
    headers: init.headers ?? {},
    method,
    url,
    raw: { method, url },
    body: init.body
  } as unknown as FastifyRequest
}

/**
 * Runs `fn` (sync or async) and returns the GatewayError it throws. Anything else (no error, or
 * an error of another class) is reported as a failure, so callers can assert on code and status.
 */
export async function captureGatewayError (fn: () => unknown): Promise<GatewayError> {
  let result: unknown
  try {
    result = await fn()
  } catch (err) {
    if (err instanceof GatewayError) return err
    throw new Error(`expected a GatewayError, got ${String(err)}`, { cause: err })
  }
  throw new Error(`expected a GatewayError, but the call succeeded with ${JSON.stringify(result)}`)
}

/** Never reached in a passing test: makes type-narrowed access to an optional value explicit. */
export function defined<T> (value: T | undefined | null, what: string): T {
  if (value === undefined || value === null) throw new Error(`${what} is not defined`)
  return value
}

export type RsaPair = TestKeyPair & {
  /** SPKI ("-----BEGIN PUBLIC KEY-----") PEM */
  spkiPem: string
}

export function rsaPair (modulusLength = 2048): RsaPair {
  const pair = rsaKeyPair(modulusLength)
  return { ...pair, spkiPem: pair.publicPem }
}

/** What a client does: RSASSA-PKCS1-v1_5 SHA-256 over the bytes, as single-line base64. */
export { signBase64 }

export const ISSUER = 'keygate-test-issuer'
export const AUDIENCE = 'keygate-test-audience'

export interface TokenFixture {
  tokens: TokenService
  /** the private half of the service's signing key, read from the same key file */
  privateKey: KeyObject
  /** the kid the service puts in (and requires of) its tokens */
  kid: string
  store: Store
  cleanup: () => Promise<void>
}

/** A TokenService over an Ed25519 PKCS#8 PEM key file written to a fresh temporary directory. */
export async function tokenFixture (ttlSeconds = 900): Promise<TokenFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'keygate-auth-test-'))
  const { privateKey } = generateKeyPairSync('ed25519')
  const keyFile = join(dir, 'jwt-key.pem')
  await writeFile(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 })
  const store = createMemoryStore()
  const tokens = await createTokenService({ issuer: ISSUER, audience: AUDIENCE, ttlSeconds, keyFile }, store)
  const kid = defined(tokens.jwks.keys[0]?.kid, 'the kid of the service key')
  return { tokens, privateKey, kid, store, cleanup: async () => { await rm(dir, { recursive: true, force: true }) } }
}

/** Wraps a store and counts the calls to each method (the wrapped store's methods use no `this`). */
export function countingStore (inner: Store = createMemoryStore()): { store: Store; calls: Record<string, number> } {
  const calls: Record<string, number> = {}
  const store = { ...inner } as Record<string, unknown>
  for (const [name, value] of Object.entries(inner)) {
    if (typeof value !== 'function') continue
    calls[name] = 0
    store[name] = async (...args: unknown[]) => {
      calls[name] = (calls[name] ?? 0) + 1
      return await (value as (...a: unknown[]) => Promise<unknown>)(...args)
    }
  }
  return { store: store as unknown as Store, calls }
}
