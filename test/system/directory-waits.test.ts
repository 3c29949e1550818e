// Issue 40, point 4, for signed agents' key directories: no request waits for a directory longer
// than one fetch timeout (3 s) in all, concurrent waiters share one fetch and its outcome, and
// after a failed fetch, within its back-off, a keyid the directory is not known to publish is
// answered at once. Directories served over HTTPS by the test (its own CA) under names only the
// test's resolver knows, signed by Cloudflare's web-bot-auth, agents' requests signed by it too;
// each directory answers or hangs (accepts the request and never answers) as the case needs.
// Time is the behaviour here: the bounds have wide margins, and the waits are printed.
import { generateKeyPairSync } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:https'
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { exportJWK, type JWK } from 'jose'
import t from 'tap'
import { directoryResponseHeaders, helpers, HTTP_MESSAGE_SIGNATURES_DIRECTORY, jwkToKeyID, MediaType, signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import { send } from '../helpers/http.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { startStack } from '../helpers/stack.js'
import { testCertificates } from '../helpers/test-ca.js'

const DIRECTORY_TIMEOUT_MS = 3000
/** what a busy two-core machine may add to a wait */
const MARGIN_MS = 2000

interface AgentKey { privateJwk: JWK, publicJwk: JWK, keyid: string }
async function agentKey (): Promise<AgentKey> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const publicJwk = await exportJWK(publicKey)
  return { privateJwk: await exportJWK(privateKey), publicJwk, keyid: await jwkToKeyID(publicJwk as never, helpers.WEBCRYPTO_SHA256, helpers.BASE64URL_DECODE) }
}
const key = await agentKey()
const rotated = await agentKey()

/** first.test answers its first request only; held.test while `heldAnswers`; hung.test never */
const NAMES = ['first.test', 'held.test', 'hung.test']
let heldAnswers = true
const requests = new Map<string, number>()
const hanging = new Set<ServerResponse>()
const { caPem, certPem, keyPem } = testCertificates(NAMES)
const server: Server = createServer({ cert: certPem, key: keyPem }, (req, res) => {
  const name = (req.headers.host ?? '').split(':')[0] ?? ''
  const count = (requests.get(name) ?? 0) + 1
  requests.set(name, count)
  const answers = (name === 'first.test' && count === 1) || (name === 'held.test' && heldAnswers)
  if (!answers || req.url !== HTTP_MESSAGE_SIGNATURES_DIRECTORY) {
    hanging.add(res)
    return
  }
  const body = JSON.stringify({ keys: [key.publicJwk] })
  const now = new Date()
  void signerFromJWK(key.privateJwk)
    .then(async (signer) => await directoryResponseHeaders({
      request: new Request(`https://${req.headers.host ?? ''}${req.url}`),
      response: new Response(body, { headers: { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY } })
    } as never, [signer], { created: now, expires: new Date(now.getTime() + 300_000) }))
    .then((signed) => {
      res.writeHead(200, {
        'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY,
        signature: signed.Signature,
        'signature-input': signed['Signature-Input']
      }).end(body)
    })
})
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
t.teardown(async () => {
  for (const res of hanging) res.destroy()
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})
const port = (server.address() as AddressInfo).port
const origin = (name: string): string => `https://${name}:${port}`
const resolver = async (hostname: string): Promise<Array<{ address: string, family: 4 | 6 }>> => {
  if (NAMES.includes(hostname)) return [{ address: '127.0.0.1', family: 4 }]
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
}

const recorder = await startRecorder(t)
const routes = routeFile(t, `routes:
  - { name: agents, prefix: /v1/agents/, upstream: ${recorder.url}, auth: agent, agents: any, methods: [GET] }
`)
const agentsFile = join(routes.path, '..', 'agents.yaml')
writeFileSync(agentsFile, `directories:\n${NAMES.map((name) => `  - { origin: ${origin(name)}, privateAddress: true }\n`).join('')}`)
const gw = await startStack(t, {
  store: 'memory',
  upstreamUrl: recorder.url,
  config: { routesFile: routes.path, agentDirectoriesFile: agentsFile },
  agentDirectories: { resolver, ca: caPem }
})
const host = new URL(gw.url).host

