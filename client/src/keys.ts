// Keys as a program holds them, turned into what WebCrypto signs with: PEM text (PKCS#8, or PKCS#1
// RSA and SEC1 P-256 wrapped into PKCS#8 here), a WebCrypto CryptoKey, or a Node.js KeyObject
// (through its JWK). Three key types: RSA, Ed25519 and EC P-256 (KEY_TYPES). prepareKey checks a
// key's shape and type synchronously, so that a mistake is named at once; importing it and reading
// its public half are WebCrypto's, asynchronous.
import { type Bytes, isUint8Array, subtle } from './bytes.js'
import {
  algorithmName, curveName, EC_OID, ED25519_OID, isSequence, keyAlgorithm, P256_OID, pemBlocks, pkcs8OfPkcs1, pkcs8OfSec1P256, RSA_OID, sec1Curve,
  spkiOfPkcs1
} from './der.js'
import { SigningInputError } from './errors.js'
import { ALGORITHMS_OF_KEY_TYPE, type KeyType, type MessageSignatureAlgorithm } from './protocol/index.js'
import type { CryptoKeyLike, KeyObjectLike } from './types.js'

type Subtle = ReturnType<typeof subtle>
export type WebCryptoKey = Parameters<Subtle['sign']>[1]
type ImportParams = Parameters<Subtle['importKey']>[2]
type SignParams = Parameters<Subtle['sign']>[0]
// the JWK type is the DOM's or Node's, which the client's declarations do not name: cast at the call
type WebCryptoJwk = never

/** A JWK's members, as far as the client copies them (kty, and the key's own members). */
type Jwk = Record<string, string>

/** A private key, checked, ready to import. */
export type PreparedPrivateKey =
  | { form: 'pkcs8'; type: KeyType; der: Bytes }
  | { form: 'jwk'; type: KeyType; jwk: Jwk }
  | { form: 'cryptoKey'; type: KeyType; key: WebCryptoKey }

/** Either half, checked. */
export type PreparedKey =
  | PreparedPrivateKey
  | { form: 'spki'; type: KeyType; der: Bytes }
  | { form: 'publicJwk'; type: KeyType; jwk: Jwk }
  | { form: 'publicCryptoKey'; type: KeyType; key: WebCryptoKey }

