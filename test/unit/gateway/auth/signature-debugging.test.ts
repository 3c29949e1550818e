// The five classic signing mistakes against a real gateway: what keygate answers for each (what
// it verified, never the expected signature), and docs/debugging-signatures.md showing exactly
// those answers; and a sixth, a signature broken over lines, sent as the raw bytes curl sends.
// The gateway's clock and the keys are fixed, so every answer is deterministic and
// the guide's examples are compared byte for byte: the guide cannot go stale.
//
// After a deliberate change to the answers, regenerate the guide's examples with:
//   KEYGATE_WRITE_GUIDE=1 npx tap test/unit/gateway/auth/signature-debugging.test.ts
import { createHash, createPrivateKey, createPublicKey, sign, type KeyObject } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import t from 'tap'
import { describeSigningString, type SigningStringDetails } from '@keygate/client'
import { MAX_TIMESTAMP_SKEW_MS } from '@keygate/client/protocol'
import { send, type RawResponse } from '../../../helpers/http.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { exchange } from '../../../helpers/security.js'
import { testKeyPairOf } from '../../../helpers/keys.js'
import { addUser, login, registerKey, startStack } from '../../../helpers/stack.js'

const GUIDE = new URL('../../../../docs/debugging-signatures.md', import.meta.url)
const CLOCK = 1_790_000_000_000
const TS = String(CLOCK)
const fixture = (name: string): KeyObject => createPrivateKey(readFileSync(new URL(`../../../fixtures/debugging-guide/${name}.pem`, import.meta.url)))
const registered = fixture('registered')
const other = fixture('other')
const apiKeyOf = (key: KeyObject): string => testKeyPairOf(key).apiKey
const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex')

const DATA = { name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '12345678' }
// what Python's requests sends for json=data (json.dumps's defaults): a space after ":" and ","
const PYTHON_JSON = JSON.stringify(DATA).replaceAll('":"', '": "').replaceAll('","', '", "')

interface Mistake {
  id: string
  /** the request as sent */
  method: string
  target: string
  timestamp: string
  body?: string
  /** what the client put into its signing string, and the exact bytes it signed */
  clientParts: { timestamp: string; method: string; target: string; body: string }
  signed: string
  signer: KeyObject
  code: string
  /** the members of the answer that differ from what the client signed */
  differ: Array<keyof SigningStringDetails>
}

const parts = (timestamp: string, method: string, target: string, body = ''): Mistake['clientParts'] => ({ timestamp, method, target, body })
const joined = (p: Mistake['clientParts']): string => p.timestamp + p.method + p.target + p.body

const COMPACT = JSON.stringify(DATA)
const mistakes: Mistake[] = [
  (() => {
    // signed compact (json.dumps(data, separators=(",", ":"))), sent as requests serialises json=data
    const clientParts = parts(TS, 'POST', '/v1/clients/', COMPACT)
    return {
      id: 're-serialised-json',
      method: 'POST',
      target: '/v1/clients/',
      timestamp: TS,
      body: PYTHON_JSON,
      clientParts,
      signed: joined(clientParts),
      signer: registered,
      code: 'INVALID_SIGNATURE',
      differ: ['bodyLength', 'bodySha256', 'signingStringLength', 'signingStringSha256']
    }
  })(),
  (() => {
    const clientParts = parts(TS, 'GET', '/v1/clients/')
    return {
      id: 'trailing-newline',
      method: 'GET',
      target: '/v1/clients/',
      timestamp: TS,
      clientParts,
      signed: `${joined(clientParts)}\n`,
      signer: registered,
      code: 'INVALID_SIGNATURE',
      differ: ['signingStringLength', 'signingStringSha256']
    }
  })(),
  (() => {
    const seconds = String(CLOCK / 1000)
    const clientParts = parts(seconds, 'GET', '/v1/clients/')
    return {
      id: 'seconds',
      method: 'GET',
      target: '/v1/clients/',
      timestamp: seconds,
      clientParts,
      signed: joined(clientParts),
      signer: registered,
      code: 'TIMESTAMP_INVALID',
      differ: []
    }
  })(),
  (() => {
    const clientParts = parts(TS, 'GET', '/v1/clients/')
    return {
      id: 'query-left-out',
      method: 'GET',
      target: '/v1/clients/?limit=10',
      timestamp: TS,
      clientParts,
      signed: joined(clientParts),
      signer: registered,
      code: 'INVALID_SIGNATURE',
      differ: ['target', 'signingStringLength', 'signingStringSha256']
    }
  })(),
  (() => {
    const clientParts = parts(TS, 'GET', '/v1/clients/')
    return {
      id: 'wrong-key-pair',
      method: 'GET',
      target: '/v1/clients/',
      timestamp: TS,
      clientParts,
      signed: joined(clientParts),
      signer: other,
      code: 'INVALID_SIGNATURE',
      differ: []
    }
  })()
]

