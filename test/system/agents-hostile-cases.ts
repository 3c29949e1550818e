// The hostile agent directories of agents-hostile.test.ts, run by it inside a network namespace
// that holds only loopback (unshare -n), so that a faulty guard fails the test instead of reaching
// a metadata service or a private network. It refuses to run anywhere else.
//
// Here the hostile addresses are put on this namespace's loopback with "trap" HTTPS servers on
// them (port 443), each counting its connections and serving, to whoever reaches it, a directory
// that would verify (signed by the agent's key over the authority asked): a guard that lets a
// connection through shows as a trap's connection and as a request let in. 1.2.3.4 stands for a
// public host whose directories are hostile in other ways (redirect, size, time, type, signature),
// told apart by their Host. keygate runs in this process on the memory store (no Redis is reachable
// in here), with the test's resolver and CA, an `agents: any` route to a recorder upstream, and a
// good directory (good.test, pinned with privateAddress) whose agent must get in after each case.
// Prints one JSON line per case; the test judges them.
import { generateKeyPairSync } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { exportJWK, type JWK } from 'jose'
import { directoryResponseHeaders, HTTP_MESSAGE_SIGNATURES_DIRECTORY, helpers, jwkToKeyID, MediaType, signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import type { Resolver } from '../../gateway/src/net/guarded-fetch.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { startStack } from '../helpers/stack.js'
import { testCertificates } from '../helpers/test-ca.js'

const interfaces = Object.keys(networkInterfaces())
if (interfaces.length !== 1 || interfaces[0] !== 'lo') {
  console.error(`not in a network namespace with only loopback (interfaces: ${interfaces.join(', ')}): refusing to run`)
  process.exit(2)
}
const emit = (line: Record<string, unknown>): void => { console.log(JSON.stringify(line)) }
emit({ case: 'isolated', interfaces })

/** the addresses a trap listens on: none may ever be connected to (fe80::1 needs its zone) */
const TRAPS = ['169.254.169.254', '100.100.100.200', '10.0.0.1', '192.168.1.1', '127.0.0.1', '127.0.0.2', '::1', 'fe80::1%lo'] as const
const PUBLIC = '1.2.3.4'
for (const address of ['169.254.169.254', '100.100.100.200', '10.0.0.1', '192.168.1.1', PUBLIC]) {
  execFileSync('ip', ['addr', 'add', `${address}/32`, 'dev', 'lo'])
}
execFileSync('ip', ['addr', 'add', 'fe80::1/128', 'dev', 'lo', 'nodad'])

// ---- what the test controls: names, keys, certificates ----------------------------------------

interface HostileCase {
  name: string
  /** the Signature-Agent's origin */
  origin: string
  /** what the test's resolver answers for the origin's host: each call takes the next, the last stays */
  answers?: string[][]
  /** the resolver never answers */
  hangs?: boolean
  /** a second request naming it while the first one's fetch is under way */
  concurrent?: boolean
}
const named = (name: string, ...answers: string[][]): HostileCase => ({ name, origin: `https://${name}.test`, answers })
const CASES: HostileCase[] = [
  // first: they wait out keygate's 3 s while the others run
  { ...named('slow', [PUBLIC]), concurrent: true },
  named('slow-body', [PUBLIC]),
  { name: 'slow-dns', origin: 'https://slow-dns.test', hangs: true },
  named('metadata', ['169.254.169.254']),
  // an origin the operator lets in on a private address: a metadata address stays refused
  named('pinned-metadata', ['169.254.169.254']),
  named('metadata-alibaba', ['100.100.100.200']),
  named('metadata-mapped', ['::ffff:169.254.169.254']),
  named('loopback', ['127.0.0.2']),
  named('loopback-v6', ['::1']),
  named('private-10', ['10.0.0.1']),
  named('private-192', ['192.168.1.1']),
  named('link-local-v6', ['fe80::1%lo']),
  named('all-refused', ['127.0.0.1', '10.0.0.1', '192.168.1.1', '169.254.169.254', '::1']),
  // a public address that does not answer (no route here), then loopback: no fallback to the second
  named('public-unreachable-then-loopback', ['1.2.3.5', '127.0.0.2']),
  { name: 'literal-metadata', origin: 'https://169.254.169.254' },
  { name: 'literal-private', origin: 'https://10.0.0.1' },
  { name: 'literal-mapped', origin: 'https://[::ffff:a9fe:a9fe]' },
  named('redirect-metadata', [PUBLIC]),
  named('redirect-private', [PUBLIC]),
  named('redirect-same-origin', [PUBLIC]),
  named('too-large', [PUBLIC]),
  named('too-large-chunked', [PUBLIC]),
  named('unsigned', [PUBLIC]),
  named('wrong-type', [PUBLIC]),
  named('copied', [PUBLIC]),
  named('error-answer', [PUBLIC]),
  named('unresolvable')
]
// DNS rebinding: public when first asked (a good directory there), loopback every later time
const REBIND = named('rebinding', [PUBLIC], ['127.0.0.2'])
const GOOD_HOST = 'good.test'
// issue #40's budget cases, at the end: agents a route lists, one the agents file names (on loopback
// beside good.test), unknown agents with good directories (on the public address); made-up
// directories on a private address (addr-N.test) and on the public one (real-N.test)
const LISTED = ['listed.test', 'listed-late.test']
const FRESH = ['fresh.test', 'fresh-late.test']
const NAMED_HOST = 'good-named.test'

const { caPem, certPem, keyPem } = testCertificates([
  GOOD_HOST, NAMED_HOST, ...LISTED, ...FRESH, ...[...CASES, REBIND].map(({ origin }) => new URL(origin).hostname.replace(/^\[(.*)\]$/, '$1')).filter((host) => !host.includes(':')),
  '169.254.169.254', '10.0.0.1', '::ffff:169.254.169.254'
])

interface AgentKey { privateJwk: JWK, publicJwk: JWK, keyid: string }
async function agentKey (): Promise<AgentKey> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const publicJwk = await exportJWK(publicKey)
  return { privateJwk: await exportJWK(privateKey), publicJwk, keyid: await jwkToKeyID(publicJwk as never, helpers.WEBCRYPTO_SHA256, helpers.BASE64URL_DECODE) }
}
const key = await agentKey()
const rotated = await agentKey()

