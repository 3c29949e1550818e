// Signed agents, stage by stage, signed by Cloudflare's web-bot-auth package (not keygate's code):
// its request signatures (tag web-bot-auth, Signature-Agent covered) and its directory's own
// signature (directoryResponseHeaders), served by an injected fetch (the HTTPS fetch with its
// address guard is tested in the system test). What each refusal says, and what the one accepted
// request leaves: the agent, and a replay mark that refuses the same signature again.
import { generateKeyPairSync } from 'node:crypto'
import { exportJWK, type JWK } from 'jose'
import t from 'tap'
import { directoryResponseHeaders, helpers, HTTP_MESSAGE_SIGNATURES_DIRECTORY, jwkToKeyID, MediaType, signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import { createAgentDirectories, type AgentDirectories } from '../../../../gateway/src/agents/agent-directories.js'
import { signatureAgentOf } from '../../../../gateway/src/agents/signature-agent.js'
import { agentKeyStage, agentSignatureHeadersStage, agentVerificationStage, type AgentAllowance } from '../../../../gateway/src/auth/agent-signature.js'
import { directoryCheck } from '../../../../gateway/src/auth/directory-signature.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { captureGatewayError, describedRequest } from '../../../helpers/auth-fixtures.js'

const AGENT = 'https://agent.test'
const HOST = 'api.example.com'

async function agentKey (): Promise<{ privateJwk: JWK, publicJwk: JWK, keyid: string }> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const privateJwk = await exportJWK(privateKey)
  const publicJwk = await exportJWK(publicKey)
  // the keyid as web-bot-auth computes it (RFC 7638), not as keygate does
  const keyid = await jwkToKeyID(publicJwk as never, helpers.WEBCRYPTO_SHA256, helpers.BASE64URL_DECODE)
  return { privateJwk, publicJwk, keyid }
}

/** The directory of AGENT as web-bot-auth signs it, answered by an injected fetch that counts its calls. */
async function directoryServer (keys: () => Array<{ privateJwk: JWK, publicJwk: JWK }>, options: { unsigned?: boolean, contentType?: string } = {}) {
  const served = { calls: 0, urls: [] as string[] }
  const fetch: typeof globalThis.fetch = async (input) => {
    served.calls++
    const url = String(input)
    served.urls.push(url)
    if (url !== `${AGENT}${HTTP_MESSAGE_SIGNATURES_DIRECTORY}`) return new Response('no', { status: 404 })
    const current = keys()
    const response = new Response(JSON.stringify({ keys: current.map((key) => key.publicJwk) }), {
      headers: { 'content-type': options.contentType ?? MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY, 'cache-control': 'max-age=300' }
    })
    if (options.unsigned === true) return response
    const now = new Date()
    const signed = await directoryResponseHeaders({ request: new Request(url), response } as never,
      await Promise.all(current.map(async (key) => await signerFromJWK(key.privateJwk))), { created: now, expires: new Date(now.getTime() + 300_000) })
    response.headers.set('signature', signed.Signature)
    response.headers.set('signature-input', signed['Signature-Input'])
    return response
  }
  return { fetch, served }
}

/** A request as the agent sends it, signed by web-bot-auth with the header in its default components. */
async function signedRequest (key: { privateJwk: JWK }, init: { agentHeader?: string, created?: Date, expires?: Date, path?: string } = {}) {
  const created = init.created ?? new Date()
  const expires = init.expires ?? new Date(created.getTime() + 60_000)
  const headers: Record<string, string> = { 'signature-agent': init.agentHeader ?? JSON.stringify(AGENT) }
  const request = new Request(`https://${HOST}${init.path ?? '/v1/clients/'}`, { headers })
  const signed = await signatureHeaders(request, await signerFromJWK(key.privateJwk), { created, expires })
  return describedRequest({
    url: init.path ?? '/v1/clients/',
    scheme: 'https',
    authority: HOST,
    headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] }
  })
}

function pipeline (directories: AgentDirectories, allowance: AgentAllowance = 'any') {
  const store = createMemoryStore()
  const stages = [agentSignatureHeadersStage(() => allowance), agentKeyStage(directories), agentVerificationStage(store)]
  return async (request: ReturnType<typeof describedRequest>): Promise<AuthState> => {
    const state: AuthState = {}
    for (const stage of stages) await stage.run(request, state)
    return state
  }
}

const directoriesOver = (fetch: typeof globalThis.fetch, extra: Partial<Parameters<typeof createAgentDirectories>[0]> = {}): AgentDirectories =>
  createAgentDirectories({ fetch, checkDirectory: (agent) => directoryCheck(agent), ...extra })

