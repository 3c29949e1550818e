// The failed-signature budget behind real proxies, with the numbers of keygate issue 40
// (KEYGATE_SIGNATURE_FAILURE_LIMIT=40, _WINDOW_SECONDS=60): one address floods 41 bad signatures
// with a key, after the key's owner made two honest mistakes from another address. The flooder is
// held by its own address's budget; the owner, signing correctly, is served, and so is every later
// request of it. A second address failing twice on the key makes three addresses that each failed
// twice (KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES, 3): the key is under attack, and each of
// those three addresses, the owner's among them (the documented edge), gets 429 for the key before
// any verification, while an address that failed nothing is served. Four ways in: nginx proxying
// to keygate inline, nginx asking keygate's decision listener (docs/decision/nginx.md's
// configuration), Caddy asking it (docs/decision/caddy.md's Caddyfile), and a signed agent (Web Bot
// Auth, signed by Cloudflare's web-bot-auth) through nginx inline, whose key is its thumbprint.
// Clients come from distinct loopback addresses, which the proxies report to keygate.
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exportJWK, type JWK } from 'jose'
import t, { type Test } from 'tap'
import { signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import { loadDecisionConfig } from '../../bench/nginx.js'
import type { GatewayConfig } from '../../gateway/src/config/env.js'
import { findCaddy, runCaddy } from '../helpers/caddy.js'
import { blockSettings, docSnippet } from '../helpers/docs.js'
import { send, type RawResponse } from '../helpers/http.js'
import { rsaKeyPair, signBase64, signedHeaders } from '../helpers/keys.js'
import { findNginx, runNginx, startNginx } from '../helpers/nginx.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { routesFromYaml } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway, type GatewayHandle } from '../helpers/stack.js'

const nginx = findNginx()
const caddy = findCaddy()
const noNginx = 'reason' in nginx ? `nginx cannot be installed here: ${nginx.reason}` : false
const noCaddy = 'reason' in caddy ? `Caddy cannot be installed here: ${caddy.reason}` : false
const nginxPath = 'path' in nginx ? nginx.path : ''
const caddyPath = 'path' in caddy ? caddy.path : ''

/** the budget; the other settings at their defaults (2 failures make an address one of the key's attackers, 3 attackers an attack) */
const SIGNATURE_FAILURES = { limit: 40, windowSeconds: 60 }
const AGENT = 'https://agent.example'
const ROUTES = `routes:
  - { name: clients, prefix: /v1/clients/, upstream: UPSTREAM, auth: signed, methods: [GET] }
  - { name: agents, prefix: /v1/agents/, upstream: UPSTREAM, auth: agent, agents: any, methods: [GET] }
`
/** every proxy here reaches keygate from 127.0.0.1, and the clients come from other loopback addresses */
const PROXY = '127.0.0.1'
const FLOODER = '127.0.0.31'
const OWNER = '127.0.0.32'
const SECOND = '127.0.0.33'
const CLEAN = '127.0.0.34'

/** One way in: where clients send, the gateway behind it, and a good and a bad request of the key's holder from an address. */
interface Way {
  url: string
  gateway: GatewayHandle
  recorder: Recorder
  good: (from: string) => Promise<RawResponse>
  bad: (from: string) => Promise<RawResponse>
  /** what a bad signature is answered with while it is still checked */
  badCode: 'INVALID_SIGNATURE' | 'INVALID_AGENT_SIGNATURE'
}

const codeOf = (res: RawResponse): string => (JSON.parse(res.text) as { code?: string }).code ?? `(no code: ${res.status} ${res.text.slice(0, 200)})`

async function keysAttacked (gateway: GatewayHandle): Promise<number> {
  const { body } = await gateway.app.keygate.metrics.scrape()
  return Number(/^keygate_signature_budget_keys_attacked_total (\d+)$/m.exec(body)?.[1] ?? NaN)
}

/** A recorder and keygate (inline port, and a decision listener believing 127.0.0.1), its budget the issue's. */
async function keygate (t: Test, config: Partial<GatewayConfig> = {}): Promise<{ gateway: GatewayHandle; recorder: Recorder; decisionUrl: string }> {
  const recorder = await startRecorder(t)
  const gateway = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: recorder.url,
    routes: (upstream) => routesFromYaml(ROUTES, upstream),
    config: {
      signatureFailures: SIGNATURE_FAILURES,
      clientAddress: { trustedProxies: [PROXY], header: 'x-forwarded-for' },
      decision: { port: 0, host: PROXY, trustedProxies: [PROXY] },
      ...config
    }
  })
  const decisionUrl = await gateway.app.keygate.decisions?.listen({ port: 0, host: PROXY }) as string
  return { gateway, recorder, decisionUrl }
}

