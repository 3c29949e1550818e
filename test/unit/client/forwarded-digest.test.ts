// checkForwardedDigest, what an upstream behind keygate's decision mode calls on each request:
// the shared cases (test/helpers/forwarded-digest-cases.ts, which the Python recipe runs too), over
// the header forms an upstream has (Node.js's req.headers, fetch's Headers) and the body forms
// (a Buffer, a view into a larger buffer, an ArrayBuffer). A real decision's header is in
// test/system/forwarded-digest.test.ts.
import { createHash } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import t from 'tap'
import { checkForwardedDigest, FORWARDED_DIGEST_HEADER, type ForwardedDigestCheck } from '@keygate/client'
import { digestOf, FORWARDED_DIGEST_CASES, type ForwardedDigestVerdict } from '../../helpers/forwarded-digest-cases.js'

function verdictOf (check: ForwardedDigestCheck): ForwardedDigestVerdict {
  if (!check.ok) return check.reason
  return check.checked ? 'ok' : 'nothing-to-check'
}

t.test('the header is the one keygate\'s decision sets', async (t) => {
  t.equal(FORWARDED_DIGEST_HEADER, 'x-keygate-content-digest')
})

t.test('every case, with the headers as Node.js gives them and as fetch\'s Headers', async (t) => {
  for (const { name, header, body, verdict, algorithms } of FORWARDED_DIGEST_CASES) {
    const node: IncomingHttpHeaders = { 'content-type': 'application/json', ...(header !== undefined && { [FORWARDED_DIGEST_HEADER]: header }) }
    const fetchHeaders = new Headers(header === undefined ? {} : { 'X-Keygate-Content-Digest': header })
    for (const [form, headers] of [['req.headers', node], ['Headers', fetchHeaders]] as const) {
      const check = await checkForwardedDigest(headers, body)
      t.equal(verdictOf(check), verdict, `${name} (${form}): ${verdict}${check.ok ? '' : `: ${check.message}`}`)
      if (verdict === 'ok') t.same(check, { ok: true, checked: true, algorithms }, `${name}: checked ${String(algorithms)}`)
      if (!check.ok) t.match(check.message, /x-keygate-content-digest/, `${name}: the message names the header`)
    }
  }
})

t.test('a mismatch says the length received and its digest; a malformed member is quoted', async (t) => {
  const body = Buffer.from('{"a":1}')
  const check = await checkForwardedDigest({ [FORWARDED_DIGEST_HEADER]: digestOf('sha-256', 'other') }, body)
  t.same(check, {
    ok: false,
    reason: 'mismatch',
    message: `x-keygate-content-digest sha-256 is not the digest of the 7 bytes of body received, whose digest is ${digestOf('sha-256', body)}: ` +
      'the body is not the one the client signed'
  })
  const malformed = await checkForwardedDigest({ [FORWARDED_DIGEST_HEADER]: 'sha-256=abc' }, body)
  t.match(malformed, { ok: false, reason: 'malformed', message: /member "sha-256=abc" is not name=:base64:/ })
})

t.test('the header\'s lines: Node.js\'s list, a name in any case, one field', async (t) => {
  const body = Buffer.from('[1,2,3]')
  const [sha256, sha512] = [digestOf('sha-256', body), digestOf('sha-512', body)]
  t.same(await checkForwardedDigest({ [FORWARDED_DIGEST_HEADER]: [sha256, sha512] }, body), { ok: true, checked: true, algorithms: ['sha-256', 'sha-512'] },
    'two lines are one field')
  t.same(await checkForwardedDigest({ 'X-Keygate-Content-Digest': sha256 }, body), { ok: true, checked: true, algorithms: ['sha-256'] },
    'an object of headers written by hand, its name capitalised')
  t.equal(verdictOf(await checkForwardedDigest({ [FORWARDED_DIGEST_HEADER]: [sha256, sha256] }, body)), 'malformed',
    'the same algorithm on two lines is named twice')
  t.equal(verdictOf(await checkForwardedDigest({ [FORWARDED_DIGEST_HEADER]: [sha256, digestOf('sha-512', 'x')] }, body)), 'mismatch',
    'every line is checked')
  t.same(await checkForwardedDigest({ [FORWARDED_DIGEST_HEADER]: undefined }, body), { ok: true, checked: false }, 'a name without a value is absent')
  t.same(await checkForwardedDigest({ 'content-digest': sha256 }, Buffer.from('x')), { ok: true, checked: false },
    'the client\'s own Content-Digest is not the forwarded one: nothing to check')
})

t.test('the body: exactly the bytes given, whatever holds them', async (t) => {
  const bytes = Buffer.from('{"name":"Ada"}')
  const header = { [FORWARDED_DIGEST_HEADER]: digestOf('sha-512', bytes) }
  const pooled = Buffer.concat([Buffer.from('before'), bytes, Buffer.from('after')]).subarray(6, 6 + bytes.length)
  t.ok(pooled.byteOffset > 0 || pooled.buffer.byteLength > pooled.length, 'a view into a larger buffer, as Node.js\'s small Buffers are')
  for (const [form, body] of [['a Buffer', bytes], ['a view', pooled], ['a Uint8Array', new Uint8Array(bytes)],
    ['an ArrayBuffer', new Uint8Array(bytes).buffer]] as const) {
    t.same(await checkForwardedDigest(header, body), { ok: true, checked: true, algorithms: ['sha-512'] }, form)
  }
  const big = Buffer.alloc(3 << 20, 'k')
  t.same(await checkForwardedDigest({ [FORWARDED_DIGEST_HEADER]: `sha-256=:${createHash('sha256').update(big).digest('base64')}:` }, big),
    { ok: true, checked: true, algorithms: ['sha-256'] }, 'a 3 MiB body')
})

t.test('a body that is not bytes is a mistake in the upstream\'s code: a TypeError, header or not', async (t) => {
  for (const body of ['{"a":1}', { a: 1 }, undefined, null]) {
    for (const headers of [{}, { [FORWARDED_DIGEST_HEADER]: digestOf('sha-256', '{"a":1}') }]) {
      await t.rejects(checkForwardedDigest(headers, body as unknown as Uint8Array),
        { name: 'TypeError', message: /^body: must be the exact bytes received, a Uint8Array \(a Buffer is one\) or an ArrayBuffer/ },
        `${JSON.stringify(body) ?? 'undefined'}${Object.keys(headers).length === 0 ? '' : ', with the header'}`)
    }
  }
})
