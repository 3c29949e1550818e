// Request smuggling: framings that two HTTP parsers could read two ways. Each attack is a
// correctly signed request to a signed route whose body carries a second request to a public
// route; whichever way a parser read it, one of the two would reach an upstream. Every one must
// be refused with a 4xx and nothing may reach either upstream. A correctly pipelined pair still
// works, each request authenticated on its own.
import t from 'tap'
import { rsaKeyPair, signedHeaders, type TestKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway, testConfig } from '../helpers/stack.js'
import { exchange, uniqueTimestamp } from '../helpers/security.js'

const INNER = 'GET /public/smuggled HTTP/1.1\r\nHost: gateway.test\r\n\r\n'
const INNER_POST = 'POST /public/smuggled HTTP/1.1\r\nHost: gateway.test\r\nContent-Length: 2\r\n\r\n{}'

interface Signer { keys: TestKeyPair; token: string }

/** The four auth header lines of a signed request (a fresh timestamp each time: no replay). */
function authLines (signer: Signer, method: string, target: string, body: string): string {
  const headers = signedHeaders({ ...signer, method, target, body, timestamp: uniqueTimestamp() })
  return Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')
}

const chunk = (data: string): string => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`

interface Attack {
  name: string
  /** the whole byte stream, given the signer */
  bytes: (s: Signer) => string
}

/** POST /signed/x, signed over `signedBody`, with `framing` header lines and `wire` as what follows the head. */
function post (signer: Signer, framing: string, signedBody: string, wire: string, eol = '\r\n'): string {
  const head = 'POST /signed/x HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\n' +
    `${authLines(signer, 'POST', '/signed/x', signedBody)}${framing}`
  return (eol === '\r\n' ? head : head.replaceAll('\r\n', eol)) + eol + wire
}

// For each: the CL view of the body and the TE view; the signature covers the view named.
const clBody = '0\r\n\r\n' + INNER
const teBody = INNER_POST
const teWire = chunk(teBody) + '0\r\n\r\n'
const obfuscatedTe = (te: string) => (s: Signer): string => post(s, `Content-Length: ${clBody.length}\r\n${te}\r\n`, clBody, clBody)

const ATTACKS: Attack[] = [
  {
    name: 'CL.TE: Content-Length then Transfer-Encoding: chunked',
    bytes: (s) => post(s, `Content-Length: ${clBody.length}\r\nTransfer-Encoding: chunked\r\n`, clBody, clBody)
  },
  {
    name: 'TE.CL: Transfer-Encoding: chunked then Content-Length',
    bytes: (s) => post(s, 'Transfer-Encoding: chunked\r\nContent-Length: 3\r\n', teBody, teWire)
  },
  { name: 'CL.TE signed over the chunked view', bytes: (s) => post(s, `Content-Length: ${teWire.length}\r\nTransfer-Encoding: chunked\r\n`, teBody, teWire) },
  { name: 'two equal Content-Lengths', bytes: (s) => post(s, 'Content-Length: 2\r\nContent-Length: 2\r\n', '{}', '{}' + INNER) },
  { name: 'two different Content-Lengths', bytes: (s) => post(s, `Content-Length: 2\r\nContent-Length: ${2 + INNER.length}\r\n`, '{}', '{}' + INNER) },
  { name: 'Content-Length as a list "2, 2"', bytes: (s) => post(s, 'Content-Length: 2, 2\r\n', '{}', '{}' + INNER) },
  { name: 'Content-Length with a plus sign', bytes: (s) => post(s, 'Content-Length: +2\r\n', '{}', '{}' + INNER) },
  { name: 'Transfer-Encoding: chunked, identity (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: chunked, identity') },
  { name: 'Transfer-Encoding: identity, chunked (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: identity, chunked') },
  { name: 'Transfer-Encoding: xchunked (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: xchunked') },
  { name: 'Transfer-Encoding: chunkedx (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: chunkedx') },
  { name: 'Transfer-Encoding: CHUNKED (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: CHUNKED') },
  { name: 'Transfer-Encoding with leading spaces in the value (+ CL)', bytes: obfuscatedTe('Transfer-Encoding:    chunked') },
  { name: 'Transfer-Encoding header line starting with a space (+ CL)', bytes: obfuscatedTe(' Transfer-Encoding: chunked') },
  { name: 'Transfer-Encoding:\\tchunked (+ CL)', bytes: obfuscatedTe('Transfer-Encoding:\tchunked') },
  { name: 'Transfer-Encoding : chunked (space before the colon, + CL)', bytes: obfuscatedTe('Transfer-Encoding : chunked') },
  { name: 'Transfer-Encoding tab-folded onto the next line (+ CL)', bytes: obfuscatedTe('Transfer-Encoding:\r\n\tchunked') },
  { name: 'Transfer-Encoding folded after identity (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: identity\r\n chunked') },
  { name: 'two Transfer-Encoding lines (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: identity\r\nTransfer-Encoding: chunked') },
  { name: 'Transfer-Encoding with a vertical tab (+ CL)', bytes: obfuscatedTe('Transfer-Encoding:\u000bchunked') },
  { name: 'Content-Length : 2 (space before the colon)', bytes: (s) => post(s, 'Content-Length : 2\r\n', '{}', '{}' + INNER) },
  { name: 'bare LF line endings throughout', bytes: (s) => post(s, 'Content-Length: 2\r\n', '{}', '{}' + INNER.replaceAll('\r\n', '\n'), '\n') },
  { name: 'bare LF after Transfer-Encoding (+ CL)', bytes: obfuscatedTe('Transfer-Encoding: chunked\nX-Pad: 1') },
  { name: 'bare LF in the chunk framing', bytes: (s) => post(s, 'Transfer-Encoding: chunked\r\n', '{}', `2\n{}\n0\n\n${INNER}`) },
  { name: 'bare CR as a line ending', bytes: (s) => post(s, 'Content-Length: 2\rTransfer-Encoding: chunked\r\n', '{}', '{}' + INNER) },
  {
    name: 'chunk size with a huge leading zero run and an extension',
    bytes: (s) => post(
      s,
      'Transfer-Encoding: chunked\r\n',
      teBody,
      `${'0'.repeat(300)}${Buffer.byteLength(teBody).toString(16)};x=${'y'.repeat(100)}\r\n${teBody}\r\n0\r\n\r\n`
    )
  },
  {
    name: 'a GET whose Content-Length body is a second request (signed route)',
    bytes: (s) => `GET /signed/x HTTP/1.1\r\nHost: gateway.test\r\n${authLines(s, 'GET', '/signed/x', '')}Content-Length: ${INNER.length}\r\n\r\n${INNER}`
  },
  {
    name: 'a GET whose Content-Length body is a second request (public route)',
    bytes: () => `GET /public/x HTTP/1.1\r\nHost: gateway.test\r\nContent-Length: ${INNER.length}\r\n\r\n${INNER}`
  },
  {
    name: 'a GET whose chunked body is a second request (public route)',
    bytes: () => `GET /public/x HTTP/1.1\r\nHost: gateway.test\r\nTransfer-Encoding: chunked\r\n\r\n${chunk(INNER)}0\r\n\r\n`
  },
  {
    name: 'an unsigned POST whose body is a second request, refused before its body is read',
    bytes: () => `POST /signed/x HTTP/1.1\r\nHost: gateway.test\r\nContent-Length: ${INNER.length}\r\n\r\n${INNER}`
  },
  {
    name: 'a body over the route limit that holds a second request, refused before it is read',
    bytes: (s) => post(s, `Content-Length: ${64 + INNER.length}\r\n`, 'x'.repeat(64) + INNER, 'x'.repeat(64) + INNER)
  }
]

t.test('request smuggling', async (t) => {
  const signedUpstream = await startRecorder(t)
  const publicUpstream = await startRecorder(t)
  const file = routeFile(t, `