/** the directory of `published`, signed by them over `authority` (as web-bot-auth signs it) */
async function signedDirectory (authority: string, published: AgentKey[] = [key]): Promise<{ body: string, signature: string, input: string }> {
  const body = JSON.stringify({ keys: published.map((k) => k.publicJwk) })
  const url = `https://${authority}${HTTP_MESSAGE_SIGNATURES_DIRECTORY}`
  const response = new Response(body, { headers: { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY } })
  const now = new Date()
  const signers = await Promise.all(published.map(async (k) => await signerFromJWK(k.privateJwk)))
  const signed = await directoryResponseHeaders({ request: new Request(url), response } as never, signers,
    { created: now, expires: new Date(now.getTime() + 300_000) })
  return { body, signature: signed.Signature, input: signed['Signature-Input'] }
}
async function serveDirectory (req: IncomingMessage, res: ServerResponse, options: { authority?: string, type?: string } = {}): Promise<void> {
  const { body, signature, input } = await signedDirectory(options.authority ?? req.headers.host ?? '')
  res.writeHead(200, { 'content-type': options.type ?? MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY, signature, 'signature-input': input }).end(body)
}

// ---- servers ---------------------------------------------------------------------------------

interface Counted { connections: () => number, hosts: Map<string, number>, port: number, close: () => Promise<void> }
async function httpsServer (host: string, port: number, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Counted> {
  const server = createHttpsServer({ cert: certPem, key: keyPem }, (req, res) => {
    hosts.set(req.headers.host ?? '', (hosts.get(req.headers.host ?? '') ?? 0) + 1)
    handler(req, res)
  })
  let connections = 0
  const hosts = new Map<string, number>()
  server.on('connection', (socket) => { connections++; socket.on('error', () => undefined) })
  server.on('tlsClientError', () => undefined)
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(port, host, resolve) })
  return {
    connections: () => connections,
    hosts,
    port: (server.address() as AddressInfo).port,
    close: async () => { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)) }
  }
}

