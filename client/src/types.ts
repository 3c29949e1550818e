// The key types of the public API, described structurally (as far as the client reads a key), so
// that the declarations name no DOM or Node.js type: they compile in a browser project without
// @types/node and in a Node.js project without the DOM library alike.

/**
 * A WebCrypto CryptoKey, as far as the client reads it (so that the declarations need neither the
 * DOM's nor Node.js's types). Signing takes a private RSASSA-PKCS1-v1_5 key with SHA-256 (or
 * RSA-PSS with SHA-512 for RFC 9421's rsa-pss-sha512), an Ed25519 key, or an ECDSA P-256 key.
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
 * A private key of one of the types keygate takes (RSA, Ed25519, EC P-256): PEM text, PKCS#8
 * ("BEGIN PRIVATE KEY"), PKCS#1 ("BEGIN RSA PRIVATE KEY") or SEC1 ("BEGIN EC PRIVATE KEY", P-256),
 * as a string or its bytes (a file read without an encoding); a CryptoKey; or a KeyObject.
 */
export type PrivateKeyInput = string | Uint8Array | CryptoKeyLike | KeyObjectLike

/** Either half of a key pair, in the forms of PrivateKeyInput; PEM also "BEGIN PUBLIC KEY" (or "BEGIN RSA PUBLIC KEY" for RSA). */
export type KeyInput = PrivateKeyInput