t.test('an agent signed by web-bot-auth, its directory signed too: verified once, as its origin and key', async (t) => {
  const key = await agentKey()
  const { fetch, served } = await directoryServer(() => [key])
  const directories = directoriesOver(fetch)
  t.teardown(() => { directories.close() })
  const run = pipeline(directories)
  const request = await signedRequest(key)
  const state = await run(request)
  t.same(state.agent, { origin: AGENT, thumbprint: key.keyid, pinned: false }, 'the agent: its directory\'s origin and its key\'s thumbprint')
  t.same(served.urls, [`${AGENT}${HTTP_MESSAGE_SIGNATURES_DIRECTORY}`], 'its directory, at the well-known path, fetched once')
  const again = await captureGatewayError(async () => await run(request))
  t.equal(again.code, 'REPLAYED_REQUEST', 'the same signature again: one request per signature')
  await run(await signedRequest(key))
  t.equal(served.calls, 1, 'a new signature by a key held: no fetch')
})

t.test('refused, each with its code: unsigned, expired, a keyid not in the directory, another Signature-Agent, no @authority', async (t) => {
  const key = await agentKey()
  const stranger = await agentKey()
  const { fetch } = await directoryServer(() => [key])
  const directories = directoriesOver(fetch)
  t.teardown(() => { directories.close() })
  const run = pipeline(directories)
  const code = async (request: ReturnType<typeof describedRequest>): Promise<string> => (await captureGatewayError(async () => await run(request))).code

  t.equal(await code(describedRequest({ headers: {} })), 'MISSING_AGENT_SIGNATURE', 'no signature')
  const good = await signedRequest(key)
  const retagged = String(good.headers['signature-input']).replace('tag="web-bot-auth"', 'tag="other"')
  t.equal(await code(describedRequest({ headers: { ...good.headers as Record<string, string>, 'signature-input': retagged } })),
    'MISSING_AGENT_SIGNATURE', 'a signature tagged otherwise')
  const past = new Date(Date.now() - 600_000)
  t.equal(await code(await signedRequest(key, { created: past, expires: new Date(past.getTime() + 60_000) })), 'INVALID_AGENT_SIGNATURE', 'expired')
  const long = new Date()
  t.equal(await code(await signedRequest(key, { created: long, expires: new Date(long.getTime() + 7200_000) })), 'INVALID_AGENT_SIGNATURE',
    'a span over an hour')
  t.equal(await code(await signedRequest(stranger)), 'UNKNOWN_AGENT_KEY', 'a key the directory does not publish')
  const swapped = await signedRequest(key)
  const withAgent = (value: string): ReturnType<typeof describedRequest> =>
    describedRequest({
      url: swapped.target, scheme: 'https', authority: HOST, headers: { ...swapped.headers as Record<string, string>, 'signature-agent': value }
    })
  t.equal(await code(withAgent('"https://evil.test"')), 'AGENT_DIRECTORY_UNAVAILABLE', 'Signature-Agent changed to another agent: its directory, not there')
  t.equal(await code(withAgent('"https://agent.test/"')), 'INVALID_AGENT_SIGNATURE', 'Signature-Agent changed in its bytes only: the signature covers them')
  const otherHost = await signedRequest(key)
  const moved = describedRequest({
    url: otherHost.target, scheme: 'https', authority: 'other.example.com', headers: otherHost.headers as Record<string, string>
  })
  t.equal(await code(moved), 'INVALID_AGENT_SIGNATURE', 'sent to another authority than it was signed for')
  // GHSA-x9cc-346q-g27m: a signature over no components verified
  const now = Math.floor(Date.now() / 1000)
  const empty = describedRequest({
    scheme: 'https',
    authority: HOST,
    headers: {
      'signature-agent': JSON.stringify(AGENT),
      'signature-input': `sig1=();created=${now};expires=${now + 60};keyid="${key.keyid}";tag="web-bot-auth"`,
      signature: 'sig1=:AAAA:'
    }
  })
  const refused = await captureGatewayError(async () => await run(empty))
  t.equal(refused.code, 'INVALID_AGENT_SIGNATURE')
  t.match(refused.message, /must cover @authority \(or @target-uri\), signature-agent/, 'covering nothing: refused before any key is looked up')
})

t.test('the route\'s agents: one not named is refused before its directory is fetched', async (t) => {
  const key = await agentKey()
  const { fetch, served } = await directoryServer(() => [key])
  const directories = directoriesOver(fetch)
  t.teardown(() => { directories.close() })
  const refused = await captureGatewayError(async () => await pipeline(directories, new Set(['https://other-agent.test']))(await signedRequest(key)))
  t.equal(refused.code, 'AGENT_NOT_ALLOWED')
  t.equal(served.calls, 0, 'nothing fetched')
  t.same((await pipeline(directories, new Set([AGENT]))(await signedRequest(key))).agent?.origin, AGENT, 'named: let in')
})