const MEMBERS: Array<keyof SigningStringDetails> = ['timestamp', 'method', 'target', 'bodyLength', 'bodySha256', 'signingStringLength', 'signingStringSha256']

/** What the client signed, described as keygate describes what it verified. */
async function clientView (m: Mistake): Promise<SigningStringDetails> {
  const p = m.clientParts
  const described = await describeSigningString(p.timestamp, p.method, p.target, Buffer.from(p.body))
  return { ...described, signingStringLength: Buffer.byteLength(m.signed), signingStringSha256: sha256(m.signed) }
}

/** The guide's generated region for one mistake: the answer, and the comparison table. */
async function region (m: Mistake, res: RawResponse): Promise<string> {
  const problem = res.json()
  const lines = [`keygate answers \`${res.status}\`, \`${res.headers['content-type'] ?? ''}\`:`, '', '```json', JSON.stringify(problem, null, 2), '```']
  if (problem.code === 'INVALID_SIGNATURE') {
    const mine = await clientView(m)
    lines.push('', '| Member | You signed | keygate verified | |', '|---|---|---|---|')
    for (const member of MEMBERS) {
      const same = mine[member] === problem[member]
      lines.push(`| \`${member}\` | \`${String(mine[member])}\` | \`${String(problem[member])}\` | ${same ? 'same' : '**differs**'} |`)
    }
  }
  return lines.join('\n')
}

const markers = (id: string): [string, string] => [`<!-- generated:${id}:start -->\n`, `<!-- generated:${id}:end -->`]

function guideRegion (guide: string, id: string): string | undefined {
  const [start, end] = markers(id)
  const from = guide.indexOf(start)
  const to = guide.indexOf(end)
  return from === -1 || to < from ? undefined : guide.slice(from + start.length, to).replace(/\n$/, '')
}

/** The guide with region `id` holding `generated` (KEYGATE_WRITE_GUIDE=1). */
function withRegion (guide: string, id: string, generated: string): string {
  const [start, end] = markers(id)
  const from = guide.indexOf(start)
  const to = guide.indexOf(end)
  if (from === -1 || to < from) throw new Error(`the guide has no ${start.trim()} ... ${end} markers`)
  return guide.slice(0, from + start.length) + generated + '\n' + guide.slice(to)
}

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

/** Checks that the guide's region `id` shows `generated`; with KEYGATE_WRITE_GUIDE=1, writes it there instead. */
function guideShows (t: Test, id: string, generated: string, message: string): void {
  const guide = readFileSync(GUIDE, 'utf8')
  if (process.env.KEYGATE_WRITE_GUIDE === '1') writeFileSync(GUIDE, withRegion(guide, id, generated))
  else t.equal(guideRegion(guide, id), generated, message)
}