const traps = new Map<string, Counted>()
for (const address of TRAPS) traps.set(address, await httpsServer(address, 443, (req, res) => { void serveDirectory(req, res) }))

const LARGE = 70_000
const publicServer = await httpsServer(PUBLIC, 443, (req, res) => {
  const host = req.headers.host ?? ''
  if (req.url !== HTTP_MESSAGE_SIGNATURES_DIRECTORY) { res.writeHead(404).end(); return }
  switch (host) {
    case 'redirect-metadata.test': res.writeHead(302, { location: 'https://169.254.169.254/latest/meta-data/' }).end(); return
    case 'redirect-private.test': res.writeHead(307, { location: `https://private-10.test${HTTP_MESSAGE_SIGNATURES_DIRECTORY}` }).end(); return
    case 'redirect-same-origin.test': res.writeHead(301, { location: `${HTTP_MESSAGE_SIGNATURES_DIRECTORY}?again` }).end(); return
    case 'too-large.test':
      res.writeHead(200, { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY, 'content-length': String(LARGE) }).end(' '.repeat(LARGE))
      return
    case 'too-large-chunked.test': {
      res.writeHead(200, { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY })
      const timer = setInterval(() => res.write(' '.repeat(8192)), 5)
      res.on('close', () => clearInterval(timer))
      return
    }
    case 'slow.test': return // never answers
    case 'slow-body.test': {
      res.writeHead(200, { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY })
      res.write('{"keys":[')
      const timer = setInterval(() => res.write(' '), 500)
      res.on('close', () => clearInterval(timer))
      return
    }
    case 'unsigned.test':
      res.writeHead(200, { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY }).end(JSON.stringify({ keys: [key.publicJwk] }))
      return
    case 'wrong-type.test': void serveDirectory(req, res, { type: 'application/json' }); return
    case 'copied.test': void serveDirectory(req, res, { authority: GOOD_HOST }); return
    case 'error-answer.test': res.writeHead(500).end('internal details that must not be quoted'); return
    case 'rebinding.test': void serveDirectory(req, res); return
    default:
      if ([...LISTED, ...FRESH].includes(host)) void serveDirectory(req, res)
      else res.writeHead(404).end()
  }
})

const good = await httpsServer('127.0.0.1', 0, (req, res) => { void serveDirectory(req, res) })
const GOOD = `https://${GOOD_HOST}:${good.port}`

