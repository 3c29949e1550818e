// Registering a key: the proof of possession (the key's name signed by it) and the whole
// POST /v1/api-keys body for a private key.
import { toBase64, utf8 } from './bytes.js'
import { checkName, checkScopes } from './checks.js'
import { derOfRawEcdsa, pem } from './der.js'
import { SigningInputError } from './errors.js'
import { defaultAlgorithm, importSigningKey, prepareKey, preparePrivateKey, publicHalfReadable, publicSpki, signRaw, verifies } from './keys.js'
import { seedSignature } from './sign.js'
import type { KeyInput, PrivateKeyInput } from './types.js'

/**
 * The registration `signature` over the exact UTF-8 bytes of the key name, base64: RSA-SHA256,
 * the raw Ed25519 signature, or the DER ECDSA P-256 signature of its SHA-256.
 */
export async function signKeyName (name: string, privateKey: PrivateKeyInput): Promise<string> {
  const bytes = utf8(checkName(name))
  const key = preparePrivateKey(privateKey)
  return await seedSignature(await importSigningKey(key), key.type, bytes)
}

export interface KeyRegistrationBody {
  name: string
  publicKey: string
  signature: string
  /** what the key may do: some of the user's scopes (absent: all of them); not covered by the signature */
  scopes?: string[]
}

/**
 * The whole POST /v1/api-keys body for a private key: its public half as SPKI PEM, and the name
 * signed. `publicKey` is needed only with a non-extractable CryptoKey, whose public half cannot be
 * read (give keyPair.publicKey); when given, it must be the private key's other half. `scopes`
 * narrows the key to some of the user's scopes.
 */
export async function keyRegistration (
  name: string, privateKey: PrivateKeyInput, publicKey?: KeyInput, options: { scopes?: string[] | undefined } = {}
): Promise<KeyRegistrationBody> {
  const scopes = options.scopes === undefined ? undefined : checkScopes(options.scopes)
  const nameBytes = utf8(checkName(name))
  const key = preparePrivateKey(privateKey)
  const givenPublic = publicKey === undefined ? undefined : prepareKey(publicKey, 'publicKey')
  if (givenPublic === undefined && !publicHalfReadable(key)) {
    throw new SigningInputError('publicKey', 'privateKey is a non-extractable CryptoKey, whose public half cannot be read: ' +
      'give publicKey too (keyPair.publicKey)')
  }
  if (givenPublic !== undefined && givenPublic.type !== key.type) {
    throw new SigningInputError('publicKey', `is not the public half of privateKey: it is ${givenPublic.type}, privateKey ${key.type}`)
  }
  const raw = await signRaw(await importSigningKey(key), defaultAlgorithm(key.type), nameBytes)
  const spki = await publicSpki(givenPublic ?? key, givenPublic === undefined ? 'privateKey' : 'publicKey')
  if (givenPublic !== undefined && !await verifies(key.type, spki, raw, nameBytes)) {
    throw new SigningInputError('publicKey', 'is not the public half of privateKey: its signature does not verify with it')
  }
  const signature = toBase64(key.type === 'p256' ? derOfRawEcdsa(raw) : raw)
  return { name, publicKey: pem('PUBLIC KEY', spki), signature, ...(scopes !== undefined && { scopes }) }
}