/** alice's registered RSA key, signing the seed scheme's GETs to `url` (a proxy): good, or with a signature over other bytes. */
async function signedWay (gateway: GatewayHandle, recorder: Recorder, url: string): Promise<Way> {
  await addUser(gateway, 'alice')
  const token = await login(gateway.url, 'alice')
  const keys = rsaKeyPair()
  const registered = await registerKey(gateway.url, token, keys)
  if (registered.status !== 201) throw new Error(`registration: ${registered.text}`)
  const headers = (): Record<string, string> => signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' })
  return {
    url,
    gateway,
    recorder,
    badCode: 'INVALID_SIGNATURE',
    good: async (from) => await send(url, '/v1/clients/', { headers: headers(), localAddress: from }),
    bad: async (from) => {
      const overOtherBytes = { ...headers(), 'x-api-signature': signBase64(keys.privateKey, 'other bytes') }
      return await send(url, '/v1/clients/', { headers: overOtherBytes, localAddress: from })
    }
  }
}

/**
 * The sequence: the owner's two mistakes, the flood from one address, the owner served;
 * then a second address's two failures put the key under attack.
 */
async function floodThenAttack (t: Test, way: Way): Promise<void> {
  const { gateway, recorder, good, bad, badCode } = way
  for (let i = 1; i <= 2; i++) t.equal(codeOf(await bad(OWNER)), badCode, `the owner's honest mistake ${i}: checked and explained`)
  const flood = new Map<string, number>()
  for (let i = 1; i <= 41; i++) {
    const code = codeOf(await bad(FLOODER))
    flood.set(code, (flood.get(code) ?? 0) + 1)
  }
  t.same(Object.fromEntries(flood), { [badCode]: 40, RATE_LIMITED: 1 }, 'the flood: 40 bad signatures checked, the 41st refused by its address\'s budget')
  t.equal(codeOf(await good(FLOODER)), 'RATE_LIMITED', 'the flooding address stays refused, good signatures too')
  t.equal(await keysAttacked(gateway), 0, 'one flooding address (and the owner\'s mistakes): the key is not under attack')

  const before = recorder.requests.length
  for (let i = 1; i <= 3; i++) {
    const res = await good(OWNER)
    t.equal(res.status, 200, `the owner, from the address of its mistakes, request ${i}: 200 ${res.status === 200 ? '' : res.text}`)
  }
  t.equal(recorder.requests.length, before + 3, 'and each reached the upstream')

  // three addresses that each failed twice on the key: the flooder, the owner and a second one
  for (let i = 1; i <= 2; i++) t.equal(codeOf(await bad(SECOND)), badCode, `a second address's failure ${i}: checked`)
  t.equal(await keysAttacked(gateway), 1, 'the key is under attack')
  const refused = [['the second address', await good(SECOND)], ['the owner (two mistakes on the key: one of the three)', await good(OWNER)]] as const
  for (const [who, res] of refused) {
    t.equal(res.status, 429, `${who}, signing correctly: 429`)
    t.equal(codeOf(res), 'RATE_LIMITED')
    t.match(res.text, /for this key, from 3 or more addresses/, 'the detail says why')
    t.ok(Number(res.headers['retry-after']) >= 1, `with Retry-After (${String(res.headers['retry-after'])})`)
  }
  const clean = await good(CLEAN)
  t.equal(clean.status, 200, 'an address that failed nothing, the same key: 200')
  t.equal(recorder.requests.length, before + 4, 'only the accepted requests reached the upstream')
}

