// Password hashing with node:crypto scrypt, by default at OWASP's recommended cost (N=2^17, r=8,
// p=1; KEYGATE_PASSWORD_SCRYPT_LOG_N sets N for the hashes a process writes). Hashes are PHC
// strings that carry their own parameters, so the cost can change without invalidating stored
// hashes. scrypt runs on libuv's thread pool, off the event loop.
import { randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import { SCRYPT_LOG_N, SCRYPT_LOG_N_MAX, SCRYPT_LOG_N_MIN } from '../config/env.js'

export const SCRYPT_R = 8
export const SCRYPT_P = 1
const SALT_BYTES = 16
const HASH_BYTES = 32
const PHC_PATTERN = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/

function scrypt (password: string, salt: Buffer, length: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCallback(password, salt, length, options, (err, key) => { err === null ? resolve(key) : reject(err) })
  })
}

function options (logN: number, r: number, p: number): ScryptOptions {
  // scrypt needs 128 * N * r bytes; Node's default maxmem (32 MiB) is below OWASP's cost.
  return { N: 2 ** logN, r, p, maxmem: 2 * 128 * (2 ** logN) * r * p }
}

const b64 = (buffer: Buffer): string => buffer.toString('base64').replace(/=+$/, '')

/** `logN`: scrypt's N is 2^logN (SCRYPT_LOG_N_MIN to SCRYPT_LOG_N_MAX). */
export async function hashPassword (password: string, logN = SCRYPT_LOG_N): Promise<string> {
  if (!Number.isInteger(logN) || logN < SCRYPT_LOG_N_MIN || logN > SCRYPT_LOG_N_MAX) {
    throw new RangeError(`scrypt cost ${logN}: use ${SCRYPT_LOG_N_MIN} to ${SCRYPT_LOG_N_MAX}`)
  }
  const salt = randomBytes(SALT_BYTES)
  const hash = await scrypt(password, salt, HASH_BYTES, options(logN, SCRYPT_R, SCRYPT_P))
  return `$scrypt$ln=${logN},r=${SCRYPT_R},p=${SCRYPT_P}$${b64(salt)}$${b64(hash)}`
}

/**
 * Constant-time comparison. A malformed stored hash verifies nothing: wrong lengths, or cost
 * parameters outside what this code would ever write, are a plain false, never a match or a throw.
 */
export async function verifyPassword (password: string, phc: string): Promise<boolean> {
  const match = PHC_PATTERN.exec(phc)
  if (match === null) return false
  const [, ln, r, p, saltB64, expectedB64] = match as unknown as [string, string, string, string, string, string]
  const logN = Number(ln)
  const [blockSize, parallelism] = [Number(r), Number(p)]
  const salt = Buffer.from(saltB64, 'base64')
  const expected = Buffer.from(expectedB64, 'base64')
  if (logN < SCRYPT_LOG_N_MIN || logN > SCRYPT_LOG_N_MAX || blockSize < 1 || blockSize > 16 || parallelism < 1 || parallelism > 4 ||
    salt.length < SALT_BYTES || expected.length !== HASH_BYTES) return false
  const actual = await scrypt(password, salt, HASH_BYTES, options(logN, blockSize, parallelism))
  return timingSafeEqual(actual, expected)
}
