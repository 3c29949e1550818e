// createClient: a client for one keygate, user and key, that signs and sends each business
// request with fetch (the key imported once, on the first request).
import { type Bytes, sha256Hex, subtle, utf8 } from './bytes.js'
import {
  algorithmFor, checkApiKey, checkBaseUrl, checkBodyRules, checkFetch, checkRequest, checkScheme, checkSignedBody, checkToken
} from './checks.js'
import { type DpopKeyPair, withDpopProof } from './dpop.js'
import { SigningInputError } from './errors.js'
import { importSigningKey, preparePrivateKey, publicHalfReadable, publicSpki, signRaw, type WebCryptoKey } from './keys.js'
import {
  checkAlgorithm, checkCoveredTarget, checkExpiresIn, checkLabel, type CoveredTarget, prepareMessageSignature, signatureField, type SignatureScheme
} from './message-signing.js'
import type { MessageSignatureAlgorithm, SeedBodyBoundary } from './protocol/index.js'
import type { FetchFunction, RequestBody } from './request-types.js'
import { signatureHeaders, signingBytes } from './sign.js'
import type { PrivateKeyInput } from './types.js'

export interface ClientOptions {
  /** keygate's origin, e.g. http://127.0.0.1:8080 */
  baseUrl: string
  /** the bearer token from POST /v1/auth/token (see `login`) */
  token: string
  /** imported once, on the first request */
  privateKey: PrivateKeyInput
  /**
   * default: the apiKey of privateKey's public half, which is what registration returned.
   * Required with a non-extractable CryptoKey, whose public half cannot be read.
   */
  apiKey?: string | undefined
  /** default: the global fetch */
  fetch?: FetchFunction | undefined
  /** "seed" (default: X-API-* headers) or "rfc9421" (HTTP Message Signatures, covering @target-uri of baseUrl by default) */
  scheme?: SignatureScheme | undefined
  /** rfc9421: the signature's label; default "sig1" */
  label?: string | undefined
  /** rfc9421: "target-uri" (default) or "path" (@path and @query: behind a proxy that rewrites Host) */
  components?: CoveredTarget | undefined
  /** rfc9421 with an RSA key: "rsa-v1_5-sha256" (default) or "rsa-pss-sha512" */
  algorithm?: MessageSignatureAlgorithm | undefined
  /** rfc9421: each signature expires this many seconds after it is made (the `expires` parameter); default none */
  expiresIn?: number | undefined
  /** seed: "enforced" (default) or "unchecked", for a route with seedBodyBoundary: unchecked (see SignRequestInput) */
  seedBodyBoundary?: SeedBodyBoundary | undefined
  /** DELETE and OPTIONS requests that may carry a body: the route's bodyOnMethods; default none */
  bodyOnMethods?: readonly string[] | undefined
  /**
   * The DPoP key pair the token is bound to (given to login): each request then carries
   * "Authorization: DPoP <token>" and a proof by it, and an answer asking for the server's nonce
   * is sent again once with it
   */
  dpop?: DpopKeyPair | undefined
}

export interface SignedResponseInfo {
  /** which scheme signed the request */
  scheme: SignatureScheme
  /** the bytes that were signed: seed, timestamp + METHOD + target + body; rfc9421, the signature base */
  signingString: Uint8Array
  /** every header sent, the Authorization value included, names in lower case */
  headers: Record<string, string>
}

/** fetch's options, but for the method and the body: those are fetch's and send's own arguments, which are signed. */
export type ClientRequestInit = Omit<RequestInit, 'method' | 'body'>

export interface KeygateClient {
  /** The apiKey the client sends: options.apiKey, else the SHA-256 of the key's public half, computed once. */
  apiKey: () => Promise<string>
  /**
   * Signs and sends one business request. The body is sent as given (a string as UTF-8), with
   * `Content-Type: application/json` unless `init.headers` names another. Any status resolves.
   */
  fetch: (method: string, target: string, body?: RequestBody | null, init?: ClientRequestInit) => Promise<Response>
  /** as `fetch`, and also what was signed and sent (what the CLI's -v prints) */
  send: (method: string, target: string, body?: RequestBody | null, init?: ClientRequestInit) => Promise<{ response: Response } & SignedResponseInfo>
}

/**
 * A client for one keygate, user and key. Synchronous: it checks every option at once (a mistake
 * throws a SigningInputError here), and imports the key on the first request, once.
 */
