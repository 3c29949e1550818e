// guardedFetch against real HTTPS servers on 127.0.0.1, reached through names only the test's
// resolver knows (agent.test): what a pinned origin is fetched with, and each refusal. The cases
// where a faulty guard would send packets elsewhere (private, metadata and public addresses, DNS
// rebinding) run in a network namespace with only loopback: hostile-fetches.ts, at the end.
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { netnsOptedOut, noNamespace, runInNamespace } from '../../../helpers/netns.js'
import { guardedFetch, GuardedFetchError, type GuardedFetchOptions, type Resolver } from '../../../../gateway/src/net/guarded-fetch.js'
import { certificates, startHttpsServer, startSilentServer, type TestServer } from './servers.js'

/** agent.test and other.test at 127.0.0.1; counts its calls */
function loopbackResolver (): Resolver & { calls: string[] } {
  const calls: string[] = []
  const resolver = async (hostname: string): ReturnType<Resolver> => {
    calls.push(hostname)
    if (hostname === 'agent.test' || hostname === 'other.test') return [{ address: '127.0.0.1', family: 4 }]
    throw new Error(`ENOTFOUND ${hostname}`)
  }
  return Object.assign(resolver, { calls })
}

async function refusal (t: Test, promise: Promise<unknown>): Promise<GuardedFetchError> {
  try {
    await promise
  } catch (err) {
    t.ok(err instanceof GuardedFetchError, `a GuardedFetchError (${(err as Error).message})`)
    return err as GuardedFetchError
  }
  t.fail('fetched: expected a refusal')
  throw new Error('fetched')
}

const SECRET = 'body-that-must-not-be-quoted'

let server: TestServer
t.before(async () => {
  server = await startHttpsServer('127.0.0.1', 0, (req, res) => {
    const path = req.url ?? '/'
    if (path === '/directory') {
      res.writeHead(200, { 'content-type': 'application/http-message-signatures-directory+json' }).end('{"keys":[]}')
    } else if (path === '/echo') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ accept: req.headers.accept, x: req.headers['x-test'] }))
    } else if (path === '/hop') {
      res.writeHead(302, { location: '/directory' }).end(SECRET)
    } else if (path === '/hop-twice') {
      res.writeHead(307, { location: 'https://agent.test:' + String(server.port) + '/hop' }).end()
    } else if (path === '/elsewhere') {
      res.writeHead(301, { location: 'https://other.test:' + String(server.port) + '/directory' }).end()
    } else if (path === '/large') {
      res.writeHead(200, { 'content-length': '2000' }).end('x'.repeat(2000))
    } else if (path === '/stream') {
      res.writeHead(200) // chunked: no Content-Length
      const timer = setInterval(() => res.write('x'.repeat(400)), 5)
      res.on('close', () => clearInterval(timer))
    } else if (path === '/hang') {
      // never answers
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(SECRET)
    }
  })
})
t.teardown(async () => await server.close())

const base = (): string => `https://agent.test:${server.port}`
const pinned = (extra: Partial<GuardedFetchOptions> = {}): GuardedFetchOptions => ({
  resolver: loopbackResolver(),
  allowedPrivateOrigins: [base()],
  ca: certificates().caPem,
  timeoutMs: 2000,
  ...extra
})

t.test('a pinned origin on loopback is fetched: status, headers, body, final URL, the address connected to', async (t) => {
  const resolver = loopbackResolver()
  const response = await guardedFetch(`${base()}/directory#fragment`, pinned({ resolver }))
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'application/http-message-signatures-directory+json')
  t.equal(response.body.toString(), '{"keys":[]}')
  t.equal(response.url, `${base()}/directory`, 'the fragment is not sent')
  t.equal(response.address, '127.0.0.1')
  t.same(resolver.calls, ['agent.test'], 'the name resolved once, by the connection')
  const echoed = await guardedFetch(`${base()}/echo`, pinned({ accept: 'application/json', headers: { 'x-test': 'yes' } }))
  t.same(JSON.parse(echoed.body.toString()), { accept: 'application/json', x: 'yes' }, 'accept and headers sent')
})

t.test('the same origin unpinned is refused as loopback, with no connection made', async (t) => {
  const before = server.connections()
  const err = await refusal(t, guardedFetch(`${base()}/directory`, pinned({ allowedPrivateOrigins: [] })))
  t.equal(err.reason, 'address')
  t.equal(err.detail.address, '127.0.0.1')
  t.match(err.message, `https://agent.test:${server.port}/directory: agent.test resolves to no address keygate may connect to: 127.0.0.1 is a loopback address`)
  const other = await refusal(t, guardedFetch(`${base()}/directory`, pinned({ allowedPrivateOrigins: ['https://agent.test'] })))
  t.equal(other.reason, 'address', 'a pin is for an origin: another port is another origin')
  const literal = await refusal(t, guardedFetch(`https://127.0.0.1:${server.port}/directory`, pinned()))
  t.equal(literal.reason, 'address', 'an IP-literal host is checked too')
  t.match(literal.message, '127.0.0.1 is a loopback address')
  t.same([err, other, literal].map((refused) => refused.refusedBeforeConnecting), [true, true, true], 'each says it was refused before connecting')
  t.equal(server.connections(), before, 'the server saw no connection')
})