/** what the resolver was asked, by name */
const asked = new Map<string, number>()
const resolver: Resolver = async (hostname) => {
  const calls = (asked.get(hostname) ?? 0) + 1
  asked.set(hostname, calls)
  if (hostname === GOOD_HOST || hostname === NAMED_HOST) return [{ address: '127.0.0.1', family: 4 }]
  if ([...LISTED, ...FRESH].includes(hostname) || /^real-\d+\.test$/.test(hostname)) return [{ address: PUBLIC, family: 4 }]
  if (/^addr-\d+\.test$/.test(hostname)) return [{ address: '10.0.0.1', family: 4 }]
  const found = [...CASES, REBIND].find((one) => new URL(one.origin).hostname === hostname)
  if (found?.hangs === true) return await new Promise(() => undefined)
  const answers = found?.answers?.[Math.min(calls, found.answers.length) - 1]
  if (answers === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
  return answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
}

// ---- keygate ----------------------------------------------------------------------------------

const teardowns: Array<() => unknown> = []
const t = { teardown: (fn: () => unknown) => { teardowns.push(fn) } }
const recorder = await startRecorder(t)
const routes = routeFile(t, `routes:
  - { name: agents, prefix: /v1/agents/, upstream: ${recorder.url}, auth: agent, agents: any, methods: [GET] }
  - { name: listed, prefix: /v1/listed/, upstream: ${recorder.url}, auth: agent, agents: [${LISTED.map((h) => `https://${h}`).join(', ')}], methods: [GET] }
`)
const agentsFile = join(routes.path, '..', 'agents.yaml')
writeFileSync(agentsFile, `directories:
  - { origin: ${GOOD}, privateAddress: true }
  - { origin: https://pinned-metadata.test, privateAddress: true }
  - { origin: https://${NAMED_HOST}:${good.port}, privateAddress: true }
`)
const gw = await startStack(t, {
  store: 'memory',
  upstreamUrl: recorder.url,
  config: { routesFile: routes.path, agentDirectoriesFile: agentsFile },
  agentDirectories: { resolver, ca: caPem }
})
const host = new URL(gw.url).host

interface Answer { status: number, code?: string, detail?: string, retryAfter?: string, ms: number }
/** a GET of `path` signed by web-bot-auth as the agent of `origin`, sent to keygate */
async function send (path: string, origin: string, signer: AgentKey = key): Promise<Answer> {
  const headers: Record<string, string> = { 'signature-agent': JSON.stringify(origin) }
  const now = new Date()
  const signed = await signatureHeaders(new Request(`http://${host}${path}`, { headers }), await signerFromJWK(signer.privateJwk),
    { created: now, expires: new Date(now.getTime() + 60_000) })
  const started = performance.now()
  return await new Promise((resolve, reject) => {
    const outgoing = httpRequest(`${gw.url}${path}`, {
      headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] }
    }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { code?: string, detail?: string }
        resolve({
          status: response.statusCode ?? 0,
          ...(body.code !== undefined && { code: body.code }),
          ...(body.detail !== undefined && { detail: body.detail }),
          ...(response.headers['retry-after'] !== undefined && { retryAfter: response.headers['retry-after'] }),
          ms: Math.round(performance.now() - started)
        })
      })
    })
    outgoing.on('error', reject)
    outgoing.end()
  })
}
/** requests forwarded to the upstream at `path`, or under it */
const forwarded = (path: string): number => recorder.requests.filter((request) => request.url === path || request.url.startsWith(`${path}/`)).length
const trapConnections = (): Record<string, number> => Object.fromEntries([...traps].map(([address, trap]) => [address, trap.connections()]))

emit({ case: 'before', good: await send('/v1/agents/good/before', GOOD), traps: trapConnections() })

// each case: the hostile request; the same directory named again at once (its failure remembered:
// no new fetch); the good agent right after. All at once, but for the slow ones' bound.
await Promise.all(CASES.map(async (one) => {
  const path = `/v1/agents/hostile/${one.name}`
  const [first, concurrent] = await Promise.all([send(path, one.origin), one.concurrent === true ? send(`${path}/concurrent`, one.origin) : undefined])
  const hostname = new URL(one.origin).hostname
  const askedAfterFirst = asked.get(hostname) ?? 0
  const again = await send(`${path}/again`, one.origin)
  const goodAfter = await send(`/v1/agents/good/after-${one.name}`, GOOD)
  emit({
    case: one.name,
    first,
    ...(concurrent !== undefined && { concurrent }),
    again,
    resolved: askedAfterFirst,
    resolvedAgain: (asked.get(hostname) ?? 0) - askedAfterFirst,
    forwarded: forwarded(path),
    good: goodAfter.status,
    goodForwarded: forwarded(`/v1/agents/good/after-${one.name}`)
  })
}))