/** How WebCrypto imports a key for each algorithm, and how it signs with it. */
const WEBCRYPTO: Readonly<Record<MessageSignatureAlgorithm, { import: { name: string; hash?: string; namedCurve?: string }; sign: SignParams }>> = {
  'rsa-v1_5-sha256': { import: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, sign: { name: 'RSASSA-PKCS1-v1_5' } },
  // RFC 9421 §3.3.1: RSASSA-PSS, SHA-512, MGF1 with SHA-512, a 64-byte salt
  'rsa-pss-sha512': { import: { name: 'RSA-PSS', hash: 'SHA-512' }, sign: { name: 'RSA-PSS', saltLength: 64 } },
  ed25519: { import: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
  'ecdsa-p256-sha256': { import: { name: 'ECDSA', namedCurve: 'P-256' }, sign: { name: 'ECDSA', hash: 'SHA-256' } }
}

/** The algorithm a key of this type signs with by default: the seed scheme's, and RFC 9421's without a choice. */
export function defaultAlgorithm (type: KeyType): MessageSignatureAlgorithm {
  return ALGORITHMS_OF_KEY_TYPE[type][0] as MessageSignatureAlgorithm
}

const KEY_TYPES_TAKEN = 'keygate takes RSA, Ed25519 and EC P-256 keys: make one with keygate keygen --type rsa|ed25519|p256 ' +
  '(or openssl genpkey -algorithm RSA | ED25519 | EC -pkeyopt ec_paramgen_curve:P-256)'
const GIVE_PRIVATE_PEM = 'give the "-----BEGIN PRIVATE KEY-----" text of an RSA, Ed25519 or P-256 key, e.g. from openssl genpkey or keygate keygen'
const GIVE_ANY_PEM = 'give the "-----BEGIN PUBLIC KEY-----" or "-----BEGIN PRIVATE KEY-----" text of an RSA, Ed25519 or P-256 key'
const TYPE_NAMES: Readonly<Record<KeyType, string>> = { rsa: 'RSA', ed25519: 'Ed25519', p256: 'EC P-256' }

/** "an EC", "a DSA", "an Ed25519": the article as the name is read out */
function an (name: string): string {
  return /^(?:[AEFHILMNORSXaeiou]|Ed)/.test(name) ? `an ${name}` : `a ${name}`
}

function unsupported (input: string, what: string): SigningInputError {
  return new SigningInputError(input, `is ${an(what)} key; ${KEY_TYPES_TAKEN}`)
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

/** The key type of a PKCS#8 or SPKI algorithm (and curve), or the error naming what it is. */
function typeOfAlgorithm (algorithm: { oid: string; parameter: string | undefined }, name: string): KeyType {
  if (algorithm.oid === RSA_OID) return 'rsa'
  if (algorithm.oid === ED25519_OID) return 'ed25519'
  if (algorithm.oid === EC_OID) {
    if (algorithm.parameter === P256_OID) return 'p256'
    throw unsupported(name, `EC ${curveName(algorithm.parameter)}`)
  }
  throw unsupported(name, algorithmName(algorithm.oid))
}

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
      const algorithm = keyAlgorithm(der(), 'pkcs8')
      if (algorithm === undefined) throw unreadable('its "PRIVATE KEY" body is not a PKCS#8 key')
      return { form: 'pkcs8', type: typeOfAlgorithm(algorithm, name), der: der() }
    }
    case 'RSA PRIVATE KEY':
      if (block.encrypted) throw encrypted('Proc-Type: 4,ENCRYPTED')
      if (!isSequence(der())) throw unreadable('its "RSA PRIVATE KEY" body is not a PKCS#1 key')
      return { form: 'pkcs8', type: 'rsa', der: pkcs8OfPkcs1(der()) }
    case 'EC PRIVATE KEY': {
      if (block.encrypted) throw encrypted('Proc-Type: 4,ENCRYPTED')
      const curve = sec1Curve(der())
      if (curve === undefined) {
        throw unreadable('its "EC PRIVATE KEY" body is not a SEC1 key naming its curve; convert it with openssl pkcs8 -topk8 -nocrypt -in key.pem')
      }
      if (curve !== P256_OID) throw unsupported(name, `EC ${curveName(curve)}`)
      return { form: 'pkcs8', type: 'p256', der: pkcs8OfSec1P256(der()) }
    }
    case 'ENCRYPTED PRIVATE KEY':
      throw encrypted('BEGIN ENCRYPTED PRIVATE KEY')
    case 'DSA PRIVATE KEY':
      throw unsupported(name, 'DSA')
    case 'OPENSSH PRIVATE KEY':
      throw new SigningInputError(name, 'is an OpenSSH private key: convert it to PKCS#8 PEM with ssh-keygen -p -m PKCS8 -f FILE (which rewrites FILE)')
    case 'PUBLIC KEY':
    case 'RSA PUBLIC KEY': {
      if (accept === 'private') throw new SigningInputError(name, 'is a public key; signing needs the private key')
      if (block.label === 'RSA PUBLIC KEY') {
        if (!isSequence(der())) throw unreadable('its "RSA PUBLIC KEY" body is not a PKCS#1 key')
        return { form: 'spki', type: 'rsa', der: spkiOfPkcs1(der()) }
      }
      const algorithm = keyAlgorithm(der(), 'spki')
      if (algorithm === undefined) throw unreadable('its "PUBLIC KEY" body is not a SubjectPublicKeyInfo')
      return { form: 'spki', type: typeOfAlgorithm(algorithm, name), der: der() }
    }
    default:
      throw unreadable(`it holds "${block.label}", not a key`)
  }
}