t.test('a directory that is unsigned, or served as another type, is refused; one fetch per interval whatever the keyids', async (t) => {
  const key = await agentKey()
  for (const [what, options] of [['unsigned', { unsigned: true }], ['served as application/json', { contentType: 'application/json' }]] as const) {
    const { fetch, served } = await directoryServer(() => [key], options)
    const directories = directoriesOver(fetch)
    t.teardown(() => { directories.close() })
    const run = pipeline(directories)
    const refused = await captureGatewayError(async () => await run(await signedRequest(key)))
    t.equal(refused.code, 'AGENT_DIRECTORY_UNAVAILABLE', `${what}: refused`)
    t.match(refused.message, what === 'unsigned' ? /not signed/ : /served as application\/json/)
    for (let i = 0; i < 20; i++) await captureGatewayError(async () => await run(await signedRequest(key)))
    t.equal(served.calls, 1, `${what}: one fetch, then the failure remembered`)
  }
})

t.test('requests during a first fetch that fails share its outcome: its reason, its Retry-After, one fetch', async (t) => {
  const key = await agentKey()
  const { fetch, served } = await directoryServer(() => [key], { unsigned: true })
  const slow: typeof globalThis.fetch = async (input, init) => {
    await new Promise((resolve) => setTimeout(resolve, 50))
    return await fetch(input, init)
  }
  const directories = directoriesOver(slow)
  t.teardown(() => { directories.close() })
  const run = pipeline(directories)
  const requests = await Promise.all([signedRequest(key), signedRequest(key), signedRequest(key)])
  const refused = await Promise.all(requests.map(async (request) => await captureGatewayError(async () => await run(request))))
  for (const [i, err] of refused.entries()) {
    t.equal(err.code, 'AGENT_DIRECTORY_UNAVAILABLE', `request ${i}: refused`)
    t.match(err.message, /not signed/, `request ${i}: saying why the fetch failed`)
    t.equal(err.headers?.['retry-after'], '60', `request ${i}: Retry-After when it may be fetched again`)
  }
  t.equal(served.calls, 1, 'one fetch')
})

t.test('the directory rotates its key: a signature by the new key verifies without a restart', async (t) => {
  const first = await agentKey()
  const second = await agentKey()
  let published = [first]
  const { fetch } = await directoryServer(() => published)
  const directories = directoriesOver(fetch, { unknownKeyIntervalMs: 1 })
  t.teardown(() => { directories.close() })
  const run = pipeline(directories)
  await run(await signedRequest(first))
  published = [second]
  await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal((await run(await signedRequest(second))).agent?.thumbprint, second.keyid, 'the new key, fetched for its unknown keyid')
})

t.test('Signature-Agent\'s forms: the current dictionary (directory or jwks_uri) and the earlier quoted URI; HTTPS only', async (t) => {
  t.match(signatureAgentOf('"https://agent.test"', 'sig1'), { form: 'legacy', origin: AGENT, url: `${AGENT}${HTTP_MESSAGE_SIGNATURES_DIRECTORY}` })
  t.match(signatureAgentOf('sig1="https://agent.test"', 'sig1'), { form: 'dictionary', type: 'directory', origin: AGENT })
  t.match(signatureAgentOf('sig2="https://a.test", sig1="https://keys.agent.test/jwks.json";type=jwks_uri', 'sig1'),
    { type: 'jwks_uri', origin: 'https://keys.agent.test', url: 'https://keys.agent.test/jwks.json' })
  t.throws(() => signatureAgentOf('sig2="https://a.test"', 'sig1'), /no member sig1/)
  t.throws(() => signatureAgentOf('"http://agent.test"', 'sig1'), /not https/)
  t.throws(() => signatureAgentOf('"https://agent.test/some/where"', 'sig1'), /named by its origin/)
  t.throws(() => signatureAgentOf('sig1="https://a.test";type=cimd', 'sig1'), /type cimd/)
  t.throws(() => signatureAgentOf(`"https://${'a'.repeat(3000)}.test"`, 'sig1'), /at most 2048/)
})

t.test('a signature covering another label\'s Signature-Agent member is refused before any key is looked up', async (t) => {
  const now = Math.floor(Date.now() / 1000)
  const request = describedRequest({
    scheme: 'https',
    authority: HOST,
    headers: {
      'signature-agent': `sig1="${AGENT}", sig2="https://other.test"`,
      'signature-input': `sig1=("@authority" "signature-agent";key="sig2");created=${now};expires=${now + 60};keyid="k";tag="web-bot-auth"`,
      signature: 'sig1=:AAAA:'
    }
  })
  const refused = await captureGatewayError(() => agentSignatureHeadersStage(() => 'any').run(request, {}))
  t.equal(refused.code, 'INVALID_AGENT_SIGNATURE')
  t.match(refused.message, /covers Signature-Agent's member sig2, not its own \(sig1\)/)
})