// DNS rebinding: the directory is first fetched from the public address; a key it does not hold
// makes keygate fetch it again, and the name now answers loopback: never connected to
{
  const loopbackBefore = traps.get('127.0.0.2')?.connections() ?? 0
  const first = await send('/v1/agents/hostile/rebinding', REBIND.origin)
  const refetch = await send('/v1/agents/hostile/rebinding/rotated', REBIND.origin, rotated)
  emit({
    case: 'rebinding',
    first,
    refetch,
    resolved: asked.get('rebinding.test') ?? 0,
    publicRequests: publicServer.hosts.get('rebinding.test') ?? 0,
    loopbackConnections: (traps.get('127.0.0.2')?.connections() ?? 0) - loopbackBefore,
    forwarded: forwarded('/v1/agents/hostile/rebinding/rotated'),
    good: (await send('/v1/agents/good/after-rebinding', GOOD)).status
  })
}

emit({
  case: 'after',
  traps: trapConnections(),
  publicHosts: Object.fromEntries(publicServer.hosts)
})

// issue #40: 200 requests naming made-up directories that the guard refuses by address (no
// connection) cost nothing from the 60-a-minute budget of new directories: right after, an agent
// the route lists and an unknown one both get in. Sent in batches of 50: a first fetch holds its
// place in the budget while its name is resolved.
const BUDGET = /at most 60 directories it does not hold a minute/
/** the codes of `requests` sent in batches of 50, and how many were refused for the budget */
async function flood (names: string[]): Promise<{ codes: Record<string, number>, budget: number }> {
  const codes: Record<string, number> = {}
  let budget = 0
  for (let i = 0; i < names.length; i += 50) {
    for (const answer of await Promise.all(names.slice(i, i + 50).map(async (name) => await send(`/v1/agents/flood/${name}`, `https://${name}`)))) {
      codes[answer.code ?? String(answer.status)] = (codes[answer.code ?? String(answer.status)] ?? 0) + 1
      if (BUDGET.test(answer.detail ?? '')) budget++
    }
  }
  return { codes, budget }
}
{
  const trapBefore = traps.get('10.0.0.1')?.connections() ?? 0
  const refused = await flood(Array.from({ length: 200 }, (_, i) => `addr-${i}.test`))
  const listed = await send('/v1/listed/first', `https://${LISTED[0] as string}`)
  const fresh = await send('/v1/agents/fresh', `https://${FRESH[0] as string}`)
  const askedBefore = asked.get('addr-7.test') ?? 0
  const again = await send('/v1/agents/flood/addr-7.test/again', 'https://addr-7.test')
  emit({
    case: 'flood-refused-by-address',
    ...refused,
    trapConnections: (traps.get('10.0.0.1')?.connections() ?? 0) - trapBefore,
    listed,
    listedForwarded: forwarded('/v1/listed/first'),
    fresh,
    again,
    resolvedAgain: (asked.get('addr-7.test') ?? 0) - askedBefore
  })
}
// the bound still holds for real fetches: 100 made-up directories on the public address, each a
// connection and a 404; then an unknown agent waits, but those the configuration names do not
{
  // (the test certificate does not name them: each is a connection that ends in its TLS handshake)
  const connectionsBefore = publicServer.connections()
  const real = await flood(Array.from({ length: 100 }, (_, i) => `real-${i}.test`))
  const fetched = publicServer.connections() - connectionsBefore
  emit({
    case: 'flood-real-fetches',
    ...real,
    fetched,
    freshLate: await send('/v1/agents/fresh-late', `https://${FRESH[1] as string}`),
    listedLate: await send('/v1/listed/late', `https://${LISTED[1] as string}`),
    namedByFile: await send('/v1/agents/named-by-file', `https://${NAMED_HOST}:${good.port}`)
  })
}

for (const fn of teardowns.reverse()) await fn()
for (const server of [...traps.values(), publicServer, good]) await server.close()
process.exit(0)