/** The JWK members of each key type's public half, and those its private half adds. */
const JWK_MEMBERS: Readonly<Record<KeyType, { kty: string; public: readonly string[]; private: readonly string[] }>> = {
  rsa: { kty: 'RSA', public: ['n', 'e'], private: ['d', 'p', 'q', 'dp', 'dq', 'qi'] },
  ed25519: { kty: 'OKP', public: ['crv', 'x'], private: ['d'] },
  p256: { kty: 'EC', public: ['crv', 'x', 'y'], private: ['d'] }
}

/** kty and the members of the half asked for, copied (no alg, key_ops or ext: WebCrypto would check them against the import). */
function jwkOf (source: Record<string, unknown>, type: KeyType, half: 'private' | 'public'): Jwk | undefined {
  const { kty, public: publicMembers, private: privateMembers } = JWK_MEMBERS[type]
  const members = half === 'private' ? [...publicMembers, ...privateMembers] : publicMembers
  if (source.kty !== kty || members.some((member) => typeof source[member] !== 'string')) return undefined
  return { kty, ...Object.fromEntries(members.map((member) => [member, source[member] as string])) }
}

function prepareKeyObject (key: KeyObjectLike, name: string, accept: Accept): PreparedKey {
  if (key.type === 'public' && accept === 'private') throw new SigningInputError(name, 'is a public key; signing needs the private key')
  if (key.type !== 'private' && key.type !== 'public') throw new SigningInputError(name, `is a ${key.type} (symmetric) key; ${KEY_TYPES_TAKEN}`)
  const nodeType = key.asymmetricKeyType
  if (nodeType !== 'rsa' && nodeType !== 'ed25519' && nodeType !== 'ec') {
    throw unsupported(name, NODE_KEY_TYPES[nodeType ?? ''] ?? `unknown (${String(nodeType)})`)
  }
  let exported: unknown
  try {
    exported = key.export({ format: 'jwk' })
  } catch (err) {
    throw new SigningInputError(name, `is a KeyObject that does not export as a JWK (${reason(err)})`)
  }
  const source = isObject(exported) ? exported : {}
  if (nodeType === 'ec' && source.crv !== 'P-256') throw unsupported(name, `EC ${typeof source.crv === 'string' ? source.crv : 'unknown curve'}`)
  const type: KeyType = nodeType === 'ec' ? 'p256' : nodeType
  const jwk = jwkOf(source, type, key.type)
  if (jwk === undefined) throw new SigningInputError(name, `is a KeyObject whose JWK is not a whole ${TYPE_NAMES[type]} key`)
  return key.type === 'private' ? { form: 'jwk', type, jwk } : { form: 'publicJwk', type, jwk }
}

/** The key type of a CryptoKey's algorithm, undefined for one keygate does not take. */
function typeOfCryptoKey (algorithm: { name: string; namedCurve?: unknown }): KeyType | undefined {
  if (algorithm.name.startsWith('RSA')) return 'rsa'
  if (algorithm.name === 'Ed25519') return 'ed25519'
  if ((algorithm.name === 'ECDSA' || algorithm.name === 'ECDH') && algorithm.namedCurve === 'P-256') return 'p256'
  return undefined
}

function cryptoKeyName (algorithm: { name: string; namedCurve?: unknown; hash?: { name?: unknown } }): string {
  const detail = typeof algorithm.namedCurve === 'string' ? algorithm.namedCurve : typeof algorithm.hash?.name === 'string' ? algorithm.hash.name : ''
  return detail === '' ? algorithm.name : `${algorithm.name} ${detail}`
}

const SIGNING_CRYPTO_KEYS = '{ name: \'RSASSA-PKCS1-v1_5\', hash: \'SHA-256\' }, { name: \'Ed25519\' } or { name: \'ECDSA\', namedCurve: \'P-256\' }'