t.test('nginx in front of keygate inline', { skip: noNginx }, async (t) => {
  const { gateway, recorder } = await keygate(t)
  const proxy = await startNginx(t, nginxPath, gateway.url)
  await floodThenAttack(t, await signedWay(gateway, recorder, proxy.url))
  t.match(await proxy.accessLog(), new RegExp(`^${FLOODER.replaceAll('.', '\\.')} `, 'm'), 'nginx saw the flooder\'s own address')
})

t.test('decision mode behind nginx (docs/decision/nginx.md\'s configuration)', { skip: noNginx }, async (t) => {
  const { gateway, recorder, decisionUrl } = await keygate(t)
  const pageConfig = loadDecisionConfig()
  const proxy = await runNginx(t, nginxPath, (port) => pageConfig(port, decisionUrl, recorder.url))
  await floodThenAttack(t, await signedWay(gateway, recorder, proxy.url))
})

t.test('decision mode behind Caddy (docs/decision/caddy.md\'s Caddyfile)', { skip: noCaddy }, async (t) => {
  const { gateway, recorder, decisionUrl } = await keygate(t)
  const proxy = await runCaddy(t, caddyPath, docSnippet('docs/decision/caddy.md', 'The Caddyfile', 'caddyfile'), {
    KEYGATE_DECISION: new URL(decisionUrl).host,
    KEYGATE_PUBLIC: new URL(gateway.url).host,
    UPSTREAM: new URL(recorder.url).host
  })
  t.same(blockSettings(docSnippet('docs/decision/caddy.md', 'keygate\'s settings', 'sh')).KEYGATE_DECISION_TRUSTED_PROXIES, PROXY,
    'the page trusts Caddy at 127.0.0.1, as this keygate does')
  await floodThenAttack(t, await signedWay(gateway, recorder, proxy.url))
})

/** A Signature value with one byte of the signature changed: still well formed, it does not verify. */
function corrupted (signature: string): string {
  return signature.replace(/:([A-Za-z0-9+/=]+):/, (_all, base64: string) => {
    const bytes = Buffer.from(base64, 'base64')
    bytes[0] = (bytes[0] ?? 0) ^ 0xff
    return `:${bytes.toString('base64')}:`
  })
}

t.test('a signed agent (Web Bot Auth) through nginx inline: its key is counted as a registered key is', { skip: noNginx }, async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const privateJwk: JWK = await exportJWK(privateKey)
  const dir = mkdtempSync(join(tmpdir(), 'keygate-agents-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const agentsFile = join(dir, 'agents.yaml')
  // the agent's key pinned: no directory to fetch
  writeFileSync(agentsFile, `directories:\n  - origin: ${AGENT}\n    keys: [${JSON.stringify(await exportJWK(publicKey))}]\n`)
  const { gateway, recorder } = await keygate(t, { agentDirectoriesFile: agentsFile })
  const proxy = await startNginx(t, nginxPath, gateway.url)
  /** signed by web-bot-auth for nginx's host, a fresh signature (and nonce) each time */
  const agentHeaders = async (): Promise<Record<string, string>> => {
    const headers = { 'signature-agent': JSON.stringify(AGENT) }
    const now = new Date()
    const signed = await signatureHeaders(new Request(`${proxy.url}/v1/agents/`, { headers }), await signerFromJWK(privateJwk),
      { created: now, expires: new Date(now.getTime() + 60_000) })
    return { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] }
  }
  await floodThenAttack(t, {
    url: proxy.url,
    gateway,
    recorder,
    badCode: 'INVALID_AGENT_SIGNATURE',
    good: async (from) => await send(proxy.url, '/v1/agents/', { headers: await agentHeaders(), localAddress: from }),
    bad: async (from) => {
      const headers = await agentHeaders()
      return await send(proxy.url, '/v1/agents/', { headers: { ...headers, signature: corrupted(headers.signature as string) }, localAddress: from })
    }
  })
})
