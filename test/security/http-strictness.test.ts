// HTTP strictness and secrets in logs, against a running gateway (with its admin API and metrics
// listener) and a recording upstream, on raw sockets: what Node's parser lets through and keygate
// refuses (runs of spaces in the request line, an HTTP/0.9 line, another HTTP version, two Host
// headers, none on HTTP/1.1) is refused with 400 MALFORMED_HTTP on public, bearer, seed-signed and
// RFC 9421 routes alike, nothing forwarded, while bodies that hold such lines pass byte for byte;
// an RFC 9421 signature that covers a component twice is refused before verification; and no log
// line of any listener holds a credential sent in a query string or a header, while the rest of
// the URL is still logged.
import { createHash } from 'node:crypto'
import { connect } from 'node:net'
import { createSigner, httpbis } from 'http-message-signatures'
import t from 'tap'
import { loadConfig } from '../../gateway/src/config/env.js'
import { route } from '../../gateway/src/proxy/route.js'
import { startAdminGateway } from '../helpers/admin.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders, type TestKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { exchange, parseResponses, uniqueTimestamp } from '../helpers/security.js'
import { PASSWORD, login, registerKey } from '../helpers/stack.js'

const DEFAULTS = { bodyLimit: 64 * 1024, timeoutMs: 5000 }

/** RFC 9421 headers made by an independent implementation, covering `fields` as listed (repeats included). */
async function rfcHeaders (url: string, keys: TestKeyPair, token: string, method: string, target: string, fields: string[]): Promise<Record<string, string>> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, host: new URL(url).host }
  const created = new Date()
  const signed = await httpbis.signMessage({
    key: createSigner(keys.privateKey, 'rsa-v1_5-sha256', keys.apiKey),
    fields,
    params: ['keyid', 'alg', 'created', 'expires'],
    paramValues: { created, expires: new Date(created.getTime() + 300_000) }
  }, { method, url: url + target, headers })
  return Object.fromEntries(Object.entries(signed.headers).map(([name, value]) => [name.toLowerCase(), String(value)]))
}

const headerLines = (headers: Record<string, string>): string =>
  Object.entries(headers).filter(([name]) => name !== 'host').map(([name, value]) => `${name}: ${value}\r\n`).join('')

/**
 * What Node's parser lets through, or refuses itself, that keygate refuses with 400 MALFORMED_HTTP
 * whatever KEYGATE_STRICT_REQUEST_LINE says: each form for a target, with the route's credentials.
 */
function malformedForms (host: string): Array<[string, (target: string, creds: string) => string]> {
  return [
    ['an HTTP/0.9 request line (no version)', (target) => `GET ${target}\r\n\r\n`],
    ['an HTTP/0.9 request line followed by headers', (target, creds) => `GET ${target}\r\n${host}${creds}\r\n`],
    ['HTTP/2.0 in an HTTP/1 request line', (target, creds) => `GET ${target} HTTP/2.0\r\n${host}${creds}Connection: close\r\n\r\n`],
    ['two Host headers, different', (target, creds) => `GET ${target} HTTP/1.1\r\n${host}Host: evil.example\r\n${creds}Connection: close\r\n\r\n`],
    ['two Host headers, equal', (target, creds) => `GET ${target} HTTP/1.1\r\n${host}${host}${creds}Connection: close\r\n\r\n`],
    ['two Host headers, apart and in other cases',
      (target, creds) => `GET ${target} HTTP/1.1\r\n${host}${creds}HOST: evil.example\r\nConnection: close\r\n\r\n`],
    ['HTTP/1.1 without Host', (target, creds) => `GET ${target} HTTP/1.1\r\n${creds}Connection: close\r\n\r\n`],
    ['HTTP/1.0 with two Host headers', (target, creds) => `GET ${target} HTTP/1.0\r\n${host}Host: evil.example\r\n${creds}\r\n`],
    // whitespace in the request line other than single spaces: Node's parser refuses these itself
    ['a tab between method and target', (target, creds) => `GET\t${target} HTTP/1.1\r\n${host}${creds}Connection: close\r\n\r\n`],
    ['a space before the method', (target, creds) => ` GET ${target} HTTP/1.1\r\n${host}${creds}Connection: close\r\n\r\n`],
    ['a space after the version', (target, creds) => `GET ${target} HTTP/1.1 \r\n${host}${creds}Connection: close\r\n\r\n`],
    ['a vertical tab in the request line', (target, creds) => `GET ${target}\u000b HTTP/1.1\r\n${host}${creds}Connection: close\r\n\r\n`]
  ]
}

