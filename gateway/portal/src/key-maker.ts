// Key pairs made in the browser with WebCrypto, and the openssl commands for one made elsewhere.
// A pair is made non-extractable unless asked otherwise: its private half can sign but cannot be
// read by anyone, this page's own scripts included. One made exportable is exported once, for its
// download, and the browser keeps only a non-extractable copy of it: no script can export it later.
import { apiKeyOf, type KeyType, registerKey } from '@keygate/client'
import { forgetKey, type HeldKey, saveKey } from './key-store.js'
import { bashWord } from './snippets.js'
import { baseUrl, currentUser, dpopKey, token } from './session.js'

export const KEY_TYPE_NAMES: Readonly<Record<KeyType, string>> = { ed25519: 'Ed25519', p256: 'P-256 (ECDSA)', rsa: 'RSA-2048' }

const ALGORITHMS: Readonly<Record<KeyType, RsaHashedKeyGenParams | EcKeyGenParams | Algorithm>> = {
  ed25519: { name: 'Ed25519' },
  p256: { name: 'ECDSA', namedCurve: 'P-256' },
  rsa: { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }
}

async function generate (type: KeyType, extractable: boolean): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey(ALGORITHMS[type], extractable, ['sign', 'verify']) as CryptoKeyPair
}

/** The private key's PKCS#8 bytes, read once, and a copy of it imported back non-extractable: it signs, but cannot be exported again. */
async function exportOnce (privateKey: CryptoKey): Promise<{ pkcs8: ArrayBuffer; kept: CryptoKey }> {
  const pkcs8 = await crypto.subtle.exportKey('pkcs8', privateKey)
  return { pkcs8, kept: await crypto.subtle.importKey('pkcs8', pkcs8, privateKey.algorithm, false, ['sign']) }
}

let supported: Promise<KeyType[]> | undefined

/**
 * The key types this browser's WebCrypto makes, best first: found by trying (a browser without
 * Ed25519 refuses to generate one); RSA-2048 is there in every browser with WebCrypto.
 */
export function supportedKeyTypes (): Promise<KeyType[]> {
  supported ??= (async () => {
    const types: KeyType[] = []
    for (const type of ['ed25519', 'p256'] as const) {
      try {
        await generate(type, false)
        types.push(type)
      } catch {}
    }
    return [...types, 'rsa']
  })()
  return supported
}

/** PEM text of DER bytes, 64 base64 characters a line (what openssl writes). */
export function pemOf (label: string, der: ArrayBuffer): string {
  let binary = ''
  for (const byte of new Uint8Array(der)) binary += String.fromCharCode(byte)
  const lines = btoa(binary).match(/.{1,64}/g) ?? []
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`
}

/** A name as a file name: letters, digits, ".", "_" and "-" ("key" when nothing is left). */
export function fileBase (name: string): string {
  const base = name.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[-.]+|-+$/g, '')
  return base === '' ? 'key' : base
}

/** Saves text as a file through the browser's download (a blob: URL, revoked once clicked). */
function download (fileName: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/x-pem-file' }))
  const link = document.createElement('a')
  link.href = url
  link.download = fileName
  document.body.append(link)
  link.click()
  link.remove()
  setTimeout(() => { URL.revokeObjectURL(url) }, 60_000)
}

export interface MadeKey { apiKey: string; name: string; scopes: string[]; downloaded?: string }

/**
 * Makes a key pair of `type`, keeps it in IndexedDB and registers its public half with its proof
 * of possession (the name signed). The pair is stored before registering, so a key keygate has is
 * never one this browser lost; a refused registration removes it again. `exportable`: the private
 * key is also downloaded as PKCS#8 PEM, for the CLI; what is stored, registered with and kept is a
 * non-extractable copy of it (the extractable key is dropped once exported, before anything is stored).
 */
export async function makeKey (name: string, type: KeyType, options: { exportable: boolean; scopes?: string[] | undefined }): Promise<MadeKey> {
  const user = currentUser()
  if (user === undefined) throw new Error('not logged in')
  const pair = await generate(type, options.exportable)
  const { publicKey } = pair
  const exported = options.exportable ? await exportOnce(pair.privateKey) : undefined
  const privateKey = exported?.kept ?? pair.privateKey
  const apiKey = await apiKeyOf(publicKey)
  const held: HeldKey = {
    apiKey,
    user,
    name,
    keyType: type,
    privateKey,
    publicKey,
    exportable: options.exportable,
    createdAt: new Date().toISOString()
  }
  await saveKey(held)
  let registered
  try {
    registered = await registerKey({ baseUrl: baseUrl(), token: token(), dpop: dpopKey(), name, privateKey, publicKey, scopes: options.scopes })
  } catch (err) {
    await forgetKey(apiKey)
    throw err
  }
  if (exported === undefined) return { apiKey, name, scopes: registered.scopes }
  const fileName = `${fileBase(name)}.pem`
  download(fileName, pemOf('PRIVATE KEY', exported.pkcs8))
  return { apiKey, name, scopes: registered.scopes, downloaded: fileName }
}

/**
 * The openssl (3.x) commands that make a key of `type` named `name`, its public half, and the
 * registration's proof (the name's exact bytes signed, base64 on one line, as POST /v1/api-keys and
 * docs/signing.md's "Keys" say): files NAME.pem, NAME.pub.pem and NAME.proof.
 */
export function opensslCommands (name: string, type: KeyType): string {
  const base = fileBase(name)
  const key = `${base}.pem`
  const make = {
    ed25519: `openssl genpkey -algorithm ed25519 -out ${key}`,
    p256: `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ${key}`,
    rsa: `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out ${key}`
  }[type]
  // Ed25519 signs the message itself, from a file (pkeyutl -rawin does not read a pipe); RSA and
  // P-256 sign its SHA-256 (P-256's signature in DER, as openssl dgst writes it)
  const proof = type === 'ed25519'
    ? [`printf '%s' ${bashWord(name)} > ${base}.name`, `openssl pkeyutl -sign -rawin -inkey ${key} -in ${base}.name | openssl base64 -A > ${base}.proof`]
    : [`printf '%s' ${bashWord(name)} | openssl dgst -sha256 -sign ${key} | openssl base64 -A > ${base}.proof`]
  return [make, `openssl pkey -in ${key} -pubout -out ${base}.pub.pem`, ...proof].join('\n') + '\n'
}
