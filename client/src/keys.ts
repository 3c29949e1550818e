// Keys as a program holds them, turned into what WebCrypto signs with: PEM text (PKCS#8, or PKCS#1
// wrapped into PKCS#8 here), a WebCrypto CryptoKey, or a Node.js KeyObject (through its JWK).
// prepareKey checks a key's shape synchronously, so that a mistake is named at once; importing it
// and reading its public half are WebCrypto's, asynchronous.
import { type Bytes, isUint8Array, subtle, toBase64 } from './bytes.js'
import { algorithmName, isSequence, keyAlgorithmOid, pemBlocks, pkcs8OfPkcs1, RSA_OID, spkiOfPkcs1 } from './der.js'
import { SigningInputError } from './errors.js'
import type { CryptoKeyLike, KeyObjectLike } from './types.js'

type Subtle = ReturnType<typeof subtle>
export type WebCryptoKey = Parameters<Subtle['sign']>[1]

interface RsaJwk { kty: 'RSA'; n: string; e: string; d?: string; p?: string; q?: string; dp?: string; dq?: string; qi?: string }

/** A private key, checked, ready to import. */
export type PreparedPrivateKey =
  | { form: 'pkcs8'; der: Bytes }
  | { form: 'jwk'; jwk: RsaJwk }
  | { form: 'cryptoKey'; key: WebCryptoKey }

/** Either half, checked. */
export type PreparedKey =
  | PreparedPrivateKey
  | { form: 'spki'; der: Bytes }
  | { form: 'publicJwk'; jwk: RsaJwk }
  | { form: 'publicCryptoKey'; key: WebCryptoKey }

const RSA_IMPORT = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }
const RSA_SIGN = { name: 'RSASSA-PKCS1-v1_5' }

const RSA_ONLY = 'keygate verifies RSA (PKCS#1 v1.5, SHA-256) only: make an RSA key with keygate keygen or openssl genpkey -algorithm RSA'
const GIVE_PRIVATE_PEM = 'give the "-----BEGIN PRIVATE KEY-----" text of an RSA key, e.g. from openssl genpkey or keygate keygen'
const GIVE_ANY_PEM = 'give the "-----BEGIN PUBLIC KEY-----" or "-----BEGIN PRIVATE KEY-----" text of an RSA key'

/** "an EC", "a DSA", "an Ed25519": the article as the name is read out */
function an (name: string): string {
  return /^(?:[AEFHILMNORSXaeiou]|Ed)/.test(name) ? `an ${name}` : `a ${name}`
}

function notRsa (input: string, what: string): SigningInputError {
  return new SigningInputError(input, `is ${an(what)} key; ${RSA_ONLY}`)
}

function reason (err: unknown): string {
  return err instanceof Error ? (err.message !== '' ? err.message : err.name) : String(err)
}

const NODE_KEY_TYPES: Record<string, string> = {
  'rsa-pss': 'RSA-PSS', dsa: 'DSA', dh: 'DH', ec: 'EC', ed25519: 'Ed25519', ed448: 'Ed448', x25519: 'X25519', x448: 'X448'
}

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null
}

function isKeyObjectLike (value: unknown): value is KeyObjectLike {
  return isObject(value) && typeof value.export === 'function' && typeof value.type === 'string'
}

function isCryptoKeyLike (value: unknown): value is CryptoKeyLike {
  return isObject(value) && typeof value.type === 'string' && isObject(value.algorithm) && typeof value.algorithm.name === 'string' &&
    typeof value.extractable === 'boolean' && Array.isArray(value.usages)
}

type Accept = 'private' | 'either'