t.test('HTTP strictness and secrets in logs', async (t) => {
  const upstream = await startRecorder(t)
  const routes = [
    route({ name: 'public', prefix: '/public/', upstream: upstream.url, auth: 'public' }, DEFAULTS),
    route({ name: 'bearer', prefix: '/bearer/', upstream: upstream.url, auth: 'bearer' }, DEFAULTS),
    route({ name: 'seed', prefix: '/seed/', upstream: upstream.url, auth: 'signed', signature: 'seed' }, DEFAULTS),
    route({ name: 'rfc', prefix: '/rfc/', upstream: upstream.url, auth: 'signed', signature: 'rfc9421' }, DEFAULTS)
  ]
  // the request-line tracker on (KEYGATE_STRICT_REQUEST_LINE=on; off by default)
  const gw = await startAdminGateway(t, {
    upstreamUrl: upstream.url,
    routes,
    config: { metrics: { port: 0, host: '127.0.0.1' }, server: loadConfig({ KEYGATE_STRICT_REQUEST_LINE: 'on' }).server }
  })
  await gw.app.keygate.users.upsert('alice', PASSWORD)
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'strictness')).status, 201)

  /** The credential header lines a request to `target` needs on its route (fresh each time: no replay). */
  const credentials = async (target: string): Promise<string> => {
    if (target.startsWith('/bearer/')) return `Authorization: Bearer ${token}\r\n`
    if (target.startsWith('/seed/')) return headerLines(signedHeaders({ keys, token, method: 'GET', target, timestamp: uniqueTimestamp() }))
    if (target.startsWith('/rfc/')) return headerLines(await rfcHeaders(gw.url, keys, token, 'GET', target, ['@method', '@target-uri']))
    return ''
  }
  const host = `Host: ${new URL(gw.url).host}\r\n`

  t.test('each route serves a well-formed request, over HTTP/1.1 and HTTP/1.0 (the two versions keygate takes)', async (t) => {
    for (const version of ['HTTP/1.1', 'HTTP/1.0']) {
      for (const target of ['/public/ok', '/bearer/ok', '/seed/ok', '/rfc/ok']) {
        const before = upstream.requests.length
        const r = await exchange(gw.url, `GET ${target} ${version}\r\n${host}${await credentials(target)}Connection: close\r\n\r\n`)
        t.same(r.responses.map((res) => res.status), [200], `${version} ${target}: 200`)
        t.equal(upstream.requests.length - before, 1, `${version} ${target}: forwarded`)
      }
    }
  })

  t.test('refused with 400 MALFORMED_HTTP on every route, nothing forwarded', async (t) => {
    const cases = malformedForms(host)
    const before = upstream.requests.length
    const table: string[] = []
    for (const [name, bytes] of cases) {
      for (const target of ['/public/x', '/bearer/x', '/seed/x', '/rfc/x']) {
        const r = await exchange(gw.url, Buffer.from(bytes(target, await credentials(target)), 'latin1'), { timeoutMs: 3000 })
        const got = r.responses.map((res) => `${res.status} ${/"code":"([A-Z_]+)"/.exec(res.body.toString())?.[1] ?? '-'}`)
        table.push(`${name.padEnd(48)} ${target.padEnd(10)} ${got.join(', ') || 'no answer'}`)
        t.same(got, ['400 MALFORMED_HTTP'], `${name}, ${target}: 400 MALFORMED_HTTP`)
      }
    }
    t.comment('\n' + table.join('\n'))
    t.equal(upstream.requests.length - before, 0, `${cases.length * 4} requests: none reached the upstream`)
  })

  t.test('runs of spaces in the request line: 400 MALFORMED_HTTP on every route, signed or not, nothing forwarded', async (t) => {
    // Node's parser reads them as one space and says nothing; the request-line tracker saw them
    const lines: Array<(target: string) => string> = [
      (target) => `GET  ${target} HTTP/1.1`,
      (target) => `GET ${target}  HTTP/1.1`,
      (target) => `GET   ${target}   HTTP/1.1`,
      (target) => `GET  ${target} HTTP/1.0`
    ]
    const before = upstream.requests.length
    const table: string[] = []
    for (const line of lines) {
      for (const target of ['/public/sp', '/bearer/sp', '/seed/sp', '/rfc/sp']) {
        // the credentials are valid for GET on that target: only the spacing is wrong
        const r = await exchange(gw.url, `${line(target)}\r\n${host}${await credentials(target)}Connection: close\r\n\r\n`, { timeoutMs: 3000 })
        const got = r.responses.map((res) => `${res.status} ${/"code":"([A-Z_]+)"/.exec(res.body.toString())?.[1] ?? '-'}`)
        table.push(`${JSON.stringify(line(target)).padEnd(30)} ${got.join(', ') || 'no answer'}`)
        t.same(got, ['400 MALFORMED_HTTP'], `${JSON.stringify(line(target))}: 400 MALFORMED_HTTP`)
      }
    }
    // a seed-signed POST with a body, signed for exactly that method, target and body
    const body = '{"name":"Ada","email":"ada@example.com","tax_id":"123"}'
    const signed = headerLines(signedHeaders({ keys, token, method: 'POST', target: '/seed/clients/', body, timestamp: uniqueTimestamp() }))
    const jsonHead = `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`
    const post = await exchange(gw.url, `POST  /seed/clients/ HTTP/1.1\r\n${host}${signed}${jsonHead}Connection: close\r\n\r\n${body}`)
    t.same(post.responses.map((res) => res.status), [400], 'a signed POST with a spaced line: 400')
    t.equal(JSON.parse(post.responses[0]?.body.toString() ?? '{}').code, 'MALFORMED_HTTP')
    t.comment('\n' + table.join('\n'))
    t.equal(upstream.requests.length - before, 0, `${lines.length * 4 + 1} requests: none reached the upstream`)
  })

  t.test('a spaced line sent a byte at a time, and one pipelined behind a good request on one connection', async (t) => {
    const before = upstream.requests.length
    const { hostname, port } = new URL(gw.url)
    const socket = connect(Number(port), hostname)
    socket.setNoDelay(true)
    const answer = new Promise<Buffer>((resolve) => {
      const chunks: Buffer[] = []
      socket.on('data', (chunk: Buffer) => chunks.push(chunk))
      socket.on('close', () => { resolve(Buffer.concat(chunks)) })
    })
    for (const byte of Buffer.from(`GET /seed/y  HTTP/1.1\r\n${host}${await credentials('/seed/y')}Connection: close\r\n\r\n`, 'latin1')) {
      await new Promise<void>((resolve) => socket.write(Buffer.of(byte), () => { resolve() }))
    }
    const bytewise = parseResponses(await answer).responses
    t.same(bytewise.map((res) => res.status), [400], 'a byte at a time: 400')

    // on one connection: each request gets its own answer, in order; the spaced one alone is refused (the
    // framing is Node's either way, so the connection stays usable, as after any other refusal)
    const good = `GET /seed/first HTTP/1.1\r\n${host}${await credentials('/seed/first')}\r\n`
    const bad = `GET  /seed/second HTTP/1.1\r\n${host}${await credentials('/seed/second')}\r\n`
    const after = `GET /public/third HTTP/1.1\r\n${host}Connection: close\r\n\r\n`
    const r = await exchange(gw.url, good + bad + after)
    const got = r.responses.map((res) => `${res.status} ${/"code":"([A-Z_]+)"/.exec(res.body.toString())?.[1] ?? '-'}`)
    t.same(got, ['200 -', '400 MALFORMED_HTTP', '200 -'], 'the good request\'s 200, the spaced one\'s 400, the next one\'s 200, in that order')
    const forwarded = upstream.requests.slice(before).map((req) => req.url).sort()
    t.same(forwarded, ['/public/third', '/seed/first'], 'the good ones forwarded once each, the spaced one not')
  })

  t.test('bodies holding such lines are bodies: forwarded byte for byte, and the next request is read where it starts', async (t) => {
    const smuggled = 'GET  /bearer/x HTTP/1.1\r\nHost: keygate.test\r\n\r\n'
    const lengthBody = `${smuggled}GET /bearer/x  HTTP/1.1\r\n\r\n`
    const chunkedData = [`${smuggled}0\r\n`, '\r\nPOST  /public/z HTTP/1.1\r\n']
    const chunked = chunkedData.map((part) => `${part.length.toString(16)};ext=1\r\n${part}\r\n`).join('') + '0\r\nX-Trailer: GET  /t HTTP/1.1\r\n\r\n'
    const before = upstream.requests.length
    const r = await exchange(gw.url,
      `POST /public/length HTTP/1.1\r\n${host}Content-Length: ${lengthBody.length}\r\n\r\n${lengthBody}` +
      `POST /public/chunked HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\n\r\n${chunked}` +
      `GET /public/last HTTP/1.1\r\n${host}Connection: close\r\n\r\n`)
    t.same(r.responses.map((res) => res.status), [200, 200, 200], 'three requests, three 200s')
    // pipelined requests are forwarded side by side: found by target
    const forwarded = (url: string): string | undefined => upstream.requests.slice(before).find((req) => req.url === url)?.body.toString('latin1')
    t.equal(upstream.requests.length - before, 3, 'three forwarded')
    t.equal(forwarded('/public/length'), lengthBody, 'the Content-Length body, byte for byte')
    t.equal(forwarded('/public/chunked'), chunkedData.join(''), 'the chunked body\'s data, byte for byte')
    t.equal(forwarded('/public/last'), '', 'and the request after them')
  })

  t.test('the admin API refuses a spaced line too', async (t) => {
    const adminHeadFirst = `Host: ${new URL(gw.adminUrl).host}\r\nAuthorization: Bearer ${gw.token}\r\n`
    const r = await exchange(gw.adminUrl, `GET  /v1/users HTTP/1.1\r\n${adminHeadFirst}Connection: close\r\n\r\n`)
    t.same(r.responses.map((res) => res.status), [400])
    t.equal(JSON.parse(r.responses[0]?.body.toString() ?? '{}').code, 'MALFORMED_HTTP')
    const adminHead = `Host: ${new URL(gw.adminUrl).host}\r\nAuthorization: Bearer ${gw.token}\r\n`
    const fine = await exchange(gw.adminUrl, `GET /v1/users HTTP/1.1\r\n${adminHead}Connection: close\r\n\r\n`)
    t.same(fine.responses.map((res) => res.status), [200], 'the same request with single spaces: 200')
  })

  t.test('RFC 9421: a Signature-Input that covers a component twice is refused before verification', async (t) => {
    const before = upstream.requests.length
    for (const fields of [['@method', '@target-uri', '@target-uri'], ['@method', '@method', '@target-uri'], ['@method', '@target-uri', 'host', 'host']]) {
      // a valid signature over that very signature base: only the repeat is wrong
      const headers = await rfcHeaders(gw.url, keys, token, 'GET', '/rfc/twice', fields)
      const res = await send(gw.url, '/rfc/twice', { headers })
      t.equal(res.status, 401, `${fields.join(' ')}: 401`)
      t.equal(res.json().code, 'INVALID_SIGNATURE')
      const repeated = fields.find((f, i) => fields.indexOf(f) !== i)
      t.equal(res.json().repeatedComponent, `"${repeated}"`, 'the problem names the repeated component')
    }
    // the same signer, the same components once each: accepted (so the refusals above are the repeat's)
    const once = await send(gw.url, '/rfc/once', { headers: await rfcHeaders(gw.url, keys, token, 'GET', '/rfc/once', ['@method', '@target-uri', 'host']) })
    t.equal(once.status, 200, 'each component once: 200')
    t.same(upstream.requests.slice(before).map((r) => r.url), ['/rfc/once'], 'only the well-formed one was forwarded')
  })

  t.test('no log line of any listener holds a credential; the rest of the URL is logged', async (t) => {
    const secrets = {
      query: 'Q1-' + createHash('sha256').update('query').digest('hex'),
      accessToken: 'Q2-' + createHash('sha256').update('access').digest('hex'),
      apiKeyParam: 'Q3-secret-in-api_key',
      bearer: 'H1-not-a-real-token',
      signature: 'H2-c2lnbmF0dXJl',
      cookie: 'H3-cookie-session',
      adminQuery: 'A1-' + createHash('sha256').update('admin').digest('hex'),
      adminHeader: 'A2-wrong-admin-token-of-enough-length-000000',
      metricsQuery: 'M1-metrics-secret'
    }
    // public: a token and an access_token in the query, a cookie
    await send(gw.url, `/public/logged?token=${secrets.query}&limit=5&access_token=${secrets.accessToken}`, {
      headers: { cookie: `session=${secrets.cookie}` }
    })
    // bearer: a forged token, refused; an api_key in the query
    await send(gw.url, `/bearer/logged?api_key=${secrets.apiKeyParam}&page=2`, { headers: { authorization: `Bearer ${secrets.bearer}` } })
    // seed-signed: a signature that does not verify, refused
    await send(gw.url, '/seed/logged?sort=name', {
      headers: {
        ...signedHeaders({ keys, token, method: 'GET', target: '/seed/logged?sort=name', timestamp: uniqueTimestamp() }),
        'x-api-signature': secrets.signature
      }
    })
    // admin: the admin token in the query string (refused: it goes in Authorization), and a wrong one in Authorization
    const adminRefused = await send(gw.adminUrl, `/v1/users?token=${secrets.adminQuery}&limit=10`)
    t.equal(adminRefused.status, 401)
    await send(gw.adminUrl, '/v1/users?limit=10', { headers: { authorization: `Bearer ${secrets.adminHeader}` } })
    // metrics
    t.ok(gw.metricsUrl !== undefined, 'the metrics listener runs')
    await send(gw.metricsUrl ?? '', `/metrics?token=${secrets.metricsQuery}`)
    await send(gw.metricsUrl ?? '', `/nothing?token=${secrets.metricsQuery}`)

    const everything = gw.raw()
    for (const [what, secret] of Object.entries(secrets)) t.notOk(everything.includes(secret), `no log line holds ${what}`)
    const urls = gw.lines.flatMap((line) => {
      const admin = line.admin as { url?: string } | undefined
      return [line.url, admin?.url].filter((u): u is string => typeof u === 'string')
    })
    t.ok(urls.includes('/public/logged?token=[redacted]&limit=5&access_token=[redacted]'), 'the public URL, its credentials redacted, the rest as sent')
    t.ok(urls.includes('/bearer/logged?api_key=[redacted]&page=2'), 'the bearer route\'s URL likewise')
    t.ok(urls.includes('/seed/logged?sort=name'), 'a URL without credentials is logged as sent')
    t.ok(urls.includes('/v1/users?token=[redacted]&limit=10'), 'the admin API\'s refusal line: the URL, the token redacted')
    t.ok(urls.includes('/v1/users?limit=10'), 'and the other refusal as sent')
  })
})