export function createClient (options: ClientOptions): KeygateClient {
  const origin = checkBaseUrl(options.baseUrl)
  const token = checkToken(options.token)
  const key = preparePrivateKey(options.privateKey)
  const givenApiKey = options.apiKey === undefined ? undefined : checkApiKey(options.apiKey)
  if (givenApiKey === undefined && !publicHalfReadable(key)) {
    throw new SigningInputError('apiKey', 'privateKey is a non-extractable CryptoKey, whose public half (and so its apiKey) cannot be read: ' +
      'give apiKey, what registerKey returned (or await apiKeyOf(keyPair.publicKey))')
  }
  const fetchImpl = checkFetch(options.fetch)
  const scheme = checkScheme(options.scheme)
  const messageOptions = { label: checkLabel(options.label), components: checkCoveredTarget(options.components), expiresIn: checkExpiresIn(options.expiresIn) }
  const algorithm = algorithmFor(key, checkAlgorithm(options.algorithm))
  const bodyRules = checkBodyRules(options)
  const dpop = options.dpop
  if (dpop !== undefined && (typeof dpop !== 'object' || dpop === null || typeof dpop.privateKey !== 'object' || typeof dpop.publicKey !== 'object')) {
    throw new SigningInputError('dpop', 'must be a WebCrypto key pair, { privateKey, publicKey } (generateDpopKey() makes one)')
  }
  subtle() // a runtime without WebCrypto (a browser page on plain http:// other than localhost) is said at once, too

  let signingKey: Promise<WebCryptoKey> | undefined
  let apiKey: Promise<string> | undefined
  const importedKey = async (): Promise<WebCryptoKey> => await (signingKey ??= importSigningKey(key, scheme === 'rfc9421' ? algorithm : undefined))
  const clientApiKey = async (): Promise<string> =>
    await (apiKey ??= givenApiKey !== undefined ? Promise.resolve(givenApiKey) : publicSpki(key, 'privateKey').then((spki) => sha256Hex([spki])))

  const send: KeygateClient['send'] = async (method, target, body, init = {}) => {
    if ((init as { body?: unknown }).body !== undefined) throw new SigningInputError('init.body', 'pass the body as the third argument, so that it is signed')
    const request = checkRequest({ method, target, body })
    checkSignedBody(request, scheme, bodyRules)
    // fetch's URL parser re-encodes some characters (a ' in a query) and drops an empty "?":
    // what it would send must be exactly what is signed.
    const url = new URL(request.target, origin)
    if (url.pathname + url.search !== request.target) {
      throw new SigningInputError('target', `fetch would send ${JSON.stringify(url.pathname + url.search)} for ${JSON.stringify(request.target)}; ` +
        'send and sign that form instead')
    }
    let headers = new Headers()
    let bytes: Bytes = new Uint8Array(0)
    // signed anew for each try: a retry with the server's DPoP nonce is another request
    const signAndSend = async (proof: string | undefined): Promise<Response> => {
      headers = new Headers(init.headers)
      if (request.body.length > 0 && !headers.has('content-type')) headers.set('content-type', 'application/json')
      headers.set('authorization', proof === undefined ? `Bearer ${token}` : `DPoP ${token}`)
      if (proof !== undefined) headers.set('dpop', proof)
      if (scheme === 'rfc9421') {
        const contentType = request.body.length > 0 ? headers.get('content-type') ?? undefined : undefined
        const prepared = await prepareMessageSignature({ ...request, origin, contentType }, await clientApiKey(), algorithm, messageOptions)
        bytes = utf8(prepared.base)
        if (prepared.contentDigest !== undefined) headers.set('content-digest', prepared.contentDigest)
        headers.set('signature-input', prepared.signatureInput)
        headers.set('signature', signatureField(prepared.label, await signRaw(await importedKey(), algorithm, bytes)))
      } else {
        bytes = signingBytes(request)
        const signed = await signatureHeaders(request, await clientApiKey(), await importedKey(), key.type, bytes)
        for (const [name, value] of Object.entries(signed)) headers.set(name, value)
      }
      return await fetchImpl(url, {
        ...init,
        method: request.method,
        headers,
        ...(request.body.length > 0 && { body: request.body })
      })
    }
    const response = dpop === undefined ? await signAndSend(undefined) : await withDpopProof(dpop, request.method, url, token, signAndSend)
    const sent: Record<string, string> = {}
    headers.forEach((value, name) => { sent[name] = value })
    return { response, scheme, signingString: bytes, headers: sent }
  }
  return {
    apiKey: clientApiKey,
    send,
    fetch: async (method, target, body, init) => (await send(method, target, body, init)).response
  }
}
