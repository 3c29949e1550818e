// The cases an upstream's check of X-Keygate-Content-Digest must get right, for every
// implementation of it (the client's checkForwardedDigest, the Python recipe): the header's value
// (undefined: absent), the body received, and the verdict. Digests by node:crypto, independently
// of the code under test.
import { createHash } from 'node:crypto'

export type ForwardedDigestVerdict = 'ok' | 'nothing-to-check' | 'malformed' | 'no-known-algorithm' | 'mismatch'

export interface ForwardedDigestCase {
  name: string
  header: string | undefined
  body: Buffer
  verdict: ForwardedDigestVerdict
  /** with 'ok': the algorithms checked, in the header's order */
  algorithms?: string[]
}

export const digestOf = (algorithm: 'sha-256' | 'sha-512', body: Buffer | string): string =>
  `${algorithm}=:${createHash(algorithm === 'sha-256' ? 'sha256' : 'sha512').update(body).digest('base64')}:`

const BODY = Buffer.from('{"name":"Ada Lovelace","email":"ada@example.com"}')
const OTHER = Buffer.from('{"name":"Ada Lovelace","email":"eve@example.com"}')
const EMPTY = Buffer.alloc(0)
const sha256 = digestOf('sha-256', BODY)
const sha512 = digestOf('sha-512', BODY)
/** the body's SHA-256 as base64, for members of other names and forms */
const sha256Base64 = sha256.slice('sha-256=:'.length, -1)

export const FORWARDED_DIGEST_CASES: ForwardedDigestCase[] = [
  { name: 'sha-256 of the body', header: sha256, body: BODY, verdict: 'ok', algorithms: ['sha-256'] },
  { name: 'sha-512 of the body', header: sha512, body: BODY, verdict: 'ok', algorithms: ['sha-512'] },
  { name: 'both, with whitespace around the members', header: `  ${sha512} ,\t${sha256}  `, body: BODY, verdict: 'ok', algorithms: ['sha-512', 'sha-256'] },
  { name: 'an unknown algorithm beside a known one is ignored', header: `unixsum=:AAAA:, ${sha256}`, body: BODY, verdict: 'ok', algorithms: ['sha-256'] },
  { name: 'the empty body and its digest', header: digestOf('sha-256', EMPTY), body: EMPTY, verdict: 'ok', algorithms: ['sha-256'] },
  { name: 'no header: nothing to check', header: undefined, body: BODY, verdict: 'nothing-to-check' },
  { name: 'no header and no body', header: undefined, body: EMPTY, verdict: 'nothing-to-check' },

  { name: 'the digest of another body', header: digestOf('sha-256', OTHER), body: BODY, verdict: 'mismatch' },
  { name: 'sha-512 of another body', header: digestOf('sha-512', OTHER), body: BODY, verdict: 'mismatch' },
  { name: 'one of two digests wrong', header: `${sha256}, ${digestOf('sha-512', OTHER)}`, body: BODY, verdict: 'mismatch' },
  { name: 'a digest, and an empty body', header: sha256, body: EMPTY, verdict: 'mismatch' },
  { name: 'the empty body\'s digest, and a body', header: digestOf('sha-256', EMPTY), body: BODY, verdict: 'mismatch' },
  { name: 'a sha-256 member of a SHA-512\'s length', header: `sha-256=:${sha512.slice('sha-512=:'.length, -1)}:`, body: BODY, verdict: 'mismatch' },

  { name: 'unknown algorithms only', header: `md5=:${createHash('md5').update(BODY).digest('base64')}:`, body: BODY, verdict: 'no-known-algorithm' },
  { name: 'an empty value', header: '', body: BODY, verdict: 'no-known-algorithm' },

  { name: 'base64 without the colons', header: `sha-256=${sha256Base64}`, body: BODY, verdict: 'malformed' },
  { name: 'a quoted string', header: `sha-256="${sha256Base64}"`, body: BODY, verdict: 'malformed' },
  { name: 'not base64', header: 'sha-256=:not base64!:', body: BODY, verdict: 'malformed' },
  { name: 'base64 cut short', header: `sha-256=:${sha256Base64.slice(0, -1)}:`, body: BODY, verdict: 'malformed' },
  { name: 'an upper-case name (not a Structured Fields key)', header: `SHA-256=:${sha256Base64}:`, body: BODY, verdict: 'malformed' },
  { name: 'a parameter on the member', header: `${sha256};q=1`, body: BODY, verdict: 'malformed' },
  { name: 'a trailing comma', header: `${sha256},`, body: BODY, verdict: 'malformed' },
  { name: 'a bare name', header: 'sha-256', body: BODY, verdict: 'malformed' },
  { name: 'one algorithm twice (even both right)', header: `${sha256}, ${sha256}`, body: BODY, verdict: 'malformed' },
  { name: 'one algorithm twice, one of them wrong', header: `${sha256}, ${digestOf('sha-256', OTHER)}`, body: BODY, verdict: 'malformed' }
]