t.test('the five classic mistakes: what keygate answers, and the guide shows exactly that', async (t) => {
  const gw = await startStack(t, { store: 'memory', now: () => CLOCK })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const registration = await registerKey(gw.url, token, testKeyPairOf(registered), 'laptop')
  t.equal(registration.status, 201, registration.text)
  const apiKey = apiKeyOf(registered)

  let guide = readFileSync(GUIDE, 'utf8')
  const writing = process.env.KEYGATE_WRITE_GUIDE === '1'
  for (const m of mistakes) {
    t.test(m.id, async (t) => {
      const headers: Record<string, string> = {
        authorization: `Bearer ${token}`,
        'x-api-key': apiKey,
        'x-api-timestamp': m.timestamp,
        'x-api-signature': sign('sha256', Buffer.from(m.signed), m.signer).toString('base64'),
        ...(m.body !== undefined && { 'content-type': 'application/json' })
      }
      const res = await send(gw.url, m.target, { method: m.method, headers, ...(m.body !== undefined && { body: m.body }) })
      const problem = res.json()
      t.equal(res.status, 401)
      t.equal(problem.code, m.code)
      t.match(res.headers['content-type'], /^application\/problem\+json/)

      if (m.code === 'TIMESTAMP_INVALID') {
        t.equal(problem.serverTime, CLOCK, 'serverTime is the gateway\'s clock, in milliseconds')
        t.equal(problem.maxSkewMs, MAX_TIMESTAMP_SKEW_MS)
        t.match(problem.detail, /looks like seconds/)
      } else {
        // What keygate verified: the request as sent, described member by member.
        const body = Buffer.from(m.body ?? '')
        t.match(problem, {
          apiKey,
          timestamp: m.timestamp,
          method: m.method,
          target: m.target,
          bodyLength: body.length,
          bodySha256: sha256(body),
          signingStringLength: Buffer.byteLength(m.timestamp + m.method + m.target) + body.length,
          signingStringSha256: sha256(Buffer.concat([Buffer.from(m.timestamp + m.method + m.target), body]))
        })
        const mine = await clientView(m)
        t.same(MEMBERS.filter((member) => mine[member] !== problem[member]), m.differ, 'the members that differ point at the mistake')
        // Never the expected signature, in any encoding.
        const expected = sign('sha256', Buffer.concat([Buffer.from(m.timestamp + m.method + m.target), body]), registered)
        for (const encoding of ['base64', 'hex', 'base64url'] as const) {
          t.notOk(res.text.includes(expected.toString(encoding)), `the expected signature (${encoding}) is not in the answer`)
        }
      }

      const generated = await region(m, res)
      if (writing) {
        guide = withRegion(guide, m.id, generated)
      } else {
        t.equal(
          guideRegion(guide, m.id),
          generated,
          `docs/debugging-signatures.md shows keygate's answer for ${m.id} ` +
          `(regenerate: KEYGATE_WRITE_GUIDE=1 npx tap ${'test/unit/gateway/auth/signature-debugging.test.ts'})`
        )
      }
    })
  }
  t.teardown(() => { if (writing) writeFileSync(GUIDE, guide) })
})

t.test('the wrong key pair of another size: the detail says the signature has the wrong length', async (t) => {
  const { generateKeyPairSync } = await import('node:crypto')
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const { privateKey: big } = generateKeyPairSync('rsa', { modulusLength: 3072 })
  const registrationBody = JSON.stringify({
    name: 'laptop',
    publicKey: createPublicKey(registered).export({ type: 'spki', format: 'pem' }).toString(),
    signature: sign('sha256', Buffer.from('laptop'), registered).toString('base64')
  })
  await send(gw.url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: registrationBody
  })
  const ts = String(Date.now())
  const cases: Array<[string, string, RegExp]> = [
    [
      'a 3072-bit key signed',
      sign('sha256', Buffer.from(`${ts}GET/v1/clients/`), big).toString('base64'),
      /holds 384 bytes, but a signature by the key of X-API-Key \(2048-bit RSA\) holds 256/
    ],
    ['not base64', 'not base64!', /not canonical single-line base64/],
    [
      'wrapped base64',
      sign('sha256', Buffer.from(`${ts}GET/v1/clients/`), registered).toString('base64').replace(/(.{64})/g, '$1\n').trim().replaceAll('\n', ' '),
      /not canonical single-line base64/
    ]
  ]
  for (const [label, signature, detail] of cases) {
    const res = await send(gw.url, '/v1/clients/', {
      headers: { authorization: `Bearer ${token}`, 'x-api-key': apiKeyOf(registered), 'x-api-timestamp': ts, 'x-api-signature': signature }
    })
    t.equal(res.json().code, 'INVALID_SIGNATURE', label)
    t.match(res.json().detail, detail, label)
    t.equal(res.json().target, '/v1/clients/', `${label}: still says what was verified`)
  }
})