function preparePem (input: string | Uint8Array, name: string, accept: Accept): PreparedKey {
  const text = typeof input === 'string' ? input : new TextDecoder().decode(input)
  const blocks = pemBlocks(text)
  const block = blocks.find(({ label }) => label.endsWith('PRIVATE KEY') || (accept === 'either' && label.endsWith('PUBLIC KEY'))) ?? blocks[0]
  const kind = accept === 'private' ? 'private key' : 'key'
  const give = accept === 'private' ? GIVE_PRIVATE_PEM : GIVE_ANY_PEM
  const unreadable = (why: string): SigningInputError => new SigningInputError(name, `not a readable PEM ${kind} (${why}); ${give}`)
  if (block === undefined) {
    throw unreadable(typeof input === 'string'
      ? 'no "-----BEGIN ...-----" line'
      : 'bytes without a "-----BEGIN ...-----" line: DER? convert it to PEM with openssl pkey -inform DER')
  }
  const encrypted = (marker: string): SigningInputError => new SigningInputError(name, `is an encrypted private key (${marker}); decrypt it first ` +
    '(openssl pkey -in encrypted.pem -out key.pem asks for the passphrase), or on Node.js pass createPrivateKey({ key, passphrase }), a KeyObject')
  const der = (): Bytes => {
    if (block.der === undefined) throw unreadable(`its "${block.label}" body is not base64`)
    return block.der
  }
  switch (block.label) {
    case 'PRIVATE KEY': {
      const oid = keyAlgorithmOid(der(), 'pkcs8')
      if (oid === undefined) throw unreadable('its "PRIVATE KEY" body is not a PKCS#8 key')
      if (oid !== RSA_OID) throw notRsa(name, algorithmName(oid))
      return { form: 'pkcs8', der: der() }
    }
    case 'RSA PRIVATE KEY':
      if (block.encrypted) throw encrypted('Proc-Type: 4,ENCRYPTED')
      if (!isSequence(der())) throw unreadable('its "RSA PRIVATE KEY" body is not a PKCS#1 key')
      return { form: 'pkcs8', der: pkcs8OfPkcs1(der()) }
    case 'ENCRYPTED PRIVATE KEY':
      throw encrypted('BEGIN ENCRYPTED PRIVATE KEY')
    case 'EC PRIVATE KEY':
      throw notRsa(name, 'EC')
    case 'DSA PRIVATE KEY':
      throw notRsa(name, 'DSA')
    case 'OPENSSH PRIVATE KEY':
      throw new SigningInputError(name, 'is an OpenSSH private key: convert an RSA one to PKCS#8 PEM with ssh-keygen -p -m PKCS8 -f FILE (which rewrites FILE)')
    case 'PUBLIC KEY':
    case 'RSA PUBLIC KEY': {
      if (accept === 'private') throw new SigningInputError(name, 'is a public key; signing needs the private key')
      if (block.label === 'RSA PUBLIC KEY') {
        if (!isSequence(der())) throw unreadable('its "RSA PUBLIC KEY" body is not a PKCS#1 key')
        return { form: 'spki', der: spkiOfPkcs1(der()) }
      }
      const oid = keyAlgorithmOid(der(), 'spki')
      if (oid === undefined) throw unreadable('its "PUBLIC KEY" body is not a SubjectPublicKeyInfo')
      if (oid !== RSA_OID) throw notRsa(name, algorithmName(oid))
      return { form: 'spki', der: der() }
    }
    default:
      throw unreadable(`it holds "${block.label}", not a key`)
  }
}

function prepareKeyObject (key: KeyObjectLike, name: string, accept: Accept): PreparedKey {
  if (key.type === 'public' && accept === 'private') throw new SigningInputError(name, 'is a public key; signing needs the private key')
  if (key.type !== 'private' && key.type !== 'public') throw new SigningInputError(name, `is a ${key.type} (symmetric) key; ${RSA_ONLY}`)
  if (key.asymmetricKeyType !== 'rsa') {
    throw notRsa(name, NODE_KEY_TYPES[key.asymmetricKeyType ?? ''] ?? `unknown (${String(key.asymmetricKeyType)})`)
  }
  let exported: unknown
  try {
    exported = key.export({ format: 'jwk' })
  } catch (err) {
    throw new SigningInputError(name, `is a KeyObject that does not export as a JWK (${reason(err)})`)
  }
  const jwk = isObject(exported) ? exported : {}
  const members = ['n', 'e', ...(key.type === 'private' ? ['d', 'p', 'q', 'dp', 'dq', 'qi'] : [])]
  if (jwk.kty !== 'RSA' || members.some((member) => typeof jwk[member] !== 'string')) {
    throw new SigningInputError(name, 'is a KeyObject whose JWK is not a whole RSA key')
  }
  const copy = Object.fromEntries(members.map((member) => [member, jwk[member]])) as Omit<RsaJwk, 'kty'>
  return { form: key.type === 'private' ? 'jwk' : 'publicJwk', jwk: { kty: 'RSA', ...copy } }
}

function prepareCryptoKey (key: CryptoKeyLike, name: string, accept: Accept): PreparedKey {
  const algorithm = key.algorithm.name
  if (key.type === 'public') {
    if (accept === 'private') throw new SigningInputError(name, 'is a public CryptoKey; signing needs the private key (keyPair.privateKey)')
    if (!algorithm.startsWith('RSA')) throw notRsa(name, algorithm)
    return { form: 'publicCryptoKey', key: key as unknown as WebCryptoKey }
  }
  if (key.type !== 'private') throw new SigningInputError(name, `is a ${key.type} CryptoKey; ${RSA_ONLY}`)
  const hash = (key.algorithm as { hash?: { name?: unknown } }).hash?.name
  if (algorithm !== 'RSASSA-PKCS1-v1_5' || hash !== 'SHA-256') {
    const what = typeof hash === 'string' ? `${algorithm} ${hash}` : algorithm
    throw new SigningInputError(name, `is ${an(what)} CryptoKey; keygate verifies RSASSA-PKCS1-v1_5 with SHA-256: ` +
      'import or generate the key with { name: \'RSASSA-PKCS1-v1_5\', hash: \'SHA-256\' }')
  }
  if (!key.usages.includes('sign')) throw new SigningInputError(name, 'is a CryptoKey without the "sign" usage: import it with usages ["sign"]')
  return { form: 'cryptoKey', key: key as unknown as WebCryptoKey }
}

