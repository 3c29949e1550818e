import { constants, createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto'
import t from 'tap'
import { decodeBase64, parseRsaPublicKey, verifyRsaSha256 } from '../../../../gateway/src/keys/public-key.js'
import { captureGatewayError, rsaPair, signBase64 } from '../../../helpers/auth-fixtures.js'

// --- An independent, hand-rolled DER encoder: SPKI and PKCS#1 built without node:crypto ---------

function derLength (n: number): Buffer {
  if (n < 0x80) return Buffer.from([n])
  const bytes: number[] = []
  for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}
const tlv = (tag: number, content: Buffer): Buffer => Buffer.concat([Buffer.from([tag]), derLength(content.length), content])
function derInteger (value: bigint): Buffer {
  let hex = value.toString(16)
  if (hex.length % 2 === 1) hex = '0' + hex
  let bytes = Buffer.from(hex, 'hex')
  if (((bytes[0] ?? 0) & 0x80) !== 0) bytes = Buffer.concat([Buffer.alloc(1), bytes])
  return tlv(0x02, bytes)
}
/** RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER } */
const pkcs1Der = (n: bigint, e: bigint): Buffer => tlv(0x30, Buffer.concat([derInteger(n), derInteger(e)]))
/** AlgorithmIdentifier { rsaEncryption (1.2.840.113549.1.1.1), NULL } */
const RSA_ALGORITHM = Buffer.from('300d06092a864886f70d0101010500', 'hex')
/** SubjectPublicKeyInfo ::= SEQUENCE { algorithm, BIT STRING (no unused bits) RSAPublicKey } */
const spkiDer = (n: bigint, e: bigint): Buffer => tlv(0x30, Buffer.concat([RSA_ALGORITHM, tlv(0x03, Buffer.concat([Buffer.alloc(1), pkcs1Der(n, e)]))]))

function pem (label: string, der: Buffer, width = 64, eol = '\n'): string {
  const body = width === 0 ? der.toString('base64') : (der.toString('base64').match(new RegExp(`.{1,${width}}`, 'g')) ?? []).join(eol)
  return `-----BEGIN ${label}-----${eol}${body}${eol}-----END ${label}-----${eol}`
}
/** The DER inside a PEM block, read without node:crypto. */
const pemBody = (text: string): Buffer => Buffer.from(text.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64')
const sha256hex = (der: Buffer): string => createHash('sha256').update(der).digest('hex')
/** A random odd number of exactly `bits` bits: a modulus as far as a public-key parser can tell. */
function randomModulus (bits: number): bigint {
  const n = BigInt('0x' + randomBytes(Math.ceil(bits / 8)).toString('hex'))
  return (n & ((1n << BigInt(bits)) - 1n)) | (1n << BigInt(bits - 1)) | 1n
}

// -------------------------------------------------------------------------------------------------

const pair = rsaPair()
const expectedApiKey = sha256hex(pemBody(pair.spkiPem))
const modulus = BigInt('0x' + Buffer.from(pair.publicKey.export({ format: 'jwk' }).n ?? '', 'base64url').toString('hex'))

t.test('the hand-rolled encoder agrees with node:crypto (sanity of the fixtures)', async (t) => {
  t.equal(spkiDer(modulus, 65537n).toString('hex'), pemBody(pair.spkiPem).toString('hex'))
  t.equal(pkcs1Der(modulus, 65537n).toString('hex'), pemBody(pair.pkcs1Pem).toString('hex'))
})

t.test('parseRsaPublicKey accepts each form of one key and gives one apiKey', async (t) => {
  const spkiDerBytes = pemBody(pair.spkiPem)
  const forms: Array<[string, string]> = [
    ['SPKI PEM', pair.spkiPem],
    ['PKCS#1 PEM', pair.pkcs1Pem],
    ['SPKI PEM with CRLF line ends', pair.spkiPem.replaceAll('\n', '\r\n')],
    ['PKCS#1 PEM with CRLF line ends', pair.pkcs1Pem.replaceAll('\n', '\r\n')],
    ['SPKI PEM without the final newline', pair.spkiPem.trimEnd()],
    ['SPKI PEM with surrounding whitespace', `\n  ${pair.spkiPem}\n\n`],
    ['SPKI PEM re-wrapped at 76 columns', pem('PUBLIC KEY', spkiDerBytes, 76)],
    ['SPKI PEM body on one line', pem('PUBLIC KEY', spkiDerBytes, 0)],
    ['PKCS#1 PEM re-wrapped at 76 columns', pem('RSA PUBLIC KEY', pemBody(pair.pkcs1Pem), 76)],
    ['hand-built SPKI', pem('PUBLIC KEY', spkiDer(modulus, 65537n))],
    ['hand-built PKCS#1', pem('RSA PUBLIC KEY', pkcs1Der(modulus, 65537n))]
  ]
  for (const [label, text] of forms) {
    t.test(label, async (t) => {
      const parsed = parseRsaPublicKey(text)
      t.equal(parsed.apiKey, expectedApiKey, 'apiKey is the hex SHA-256 of the DER SPKI')
      t.match(parsed.apiKey, /^[0-9a-f]{64}$/)
      t.ok(parsed.keyObject.equals(pair.publicKey), 'the same key')
      t.match(parsed.pem, /^-----BEGIN PUBLIC KEY-----\n/, 'normalised to SPKI PEM')
      t.equal(pemBody(parsed.pem).toString('hex'), spkiDerBytes.toString('hex'))
    })
  }
})

t.test('parseRsaPublicKey accepts RSA keys of 2048, 3072 or 4096 bits with the exponent 65537', async (t) => {
  for (const bits of [2048, 3072, 4096]) {
    const n = randomModulus(bits)
    t.equal(parseRsaPublicKey(pem('RSA PUBLIC KEY', pkcs1Der(n, 65537n))).apiKey, sha256hex(spkiDer(n, 65537n)), `${bits} bits`)
  }
})

t.test('parseRsaPublicKey refuses other sizes and exponents, naming the rule', async (t) => {
  const cases: Array<[string, bigint, bigint, RegExp]> = [
    ['8192 bits', randomModulus(8192), 65537n, /^publicKey is an RSA key of 8192 bits: keygate accepts 2048, 3072 or 4096 bits/],
    ['1024 bits', randomModulus(1024), 65537n, /of 1024 bits: keygate accepts 2048, 3072 or 4096 bits/],
    ['2049 bits', randomModulus(2049), 65537n, /of 2049 bits: keygate accepts 2048, 3072 or 4096 bits/],
    ['3584 bits', randomModulus(3584), 65537n, /of 3584 bits: keygate accepts 2048, 3072 or 4096 bits/],
    ['4097 bits', randomModulus(4097), 65537n, /of 4097 bits/],
    ['6144 bits', randomModulus(6144), 65537n, /of 6144 bits/],
    ['e = 2^32 + 1', modulus, 2n ** 32n + 1n, /^publicKey has the public exponent 4294967297: keygate accepts 65537 only/],
    ['e = 3', modulus, 3n, /public exponent 3: keygate accepts 65537 only/],
    ['e = 17', modulus, 17n, /public exponent 17: keygate accepts 65537 only/],
    ['e = 65539', modulus, 65539n, /public exponent 65539: keygate accepts 65537 only/],
    ['e = 2^32 - 1', modulus, 2n ** 32n - 1n, /public exponent 4294967295: /]
  ]
  for (const [label, n, e, detail] of cases) {
    for (const text of [pem('RSA PUBLIC KEY', pkcs1Der(n, e)), pem('PUBLIC KEY', spkiDer(n, e))]) {
      const err = await captureGatewayError(() => parseRsaPublicKey(text))
      t.equal(err.code, 'INVALID_PUBLIC_KEY', label)
      t.equal(err.statusCode, 400, label)
      t.match(err.message, detail, `${label}: the detail names the rule`)
    }
  }
})

t.test('parseRsaPublicKey refuses everything else with INVALID_PUBLIC_KEY', async (t) => {
  const small = rsaPair(1024)
  const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
  const ed = generateKeyPairSync('ed25519')
  const spkiDerBytes = pemBody(pair.spkiPem)
  const cases: Array<[string, string]> = [
    ['1024-bit RSA, SPKI', small.spkiPem],
    ['1024-bit RSA, PKCS#1', small.pkcs1Pem],
    ['2047-bit RSA (hand-built)', pem('RSA PUBLIC KEY', pkcs1Der(randomModulus(2047), 65537n))],
    ['8200-bit RSA (hand-built)', pem('RSA PUBLIC KEY', pkcs1Der(randomModulus(8200), 65537n))],
    ['exponent 1', pem('RSA PUBLIC KEY', pkcs1Der(modulus, 1n))],
    ['exponent 2', pem('RSA PUBLIC KEY', pkcs1Der(modulus, 2n))],
    ['even exponent 65536', pem('RSA PUBLIC KEY', pkcs1Der(modulus, 65536n))],
    ['exponent 2^32 + 1', pem('PUBLIC KEY', spkiDer(modulus, 2n ** 32n + 1n))],
    ['EC P-256 public key', ec.publicKey.export({ type: 'spki', format: 'pem' }).toString()],
    ['Ed25519 public key', ed.publicKey.export({ type: 'spki', format: 'pem' }).toString()],
    ['RSA private key, PKCS#8', pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()],
    ['RSA private key, PKCS#1', pair.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString()],
    ['certificate-like block', pem('CERTIFICATE', spkiDerBytes)],
    ['mismatched BEGIN and END labels', pair.spkiPem.replace('-----END PUBLIC KEY-----', '-----END RSA PUBLIC KEY-----')],
    ['SPKI DER under the PKCS#1 label', pem('RSA PUBLIC KEY', spkiDerBytes)],
    ['two PEM blocks of the same key', pair.spkiPem + pair.spkiPem],
    ['SPKI then PKCS#1 of the same key', pair.spkiPem + pair.pkcs1Pem],
    ['text before the block', `my key:\n${pair.spkiPem}`],
    ['text after the block', `${pair.spkiPem}thanks\n`],
    ['base64 DER without the PEM armour', spkiDerBytes.toString('base64')],
    ['PEM body cut short', pem('PUBLIC KEY', spkiDerBytes.subarray(0, 200))],
    ['PEM body of random bytes', pem('PUBLIC KEY', randomBytes(294))],
    ['literal \\n instead of newlines (double-escaped JSON)', pair.spkiPem.trimEnd().replaceAll('\n', '\\n')],
    ['garbage', 'this is not a key'],
    ['empty', ''],
    ['whitespace only', ' \n\t\n']
  ]
  for (const [label, text] of cases) {
    t.test(label, async (t) => {
      const err = await captureGatewayError(() => parseRsaPublicKey(text))
      t.equal(err.code, 'INVALID_PUBLIC_KEY')
      t.equal(err.statusCode, 400)
    })
  }
})

t.test('decodeBase64: strict, padded, single-line base64 only', async (t) => {
  const valid: Array<[string, string]> = [
    ['AAAA', '000000'],
    ['AQID', '010203'],
    ['AQI=', '0102'],
    ['AQ==', '01'],
    ['AQIDBA==', '01020304'],
    ['+/+/', 'fbffbf']
  ]
  for (const [text, hex] of valid) t.equal(decodeBase64(text)?.toString('hex'), hex, JSON.stringify(text))

  const invalid = [
    '', 'A', 'AQ', 'AQI', 'AQ=', 'AQ===', 'AQID=', '=AQI', 'AQ==AQID', 'AQ=I',
    ' AQID', 'AQID ', 'AQ ID', 'AQID\n', 'AQ\nID', 'AQ\r\nID', 'AQ\tID',
    '-_-_', 'AQID!', 'AQ.D', 'ＡＱＩＤ',
    // non-canonical: stray bits in the padding would give one byte string several spellings
    'AR==', 'AQJ=', 'AB=='
  ]
  for (const text of invalid) t.equal(decodeBase64(text), undefined, JSON.stringify(text))
})

t.test('verifyRsaSha256', async (t) => {
  const data = Buffer.from('1700000000000GET/v1/clients/')
  const good = Buffer.from(signBase64(pair.privateKey, data), 'base64')
  t.equal(good.length, 256)
  t.equal(verifyRsaSha256(pair.publicKey, data, good), true, 'a valid signature verifies')
  const otherKey = rsaPair()
  const flipped = Buffer.from(good)
  flipped[0] = (flipped[0] ?? 0) ^ 0x01
  const cases: Array<[string, Buffer, Buffer]> = [
    ['other data', Buffer.from('1700000000000GET/v1/clients'), good],
    ['one bit flipped', data, flipped],
    ['one byte short', data, good.subarray(1)],
    ['last byte dropped', data, good.subarray(0, 255)],
    ['a zero byte prepended (257 bytes)', data, Buffer.concat([Buffer.alloc(1), good])],
    ['a zero byte appended (257 bytes)', data, Buffer.concat([good, Buffer.alloc(1)])],
    ['twice as long', data, Buffer.concat([good, good])],
    ['empty', data, Buffer.alloc(0)],
    ['all zeros', data, Buffer.alloc(256)],
    ['by another key', data, Buffer.from(signBase64(otherKey.privateKey, data), 'base64')],
    ['RSA-PSS instead of PKCS#1 v1.5', data, sign('sha256', data, { key: pair.privateKey, padding: constants.RSA_PKCS1_PSS_PADDING })]
  ]
  for (const [label, signed, signature] of cases) t.equal(verifyRsaSha256(pair.publicKey, signed, signature), false, label)

  // the expected length follows the key: 3072 bits -> 384 bytes
  const big = rsaPair(3072)
  const bigSignature = Buffer.from(signBase64(big.privateKey, data), 'base64')
  t.equal(bigSignature.length, 384)
  t.equal(verifyRsaSha256(big.publicKey, data, bigSignature), true, '3072-bit key, 384-byte signature')
  t.equal(verifyRsaSha256(big.publicKey, data, bigSignature.subarray(0, 256)), false, '3072-bit key, 256-byte signature')
})