function prepareCryptoKey (key: CryptoKeyLike, name: string, accept: Accept): PreparedKey {
  const algorithm = key.algorithm as { name: string; namedCurve?: unknown; hash?: { name?: unknown } }
  const type = typeOfCryptoKey(algorithm)
  if (key.type === 'public') {
    if (accept === 'private') throw new SigningInputError(name, 'is a public CryptoKey; signing needs the private key (keyPair.privateKey)')
    if (type === undefined) throw unsupported(name, cryptoKeyName(algorithm))
    return { form: 'publicCryptoKey', type, key: key as unknown as WebCryptoKey }
  }
  if (key.type !== 'private') throw new SigningInputError(name, `is a ${key.type} CryptoKey; ${KEY_TYPES_TAKEN}`)
  const signs = (algorithm.name === 'RSASSA-PKCS1-v1_5' && algorithm.hash?.name === 'SHA-256') ||
    (algorithm.name === 'RSA-PSS' && algorithm.hash?.name === 'SHA-512') ||
    algorithm.name === 'Ed25519' || (algorithm.name === 'ECDSA' && type === 'p256')
  if (!signs || type === undefined) {
    throw new SigningInputError(name, `is ${an(cryptoKeyName(algorithm))} CryptoKey; keygate verifies RSASSA-PKCS1-v1_5 with SHA-256, Ed25519 ` +
      `and ECDSA P-256: import or generate the key with ${SIGNING_CRYPTO_KEYS}`)
  }
  if (!key.usages.includes('sign')) throw new SigningInputError(name, 'is a CryptoKey without the "sign" usage: import it with usages ["sign"]')
  return { form: 'cryptoKey', type, key: key as unknown as WebCryptoKey }
}

function prepare (input: unknown, name: string, accept: Accept): PreparedKey {
  if (typeof input === 'string' || isUint8Array(input)) return preparePem(input, name, accept)
  if (isKeyObjectLike(input)) return prepareKeyObject(input, name, accept)
  if (isCryptoKeyLike(input)) return prepareCryptoKey(input, name, accept)
  throw new SigningInputError(name, 'must be PEM text (a string, or its bytes), a WebCrypto CryptoKey or a Node.js KeyObject')
}

/** A private key's shape and type, checked at once: throws a SigningInputError naming `name` and the fix. */
export function preparePrivateKey (input: unknown, name = 'privateKey'): PreparedPrivateKey {
  return prepare(input, name, 'private') as PreparedPrivateKey
}

/** Either half of a key, checked at once. */
export function prepareKey (input: unknown, name: string): PreparedKey {
  return prepare(input, name, 'either')
}

/** Whether the public half (and so the apiKey) of a private key can be read: not that of a non-extractable CryptoKey. */
export function publicHalfReadable (key: PreparedKey): boolean {
  return key.form !== 'cryptoKey' || key.key.extractable
}

/** Which algorithms a key of this type signs with, for an error message. */
function algorithmsOf (type: KeyType): string {
  return ALGORITHMS_OF_KEY_TYPE[type].join(' or ')
}

/**
 * The CryptoKey that signs with `algorithm` (default: the key type's first): imported here (not
 * extractable), or the one given when it is for that algorithm.
 */
export async function importSigningKey (key: PreparedPrivateKey, algorithm = defaultAlgorithm(key.type), name = 'privateKey'): Promise<WebCryptoKey> {
  if (!ALGORITHMS_OF_KEY_TYPE[key.type].includes(algorithm)) {
    throw new SigningInputError('algorithm', `${algorithm} needs another key type: ${an(TYPE_NAMES[key.type])} key signs with ${algorithmsOf(key.type)}`)
  }
  const params = WEBCRYPTO[algorithm].import
  if (key.form === 'cryptoKey') {
    const given = key.key.algorithm as { name: string; hash?: { name?: string } }
    if (given.name !== params.name || (params.hash !== undefined && given.hash?.name !== params.hash)) {
      throw new SigningInputError(name, `is ${an(cryptoKeyName(given))} CryptoKey; ${algorithm} needs one imported as ${JSON.stringify(params)}`)
    }
    return key.key
  }
  const crypto = subtle()
  try {
    return key.form === 'pkcs8'
      ? await crypto.importKey('pkcs8', key.der, params as ImportParams, false, ['sign'])
      : await crypto.importKey('jwk', key.jwk as WebCryptoJwk, params as ImportParams, false, ['sign'])
  } catch (err) {
    throw new SigningInputError(name, `not a readable ${TYPE_NAMES[key.type]} private key (${reason(err)}); ${GIVE_PRIVATE_PEM}`)
  }
}

