// The key types of the public API, described structurally (as far as the client reads a key), so
// that the declarations name no DOM or Node.js type: they compile in a browser project without
// @types/node and in a Node.js project without the DOM library alike.

/**
 * A WebCrypto CryptoKey, as far as the client reads it (so that the declarations need neither the
 * DOM's nor Node.js's types). Signing takes a private RSASSA-PKCS1-v1_5 key with SHA-256.
 */
export interface CryptoKeyLike {
  readonly type: string
  readonly algorithm: { readonly name: string }
  readonly extractable: boolean
  readonly usages: readonly string[]
}

/** A Node.js KeyObject (node:crypto), as far as the client reads it: its type, and its JWK. */
export interface KeyObjectLike {
  readonly type: string
  readonly asymmetricKeyType?: string | undefined
  export (options: { format: 'jwk' }): unknown
}

/**
 * An RSA private key: PEM text, PKCS#8 ("BEGIN PRIVATE KEY") or PKCS#1 ("BEGIN RSA PRIVATE KEY"),
 * as a string or its bytes (a file read without an encoding); a CryptoKey; or a KeyObject.
 */
export type PrivateKeyInput = string | Uint8Array | CryptoKeyLike | KeyObjectLike

/** Either half of an RSA key pair, in the forms of PrivateKeyInput; PEM also "BEGIN PUBLIC KEY" or "BEGIN RSA PUBLIC KEY". */
export type KeyInput = PrivateKeyInput