t.test('a signature broken over lines, as curl sends $(... | base64): the answer names X-API-Signature and the fix', async (t) => {
  const gw = await startStack(t, { store: 'memory', now: () => CLOCK })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  // GNU base64's output: lines of 76 characters; $(...) drops the last newline, not the others
  const wrapped = sign('sha256', Buffer.from(`${TS}GET/v1/clients/`), registered).toString('base64').replace(/(.{76})(?=.)/g, '$1\n')
  t.match(wrapped, /\n/, 'the signature holds line breaks')
  const { host } = new URL(gw.url)
  const request = `GET /v1/clients/ HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n` +
    `Authorization: Bearer ${token}\r\nX-API-Key: ${apiKeyOf(registered)}\r\nX-API-Timestamp: ${TS}\r\nX-API-Signature: ${wrapped}\r\n\r\n`
  const answer = await exchange(gw.url, request)
  t.equal(answer.responses.length, 1, 'one answer, then the connection is closed')
  const res = answer.responses[0]
  if (res === undefined) throw new Error(`no answer: ${answer.raw.toString('latin1')}`)
  const problem = JSON.parse(res.body.toString('utf8')) as Record<string, unknown>
  t.equal(res.status, 400)
  t.match(problem, { code: 'MALFORMED_HTTP', status: 400 })
  t.match(problem.detail, /^X-API-Signature holds a line break/)
  t.match(problem.detail, /base64 -w0/)
  t.match(problem.detail, /openssl base64 -A/)
  t.equal(res.headers.connection, 'close')

  const generated = [`keygate answers \`${res.status}\`, \`${res.headers['content-type'] ?? ''}\`, and closes the connection:`, '',
    '```json', JSON.stringify(problem, null, 2), '```'].join('\n')
  guideShows(t, 'line-broken-signature', generated, 'docs/debugging-signatures.md shows keygate\'s answer to a line-broken signature')
})

t.test('a form body signed with the seed scheme: refused before the signature is checked, the answer names the byte and RFC 9421', async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startStack(t, { store: 'memory', now: () => CLOCK, upstreamUrl: recorder.url })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const registration = await registerKey(gw.url, token, testKeyPairOf(registered), 'laptop')
  t.equal(registration.status, 201)
  const body = 'name=Ada+Lovelace&email=ada%40example.com&tax_id=12345678'
  const res = await send(gw.url, '/v1/clients/', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'x-api-key': apiKeyOf(registered),
      'x-api-timestamp': TS,
      'x-api-signature': sign('sha256', Buffer.from(`${TS}POST/v1/clients/${body}`), registered).toString('base64'),
      'content-type': 'application/x-www-form-urlencoded'
    },
    body
  })
  const problem = res.json()
  t.equal(res.status, 400)
  t.equal(problem.code, 'AMBIGUOUS_SIGNED_BODY')
  t.match(problem.detail, /^The body starts with "n" \(0x6e\)/)
  t.match(problem.detail, /RFC 9421/)
  t.equal(recorder.requests.length, 0, 'nothing forwarded')

  const generated = [`keygate answers \`${res.status}\`, \`${res.headers['content-type'] ?? ''}\`:`, '',
    '```json', JSON.stringify(problem, null, 2), '```'].join('\n')
  guideShows(t, 'ambiguous-body', generated, 'docs/debugging-signatures.md shows keygate\'s answer to a form body under the seed scheme')
})