/** The SPKI of a JWK's public half, as WebCrypto exports it. */
async function spkiOfJwk (type: KeyType, source: unknown, name: string): Promise<Bytes> {
  const jwk = isObject(source) ? jwkOf(source, type, 'public') : undefined
  if (jwk === undefined) throw new SigningInputError(name, `its public half is not a whole ${TYPE_NAMES[type]} key`)
  const crypto = subtle()
  const key = await crypto.importKey('jwk', jwk as WebCryptoJwk, WEBCRYPTO[defaultAlgorithm(type)].import as ImportParams, true, ['verify'])
  return new Uint8Array(await crypto.exportKey('spki', key))
}

/**
 * The DER SubjectPublicKeyInfo of a key's public half, as WebCrypto exports it: one encoding per
 * key, whatever its input form, so its SHA-256 (the apiKey) is the gateway's.
 */
export async function publicSpki (key: PreparedKey, name: string): Promise<Bytes> {
  const crypto = subtle()
  const params = WEBCRYPTO[defaultAlgorithm(key.type)].import as ImportParams
  switch (key.form) {
    case 'spki': {
      let imported: WebCryptoKey
      try {
        imported = await crypto.importKey('spki', key.der, params, true, ['verify'])
      } catch (err) {
        throw new SigningInputError(name, `not a readable ${TYPE_NAMES[key.type]} public key (${reason(err)}); ${GIVE_ANY_PEM}`)
      }
      return new Uint8Array(await crypto.exportKey('spki', imported))
    }
    case 'publicCryptoKey':
      return new Uint8Array(await crypto.exportKey('spki', key.key))
    case 'publicJwk':
    case 'jwk':
      return await spkiOfJwk(key.type, key.jwk, name)
    case 'pkcs8': {
      let imported: WebCryptoKey
      try {
        imported = await crypto.importKey('pkcs8', key.der, params, true, ['sign'])
      } catch (err) {
        throw new SigningInputError(name, `not a readable ${TYPE_NAMES[key.type]} private key (${reason(err)}); ${GIVE_PRIVATE_PEM}`)
      }
      return await spkiOfJwk(key.type, await crypto.exportKey('jwk', imported), name)
    }
    case 'cryptoKey':
      if (!key.key.extractable) {
        throw new SigningInputError(name, 'is a non-extractable private CryptoKey, whose public half cannot be read: ' +
          'give its public key instead (keyPair.publicKey)')
      }
      return await spkiOfJwk(key.type, await crypto.exportKey('jwk', key.key), name)
  }
}

/**
 * The signature WebCrypto makes over the bytes with `algorithm`: RSA's, Ed25519's 64 bytes, and
 * for ECDSA the raw r || s (64 bytes for P-256), which is what RFC 9421 sends.
 */
export async function signRaw (key: WebCryptoKey, algorithm: MessageSignatureAlgorithm, data: Bytes): Promise<Bytes> {
  return new Uint8Array(await subtle().sign(WEBCRYPTO[algorithm].sign, key, data))
}

/** Whether `signature` (raw, as signRaw makes it) is the public key's over `data`. */
export async function verifies (type: KeyType, spki: Bytes, signature: Bytes, data: Bytes): Promise<boolean> {
  const crypto = subtle()
  const algorithm = WEBCRYPTO[defaultAlgorithm(type)]
  return await crypto.verify(algorithm.sign, await crypto.importKey('spki', spki, algorithm.import as ImportParams, false, ['verify']), signature, data)
}