t.test('KEYGATE_STRICT_REQUEST_LINE=off (the default): a spaced line served as the single-spaced one; every other malformed form still 400', async (t) => {
  const upstream = await startRecorder(t)
  const base = loadConfig({ KEYGATE_STRICT_REQUEST_LINE: 'off' })
  t.equal(base.server.strictRequestLine, false, 'the variable turns the check off')
  t.equal(loadConfig({}).server.strictRequestLine, false, 'off by default')
  t.equal(loadConfig({ KEYGATE_STRICT_REQUEST_LINE: 'on' }).server.strictRequestLine, true, 'on by choice')
  const gw = await startAdminGateway(t, {
    upstreamUrl: upstream.url,
    routes: [route({ name: 'public', prefix: '/public/', upstream: upstream.url, auth: 'public' }, DEFAULTS)],
    config: { server: base.server }
  })
  const r = await exchange(gw.url, `GET  /public/lenient HTTP/1.1\r\nHost: ${new URL(gw.url).host}\r\nConnection: close\r\n\r\n`)
  t.same(r.responses.map((res) => res.status), [200], 'served')
  t.same(upstream.requests.map((req) => req.url), ['/public/lenient'], 'forwarded with the line keygate writes (single spaces)')
  // HTTP/0.9, another version, two Host, no Host, and what Node's parser refuses: no tracker needed
  const host = `Host: ${new URL(gw.url).host}\r\n`
  for (const [name, bytes] of malformedForms(host)) {
    const r = await exchange(gw.url, Buffer.from(bytes('/public/x', ''), 'latin1'), { timeoutMs: 3000 })
    const got = r.responses.map((res) => `${res.status} ${/"code":"([A-Z_]+)"/.exec(res.body.toString())?.[1] ?? '-'}`)
    t.same(got, ['400 MALFORMED_HTTP'], `${name}: 400 MALFORMED_HTTP with the tracker off`)
  }
  t.same(upstream.requests.map((req) => req.url), ['/public/lenient'], 'none of them forwarded')
})