t.test('https only, no credentials: refused before resolving', async (t) => {
  const resolver = loopbackResolver()
  for (const [url, reason] of [
    [`http://agent.test:${server.port}/directory`, 'scheme'],
    ['ftp://agent.test/directory', 'scheme'],
    ['file:///etc/passwd', 'scheme'],
    ['not a url', 'scheme'],
    [`https://user:secret@agent.test:${server.port}/directory`, 'credentials'],
    [`https://user@agent.test:${server.port}/directory`, 'credentials']
  ] as const) {
    const err = await refusal(t, guardedFetch(url, pinned({ resolver })))
    t.equal(err.reason, reason, url)
    t.equal(err.refusedBeforeConnecting, true, `${url}: refused before connecting`)
  }
  t.same(resolver.calls, [], 'nothing resolved')
})

t.test('redirects: none followed by default; same-origin ones only within maxRedirects; another origin never', async (t) => {
  const none = await refusal(t, guardedFetch(`${base()}/hop`, pinned()))
  t.equal(none.reason, 'redirect')
  t.match(none.message, 'answered 302, a redirect to /directory: redirects are not followed')
  t.notMatch(none.message, SECRET, 'the body is not quoted')
  const followed = await guardedFetch(`${base()}/hop`, pinned({ maxRedirects: 1 }))
  t.equal(followed.url, `${base()}/directory`)
  t.equal(followed.body.toString(), '{"keys":[]}')
  const tooMany = await refusal(t, guardedFetch(`${base()}/hop-twice`, pinned({ maxRedirects: 1 })))
  t.equal(tooMany.reason, 'redirect')
  t.match(tooMany.message, 'over 1 redirects')
  t.equal((await guardedFetch(`${base()}/hop-twice`, pinned({ maxRedirects: 2 }))).url, `${base()}/directory`)
  const resolver = loopbackResolver()
  const elsewhere = await refusal(t, guardedFetch(`${base()}/elsewhere`, pinned({
    resolver, maxRedirects: 5, allowedPrivateOrigins: [base(), `https://other.test:${server.port}`]
  })))
  t.equal(elsewhere.reason, 'redirect', 'another origin, even a pinned one')
  t.match(elsewhere.message, `a redirect to https://other.test:${server.port}/directory: not the same origin`)
  t.same(resolver.calls, ['agent.test'], 'other.test was never resolved')
})

t.test('too large: by Content-Length before reading, and by counting a body without one', async (t) => {
  const declared = await refusal(t, guardedFetch(`${base()}/large`, pinned({ maxBytes: 1000 })))
  t.equal(declared.reason, 'too-large')
  t.match(declared.message, 'is 2000 bytes (Content-Length), over the 1000 allowed')
  t.equal((await guardedFetch(`${base()}/large`, pinned({ maxBytes: 2000 }))).body.length, 2000, 'exactly maxBytes passes')
  const started = Date.now()
  const streamed = await refusal(t, guardedFetch(`${base()}/stream`, pinned({ maxBytes: 10_000 })))
  t.equal(streamed.reason, 'too-large')
  t.match(streamed.message, 'is over the 10000 bytes allowed')
  t.ok(Date.now() - started < 1500, 'refused as soon as the count passed, not at the timeout')
})

t.test('too slow: a server that never answers, one that never finishes TLS, a resolver that never answers: each ends at timeoutMs', async (t) => {
  const started = Date.now()
  const hang = await refusal(t, guardedFetch(`${base()}/hang`, pinned({ timeoutMs: 300 })))
  t.equal(hang.reason, 'timeout')
  t.match(hang.message, `${base()}/hang: did not answer within 300 ms`)
  const silent = await startSilentServer('127.0.0.1', 0)
  t.teardown(async () => await silent.close())
  const origin = `https://agent.test:${silent.port}`
  const handshake = await refusal(t, guardedFetch(`${origin}/`, pinned({ timeoutMs: 300, allowedPrivateOrigins: [origin] })))
  t.equal(handshake.reason, 'timeout')
  t.equal(silent.connections(), 1)
  const never = await refusal(t, guardedFetch(`${base()}/directory`, pinned({ timeoutMs: 300, resolver: async () => await new Promise(() => {}) })))
  t.equal(never.reason, 'timeout', 'a resolver that never answers')
  t.ok(Date.now() - started < 2000, `both within their bounds (${Date.now() - started} ms)`)
})

t.test('a status other than 2xx is refused without quoting the body', async (t) => {
  const err = await refusal(t, guardedFetch(`${base()}/missing`, pinned()))
  t.equal(err.reason, 'status')
  t.equal(err.detail.status, 404)
  t.equal(err.message, `${base()}/missing: answered 404`)
})