routes:
  - prefix: /signed/
    upstream: ${signedUpstream.url}
    auth: signed
    methods: [GET, POST]
    bodyLimit: 64
    # the bodies here start with a chunk terminator ("0"), which the seed body rule refuses on its
    # own (AMBIGUOUS_SIGNED_BODY): off, so that each attempt is refused for its framing alone
    seedBodyBoundary: unchecked
  - prefix: /public/
    upstream: ${publicUpstream.url}
    auth: public
`)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config: testConfig({ routesFile: file.path }) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'smuggling')).status, 201)
  const signer = { keys, token }
  const reached = (): number => signedUpstream.requests.length + publicUpstream.requests.length

  t.test(`${ATTACKS.length} smuggling attempts (signed-route ones correctly signed): ${ATTACKS.length} refused with a 4xx, 0 reach an upstream`, async (t) => {
    const before = reached()
    const table: string[] = []
    let refused = 0
    for (const attack of ATTACKS) {
      const bytes = attack.bytes(signer)
      // keep-alive (no Connection: close): a smuggled second request would be read on this connection
      const r = await exchange(gw.url, Buffer.from(bytes, 'latin1'), { timeoutMs: 1500 })
      const statuses = r.responses.map((res) => res.status)
      const codes = r.responses.map((res) => /"code":"([A-Z_]+)"/.exec(res.body.toString())?.[1] ?? '-')
      table.push(`${attack.name.padEnd(75)} ${statuses.join(',') || 'no answer'} ${codes.join(',')}`)
      const ok = statuses.length >= 1 && statuses.every((s) => s >= 400 && s < 500)
      if (ok) refused++
      t.ok(ok, `${attack.name}: ${statuses.join(',') || 'no answer'} ${codes.join(',')}`)
    }
    t.comment('\n' + table.join('\n'))
    t.equal(refused, ATTACKS.length, 'every attempt refused with a 4xx')
    t.equal(reached() - before, 0, '0 requests reached an upstream')
  })

  t.test('look-alike framing headers (Transfer_Encoding, Content_Length) are not framing: ' +
    'one request, by Content-Length, the look-alikes dropped', async (t) => {
    const before = signedUpstream.requests.length
    const publicBefore = publicUpstream.requests.length
    const framing = `Content-Length: ${clBody.length}\r\nTransfer_Encoding: chunked\r\nContent_Length: 0\r\nConnection: close\r\n`
    const r = await exchange(gw.url, Buffer.from(post(signer, framing, clBody, clBody), 'latin1'))
    t.same(r.responses.map((res) => res.status), [200], 'one answer')
    t.equal(signedUpstream.requests.length - before, 1, 'one request forwarded')
    t.equal(publicUpstream.requests.length, publicBefore, 'the body was not read as a second request')
    const seen = signedUpstream.requests.at(-1)
    t.equal(seen?.body.toString('latin1'), clBody, 'the signed body, byte for byte')
    t.same(
      Object.keys(seen?.headers ?? {}).filter((name) => /^(transfer|content)[-_](encoding|length)$/.test(name)),
      ['content-length'],
      'only the gateway\'s own Content-Length upstream'
    )
  })

  t.test('a correctly pipelined pair on one connection: each authenticated on its own', async (t) => {
    const one = '{"n":1}'
    const two = '{"n":2}'
    const first = 'POST /signed/one HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\n' +
      `${authLines(signer, 'POST', '/signed/one', one)}Content-Length: ${one.length}\r\n\r\n${one}`
    const second = 'POST /signed/two?x=1 HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\n' +
      `${authLines(signer, 'POST', '/signed/two?x=1', two)}Content-Length: ${two.length}\r\nConnection: close\r\n\r\n${two}`
    const before = signedUpstream.requests.length
    const both = await exchange(gw.url, first + second)
    t.same(both.responses.map((r) => r.status), [200, 200], 'two signed requests: two answers, both 200')
    t.same(
      signedUpstream.requests.slice(before).map((r) => [r.method, r.url, r.body.toString()]),
      [['POST', '/signed/one', one], ['POST', '/signed/two?x=1', two]],
      'both forwarded, in order, as signed'
    )
    t.same(signedUpstream.requests.slice(before).map((r) => r.headers['x-gateway-user']), ['alice', 'alice'])

    // the first is signed, the second only carries the token: authentication does not carry over
    const unsigned = `GET /signed/three HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`
    const third = 'POST /signed/one HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\n' +
      `${authLines(signer, 'POST', '/signed/one', one)}Content-Length: ${one.length}\r\n\r\n${one}`
    const mid = signedUpstream.requests.length
    const mixed = await exchange(gw.url, third + unsigned)
    t.same(mixed.responses.map((r) => r.status), [200, 401], 'signed then unsigned: 200 then 401')
    t.equal(signedUpstream.requests.length - mid, 1, 'only the signed one forwarded')

    // and the other way round: a refused first request does not stop a good second one
    const refusedFirst = `POST /signed/x HTTP/1.1\r\nHost: gateway.test\r\nContent-Length: ${INNER.length}\r\n\r\n${INNER}`
    const good = `GET /signed/four HTTP/1.1\r\nHost: gateway.test\r\n${authLines(signer, 'GET', '/signed/four', '')}Connection: close\r\n\r\n`
    const last = signedUpstream.requests.length
    const publicBefore = publicUpstream.requests.length
    const after = await exchange(gw.url, refusedFirst + good)
    t.same(after.responses.map((r) => r.status), [401, 200], 'unsigned (its body a request) then signed: 401 then 200')
    t.same(signedUpstream.requests.slice(last).map((r) => r.url), ['/signed/four'])
    t.equal(publicUpstream.requests.length, publicBefore, 'the body of the refused request was not read as a request')
  })
})
