// The error path nobody plans for: an unexpected throw answers 500 INTERNAL_ERROR as problem+json,
// with the x-request-id to look for in the log and none of the error's own text. And what Node's
// parser refuses, on a real socket: a header broken over lines is named when it is the signature.
import { randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import Fastify from 'fastify'
import t from 'tap'
import { headerAtFault, problemsPlugin } from '../../../../../gateway/src/http/plugins/problems.js'
import { exchange } from '../../../../helpers/security.js'
import { startStack } from '../../../../helpers/stack.js'

t.test('an unexpected error: 500 INTERNAL_ERROR, logged, its message never sent', async (t) => {
  const lines: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(chunk.toString()); done() } })
  const app = Fastify({ logger: { level: 'error', stream } })
  await app.register(problemsPlugin)
  app.get('/boom', async () => { throw new Error('secret internal detail') })
  await app.ready()
  t.teardown(async () => { await app.close() })

  const res = await app.inject('/boom')
  t.equal(res.statusCode, 500)
  t.match(res.headers['content-type'], /^application\/problem\+json/)
  t.match(res.json(), { code: 'INTERNAL_ERROR', status: 500, type: 'urn:keygate:problem:internal-error' })
  t.notOk(res.body.includes('secret internal detail'), 'the message stays out of the answer')
  t.ok(lines.some((line) => line.includes('unhandled error') && line.includes('secret internal detail')), 'and goes to the log')
})

t.test('a header broken over lines: MALFORMED_HTTP, and when it is X-API-Signature the detail says so and how to fix it', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const signature = randomBytes(256).toString('base64')
  const wrap = (width: number): string => signature.replace(new RegExp(`(.{${width}})(?=.)`, 'g'), '$1\n')
  const request = (headers: string): string => `GET /v1/clients/ HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer x.y.z\r\n${headers}\r\n`
  const signatureDetail = /^X-API-Signature holds a line break, which no header may: encode the signature in base64 on one line \(base64 -w0, or openssl base64 -A\)/
  const generic = /^The request is not well-formed HTTP\/1\.1/
  const cases: Array<[label: string, bytes: string, detail: RegExp]> = [
    ['GNU base64 (76 columns), as curl sends it', request(`X-API-Key: k\r\nX-API-Timestamp: 1\r\nX-API-Signature: ${wrap(76)}\r\n`), signatureDetail],
    ['openssl base64 (64 columns), in lower case, other headers after it', request(`x-api-signature: ${wrap(64)}\r\nX-API-Key: k\r\nConnection: close\r\n`),
      signatureDetail],
    ['a trailing line feed before the CRLF', request(`X-API-Signature: ${signature}\n\r\nConnection: close\r\n`), signatureDetail],
    ['lines joined by CRLF and a space (obsolete folding)', request(`X-API-Signature: ${wrap(76).replaceAll('\n', '\r\n ')}\r\n`), signatureDetail],
    ['lines joined by CRLF alone', request(`X-API-Signature: ${wrap(76).replaceAll('\n', '\r\n')}\r\n`), signatureDetail],
    // not the signature: the answer blames no header it cannot see
    ['a line feed in another header', request(`X-API-Key: ab\ncd\r\nX-API-Signature: ${signature}\r\n`), generic],
    ['bare LF line endings throughout', `GET /v1/clients/ HTTP/1.1\nHost: gw\nX-API-Signature: ${signature}\n\n`, generic],
    ['Content-Length with Transfer-Encoding, the signature last',
      `POST /v1/clients/ HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\nX-API-Signature: ${signature}\r\n\r\n0\r\n\r\n`, generic]
  ]
  for (const [label, bytes, detail] of cases) {
    const answer = await exchange(gw.url, bytes)
    const res = answer.responses[0]
    t.equal(answer.responses.length, 1, `${label}: one answer`)
    t.equal(res?.status, 400, label)
    t.equal(res?.headers.connection, 'close', `${label}: the connection is closed`)
    const problem = JSON.parse(res?.body.toString('utf8') ?? '{}') as { code?: string; detail?: string }
    t.equal(problem.code, 'MALFORMED_HTTP', label)
    t.match(problem.detail, detail, label)
  }
})

t.test('headerAtFault: the header whose line the parser stopped in, only when the bytes show it', async (t) => {
  const at = (text: string, marker: string): string | undefined => headerAtFault(Buffer.from(text.replace(marker, ''), 'latin1'), text.indexOf(marker))
  t.equal(at('GET / HTTP/1.1\r\nHost: x\r\nX-API-Signature: abc|\ndef\r\n\r\n', '|'), 'x-api-signature', 'a bare LF inside the value')
  t.equal(at('GET / HTTP/1.1\r\nHost: x\r\nX-API-Signature: abc\r\n| def\r\n\r\n', '|'), 'x-api-signature', 'a continuation line')
  t.equal(at('GET / HTTP/1.1\r\nHost: x\r\nX-API-Signature: abc\r\nde|f\r\n\r\n', '|'), 'x-api-signature', 'a line without a colon')
  t.equal(at('GET / HTTP/1.1\r\nHost: x\r\nX-Other: abc|\ndef\r\n\r\n', '|'), 'x-other')
  t.equal(at('Signature: abc|\ndef\r\n\r\n', '|'), undefined, 'a packet that starts inside a line (an earlier chunk): no guess')
  t.equal(at('GET / HTTP/1.1|\nHost: x\r\n\r\n', '|'), undefined, 'the request line is no header')
})
