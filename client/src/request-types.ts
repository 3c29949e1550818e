// What the client is given to sign a request, and the headers it answers with: the seed scheme's
// X-API-* headers, or RFC 9421's Signature-Input and Signature (with Content-Digest and
// Content-Type for a body).
import type { MessageSignatureOptions } from './message-signing.js'
import type { SeedBodyBoundary } from './protocol/index.js'
import type { PrivateKeyInput } from './types.js'

/** The three headers of a signed business request (the bearer token goes in Authorization). */
export interface SignatureHeaders {
  'X-API-Key': string
  'X-API-Timestamp': string
  'X-API-Signature': string
}

/** The exact bytes to send: a string is sent as UTF-8. */
export type RequestBody = string | Uint8Array | ArrayBuffer

export interface SignRequestInput {
  /** the HTTP method; sent and signed in upper case */
  method: string
  /** the origin-form request target exactly as it will be sent: "/path" or "/path?query" */
  target: string
  /** the exact body bytes (a string is sent as UTF-8); none for GET and HEAD */
  body?: RequestBody | null | undefined
  /** the apiKey POST /v1/api-keys returned */
  apiKey: string
  /** the private key (RSA, Ed25519 or EC P-256): PEM text (PKCS#8, PKCS#1, SEC1), a CryptoKey or a KeyObject */
  privateKey: PrivateKeyInput
  /** seed scheme: milliseconds since the Unix epoch; default Date.now() */
  timestamp?: number | string | undefined
  /** "seed", the default: X-API-Key, X-API-Timestamp, X-API-Signature; for RFC 9421 see MessageSignatureInput */
  scheme?: 'seed' | undefined
  /**
   * seed scheme: "enforced" (default) refuses a body that starts with a byte a target may hold, as
   * keygate does (AMBIGUOUS_SIGNED_BODY); "unchecked" only for a route with seedBodyBoundary: unchecked
   */
  seedBodyBoundary?: SeedBodyBoundary | undefined
  /** DELETE and OPTIONS requests that may carry a body (the route's bodyOnMethods); default none, as keygate's signed routes */
  bodyOnMethods?: readonly string[] | undefined
}

/** The seed scheme's body rule: as keygate's routes by default, or off for a route that opted out. */
export type { SeedBodyBoundary }

/**
 * RFC 9421: what signRequest needs besides the request. `baseUrl` (keygate's origin as the client
 * addresses it, e.g. https://api.example.com) is needed to cover @target-uri, the default; with
 * `components: 'path'` it is not.
 */
export interface MessageSignatureInput extends Omit<SignRequestInput, 'scheme' | 'timestamp'>, MessageSignatureOptions {
  scheme: 'rfc9421'
  baseUrl?: string | undefined
  /** the Content-Type sent with a body, which is covered; default application/json */
  contentType?: string | undefined
}

/**
 * The headers of an RFC 9421 signed request (the bearer token goes in Authorization). A request
 * with a body also sends Content-Digest and Content-Type, both covered by the signature.
 */
export interface MessageSignatureHeaders {
  'Signature-Input': string
  Signature: string
  'Content-Digest'?: string
  'Content-Type'?: string
}

/** What fetch the client calls: the global one by default, or any function like it. */
export type FetchFunction = (input: URL, init: RequestInit) => Promise<Response>