function prepare (input: unknown, name: string, accept: Accept): PreparedKey {
  if (typeof input === 'string' || isUint8Array(input)) return preparePem(input, name, accept)
  if (isKeyObjectLike(input)) return prepareKeyObject(input, name, accept)
  if (isCryptoKeyLike(input)) return prepareCryptoKey(input, name, accept)
  throw new SigningInputError(name, 'must be PEM text (a string, or its bytes), a WebCrypto CryptoKey or a Node.js KeyObject')
}

/** A private RSA key's shape, checked at once: throws a SigningInputError naming `name` and the fix. */
export function preparePrivateKey (input: unknown, name = 'privateKey'): PreparedPrivateKey {
  return prepare(input, name, 'private') as PreparedPrivateKey
}

/** Either half of an RSA key, checked at once. */
export function prepareKey (input: unknown, name: string): PreparedKey {
  return prepare(input, name, 'either')
}

/** Whether the public half (and so the apiKey) of a private key can be read: not that of a non-extractable CryptoKey. */
export function publicHalfReadable (key: PreparedKey): boolean {
  return key.form !== 'cryptoKey' || key.key.extractable
}

/** The CryptoKey that signs: imported once here (not extractable), or the one given. */
export async function importSigningKey (key: PreparedPrivateKey, name = 'privateKey'): Promise<WebCryptoKey> {
  if (key.form === 'cryptoKey') return key.key
  const crypto = subtle()
  try {
    return key.form === 'pkcs8'
      ? await crypto.importKey('pkcs8', key.der, RSA_IMPORT, false, ['sign'])
      : await crypto.importKey('jwk', key.jwk, RSA_IMPORT, false, ['sign'])
  } catch (err) {
    throw new SigningInputError(name, `not a readable RSA private key (${reason(err)}); ${GIVE_PRIVATE_PEM}`)
  }
}

async function spkiOfJwk (jwk: { n?: string | undefined; e?: string | undefined }): Promise<Bytes> {
  const crypto = subtle()
  const key = await crypto.importKey('jwk', { kty: 'RSA', n: jwk.n, e: jwk.e }, RSA_IMPORT, true, ['verify'])
  return new Uint8Array(await crypto.exportKey('spki', key))
}

/**
 * The DER SubjectPublicKeyInfo of a key's public half, as WebCrypto exports it: one encoding per
 * key, whatever its input form, so its SHA-256 (the apiKey) is the gateway's.
 */
export async function publicSpki (key: PreparedKey, name: string): Promise<Bytes> {
  const crypto = subtle()
  switch (key.form) {
    case 'spki': {
      let imported: WebCryptoKey
      try {
        imported = await crypto.importKey('spki', key.der, RSA_IMPORT, true, ['verify'])
      } catch (err) {
        throw new SigningInputError(name, `not a readable RSA public key (${reason(err)}); ${GIVE_ANY_PEM}`)
      }
      return new Uint8Array(await crypto.exportKey('spki', imported))
    }
    case 'publicCryptoKey':
      return new Uint8Array(await crypto.exportKey('spki', key.key))
    case 'publicJwk':
    case 'jwk':
      return await spkiOfJwk(key.jwk)
    case 'pkcs8': {
      let imported: WebCryptoKey
      try {
        imported = await crypto.importKey('pkcs8', key.der, RSA_IMPORT, true, ['sign'])
      } catch (err) {
        throw new SigningInputError(name, `not a readable RSA private key (${reason(err)}); ${GIVE_PRIVATE_PEM}`)
      }
      return await spkiOfJwk(await crypto.exportKey('jwk', imported))
    }
    case 'cryptoKey':
      if (!key.key.extractable) {
        throw new SigningInputError(name, 'is a non-extractable private CryptoKey, whose public half cannot be read: ' +
          'give its public key instead (keyPair.publicKey)')
      }
      return await spkiOfJwk(await crypto.exportKey('jwk', key.key))
  }
}

/** RSASSA-PKCS1-v1_5 SHA-256 over the bytes, in base64. */
export async function signBase64 (key: WebCryptoKey, data: Bytes): Promise<string> {
  return toBase64(new Uint8Array(await subtle().sign(RSA_SIGN, key, data)))
}

/** Whether `signature` is the public key's over `data`. */
export async function verifies (spki: Bytes, signature: Bytes, data: Bytes): Promise<boolean> {
  const crypto = subtle()
  return await crypto.verify(RSA_SIGN, await crypto.importKey('spki', spki, RSA_IMPORT, false, ['verify']), signature, data)
}