interface Answer { status: number, code: string | undefined, retryAfter: string | undefined, ms: number }
/** a GET of `path` signed by web-bot-auth as the agent of `name`, with `signer`'s key, sent to keygate */
async function agentGet (path: string, name: string, signer: AgentKey): Promise<Answer> {
  const headers: Record<string, string> = { 'signature-agent': JSON.stringify(origin(name)) }
  const now = new Date()
  const signed = await signatureHeaders(new Request(`http://${host}${path}`, { headers }), await signerFromJWK(signer.privateJwk),
    { created: now, expires: new Date(now.getTime() + 60_000) })
  const started = performance.now()
  const res = await send(gw.url, path, { headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] } })
  const ms = Math.round(performance.now() - started)
  const code = res.status === 200 ? undefined : res.json<{ code?: string }>().code
  return { status: res.status, code, retryAfter: res.headers['retry-after'] as string | undefined, ms }
}
const ten = async (path: string, name: string, signer: AgentKey): Promise<Answer[]> =>
  await Promise.all(Array.from({ length: 10 }, async (_, i) => await agentGet(`${path}/${i}`, name, signer)))
const kinds = (answers: Answer[]): string[] => [...new Set(answers.map((answer) => `${answer.status} ${answer.code ?? ''}`))]
const slowest = (answers: Answer[]): number => Math.max(...answers.map((answer) => answer.ms))

t.test('a directory that hangs on its first fetch: ten requests at once share it, each refused within one timeout', async (t) => {
  const answers = await ten('/v1/agents/hung', 'hung.test', key)
  t.comment(`ten at once, the directory hanging: slowest ${slowest(answers)} ms, ${requests.get('hung.test') ?? 0} fetch(es)`)
  t.same(kinds(answers), ['401 AGENT_DIRECTORY_UNAVAILABLE'], 'one outcome for all')
  t.ok(slowest(answers) < DIRECTORY_TIMEOUT_MS + MARGIN_MS, `none waited past one fetch timeout (${slowest(answers)} ms)`)
  t.equal(requests.get('hung.test'), 1, 'one fetch')
  const again = await agentGet('/v1/agents/hung/again', 'hung.test', key)
  t.ok(again.ms < 1000 && again.code === 'AGENT_DIRECTORY_UNAVAILABLE', `named again: answered at once (${again.ms} ms)`)
})

t.test('a keyid the first fetch did not find: answered from that fetch, no second fetch to wait for', async (t) => {
  const answer = await agentGet('/v1/agents/first', 'first.test', rotated)
  t.comment(`a keyid its directory does not publish, on its first fetch: ${answer.status} ${answer.code ?? ''} in ${answer.ms} ms, ` +
    `${requests.get('first.test') ?? 0} fetch(es)`)
  t.match(answer, { status: 401, code: 'UNKNOWN_AGENT_KEY' })
  t.ok(answer.ms < DIRECTORY_TIMEOUT_MS, `not a second fetch's wait on top (${answer.ms} ms)`)
  t.equal(requests.get('first.test'), 1, 'one fetch')
  t.equal((await agentGet('/v1/agents/first/known', 'first.test', key)).status, 200, 'its published key verifies')
})

t.test('a directory held, then hanging: ten new keyids at once share one fetch; in its back-off, answered at once', async (t) => {
  t.equal((await agentGet('/v1/agents/held', 'held.test', key)).status, 200, 'fetched, and its key verifies')
  heldAnswers = false
  const before = requests.get('held.test') ?? 0
  const answers = await ten('/v1/agents/held/rotated', 'held.test', rotated)
  const fetches = (requests.get('held.test') ?? 0) - before
  t.comment(`ten with a keyid not held, the directory hanging: slowest ${slowest(answers)} ms, ${fetches} fetch(es), ${kinds(answers).join(', ')}`)
  t.same(kinds(answers), ['401 AGENT_DIRECTORY_UNAVAILABLE'], 'one outcome for all: the directory could not be checked for the key')
  t.ok(answers.every((answer) => /^[1-9][0-9]*$/.test(answer.retryAfter ?? '')), 'each with Retry-After')
  t.ok(slowest(answers) < DIRECTORY_TIMEOUT_MS + MARGIN_MS, `none waited past one fetch timeout (${slowest(answers)} ms)`)
  t.equal(fetches, 1, 'one fetch for the ten')
  const later = await agentGet('/v1/agents/held/later', 'held.test', rotated)
  t.match(later, { status: 401, code: 'AGENT_DIRECTORY_UNAVAILABLE', retryAfter: /^[1-9][0-9]*$/ }, 'in the back-off: the same answer')
  t.ok(later.ms < 1000, `at once (${later.ms} ms)`)
  t.equal((requests.get('held.test') ?? 0) - before, 1, 'and no fetch')
  t.equal((await agentGet('/v1/agents/held/known', 'held.test', key)).status, 200, 'the key held still verifies')
})