t.test('TLS: the certificate is checked against the host name, and against the trusted CAs', async (t) => {
  const resolver: Resolver = async () => [{ address: '127.0.0.1', family: 4 }]
  const origin = `https://unnamed.test:${server.port}`
  const wrongName = await refusal(t, guardedFetch(`${origin}/directory`, pinned({ resolver, allowedPrivateOrigins: [origin] })))
  t.equal(wrongName.reason, 'tls')
  t.match(wrongName.message, /unnamed\.test/)
  const untrusted = await refusal(t, guardedFetch(`${base()}/directory`, pinned({ ca: undefined })))
  t.equal(untrusted.reason, 'tls')
})

t.test('resolving: a failure or no address is a resolve refusal; a connection refused is a connect one', async (t) => {
  const failing = await refusal(t, guardedFetch('https://nowhere.test/', pinned({ allowedPrivateOrigins: ['https://nowhere.test'] })))
  t.equal(failing.reason, 'resolve')
  t.match(failing.message, 'https://nowhere.test/: nowhere.test did not resolve: ENOTFOUND nowhere.test')
  const empty = await refusal(t, guardedFetch(`${base()}/`, pinned({ resolver: async () => [] })))
  t.equal(empty.reason, 'resolve')
  const closed = await startSilentServer('127.0.0.1', 0)
  const port = closed.port
  await closed.close()
  const origin = `https://agent.test:${port}`
  const refused = await refusal(t, guardedFetch(`${origin}/`, pinned({ allowedPrivateOrigins: [origin] })))
  t.equal(refused.reason, 'connect')
  t.match(refused.message, 'ECONNREFUSED')
  // a lookup that failed went out (and may have taken the whole timeout): not a refusal before connecting
  t.same([failing, empty, refused].map((err) => err.refusedBeforeConnecting), [false, false, false], 'none of these was refused before connecting')
})

t.test('options are checked', async (t) => {
  await t.rejects(guardedFetch(`${base()}/`, { timeoutMs: -1 }), RangeError)
  await t.rejects(guardedFetch(`${base()}/`, { maxRedirects: 1.5 }), RangeError)
})

const missing = noNamespace()
const optedOut = netnsOptedOut()

t.test('hostile names and addresses, in a network namespace with only loopback', {
  skip: missing !== undefined && optedOut ? `skipped by KEYGATE_TEST_NO_NETNS=1: no network namespace here (${missing})` : false
}, async (t) => {
  if (missing !== undefined) {
    t.fail(`these cases run only where no packet can leave the machine: ${missing}. Run the tests as root, or set KEYGATE_TEST_NO_NETNS=1 to skip them`)
    return
  }
  const run = runInNamespace(fileURLToPath(new URL('hostile-fetches.ts', import.meta.url)))
  t.equal(run.status, 0, `the script ran to its end${run.status === 0 ? '' : `: ${run.stderr}`}`)
  const results = run.results
  const result = (name: string): Record<string, unknown> => {
    const found = results.get(name)
    if (found === undefined) t.fail(`no result for ${name}`)
    return found ?? {}
  }

  t.same(result('isolated'), { case: 'isolated', interfaces: ['lo'] }, 'the namespace holds loopback only')

  t.test('a name resolving to a metadata address', async (t) => {
    t.match(result('metadata'), { reason: 'address', address: '169.254.169.254', message: /169\.254\.169\.254 is a link-local \(metadata\) address/ })
    t.match(result('metadata-pinned'), { reason: 'address', message: /169\.254\.169\.254 is a link-local \(metadata\) address \(refused even for a pinned origin\)/ })
    t.match(result('metadata-v6'), { reason: 'address', message: /fd00:ec2::254 is a unique-local \(metadata\) address/ })
  })
  t.test('IP-literal hosts: private, metadata, mapped, NAT64', async (t) => {
    for (const name of ['literal-private', 'literal-metadata', 'literal-mapped', 'literal-nat64', 'literal-v6-loopback']) {
      t.match(result(name), { reason: 'address', connections: 0 }, name)
    }
    t.match(result('literal-mapped'), { message: /an IPv4-mapped address of 169\.254\.169\.254, a link-local \(metadata\) address/ })
  })
  t.test('private and public answers: only the public one is tried', async (t) => {
    t.match(result('mixed'), { ok: true, address: '1.2.3.4', body: 'public', privateConnections: 0 })
    t.match(result('mixed-unreachable'), { reason: 'connect', message: /1\.2\.3\.5/, privateConnections: 0 })
    t.match(result('only-private'), {
      reason: 'address', privateConnections: 0, message: /10\.0\.0\.1 is a private \(RFC 1918\) address; 127\.0\.0\.1 is a loopback address; ::1 is a loopback address/
    })
    t.match(result('v6-forms'), { reason: 'address', privateConnections: 0 })
  })
  t.test('DNS rebinding: a public answer, then loopback: the connection never goes to loopback', async (t) => {
    t.match(result('rebinding'), { reason: 'address', resolverCalls: 2, publicConnections: 1, loopbackConnections: 0, message: /127\.0\.0\.1 is a loopback address/ })
    t.match(result('rebinding-second-fetch'), { first: '1.2.3.4', reason: 'address', loopbackConnections: 0 })
  })
  t.test('a pinned origin may be on a private address', async (t) => {
    t.match(result('pinned-private'), { ok: true, address: '10.0.0.1', body: 'private' })
  })
})
