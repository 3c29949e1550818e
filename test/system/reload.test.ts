// Issue 40, point 5: a compromised identity provider removed without a restart. A gateway of two
// workers (KEYGATE_WORKERS=2, main.ts, the real Redis) with a route file, an issuers file naming
// one real OpenID Provider (oidc-provider) of two, and an agents file pinning a signed agent's key
// (Cloudflare's web-bot-auth signs its requests). The admin API's POST /v1/reload swaps the
// issuers: the removed one's token, verified and cached on both workers, is refused by both from
// the answer on, and the added one's is accepted; a file with a mistake is refused with its reason
// (422) and every worker keeps the files in force; `keygate reload` (SIGHUP to the primary) reloads
// the agents file on both workers. Which worker answered is read from its access-log line.
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exportJWK, type JWK } from 'jose'
import t from 'tap'
import { signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import { admin, newAdminToken } from '../helpers/admin.js'
import { keygateCli } from '../helpers/cli.js'
import { send, type RawResponse } from '../helpers/http.js'
import { startTestIdp } from '../helpers/oidc-provider.js'
import { answeredBy, redisEnv, startCluster } from '../helpers/process-tree.js'
import { startRecorder } from '../helpers/recorder.js'
import { freePort } from '../helpers/redis.js'

interface AgentKey { privateJwk: JWK, publicJwk: JWK }
async function agentKey (): Promise<AgentKey> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return { privateJwk: await exportJWK(privateKey), publicJwk: await exportJWK(publicKey) }
}
const AGENT = 'https://agent.test'

t.test('issuers and agents reloaded on both workers: a removed issuer\'s tokens refused at once, a bad file refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-reload-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const [corp, partner] = await Promise.all([startTestIdp(t), startTestIdp(t)])
  const upstream = await startRecorder(t)
  const [key, replacement] = await Promise.all([agentKey(), agentKey()])
  const files = { routes: join(dir, 'routes.yaml'), issuers: join(dir, 'issuers.yaml'), agents: join(dir, 'agents.yaml'), pid: join(dir, 'keygate.pid') }
  writeFileSync(files.routes, `routes:
  - { name: reports, prefix: /v1/reports/, upstream: "${upstream.url}", auth: bearer, methods: [GET] }
  - { name: agents, prefix: /v1/agents/, upstream: "${upstream.url}", auth: agent, agents: any, methods: [GET] }
`)
  const issuersOf = (...idps: Array<[string, { issuer: string, audience: string }]>): string =>
    `issuers:\n${idps.map(([name, idp]) => `  - { name: ${name}, issuer: "${idp.issuer}", audiences: ["${idp.audience}"] }\n`).join('')}`
  writeFileSync(files.issuers, issuersOf(['corp', corp]))
  const pinned = (k: AgentKey): string => `directories:\n  - { origin: "${AGENT}", keys: [${JSON.stringify(k.publicJwk)}] }\n`
  writeFileSync(files.agents, pinned(key))
  const adminPort = await freePort()
  const token = newAdminToken()
  const gw = await startCluster(t, {
    ...await redisEnv(t, 'reload'),
    KEYGATE_ROUTES: files.routes,
    KEYGATE_ISSUERS: files.issuers,
    KEYGATE_AGENT_DIRECTORIES: files.agents,
    KEYGATE_ADMIN_PORT: String(adminPort),
    KEYGATE_ADMIN_TOKEN: token,
    KEYGATE_PID_FILE: files.pid
  })
  const api = { adminUrl: `http://127.0.0.1:${adminPort}`, token }
  await gw.waitForLine((l) => l.startup !== undefined, 'the startup line')

  /** `n` requests, each on a new connection (node:cluster hands them out in turn): the answers' status and code, per worker */
  const spread = async (n: number, request: () => Promise<RawResponse>): Promise<Map<number, string[]>> => {
    const byWorker = new Map<number, string[]>()
    for (let i = 0; i < n; i++) {
      const res = await request()
      const pid = await answeredBy(gw, res)
      byWorker.set(pid, [...byWorker.get(pid) ?? [], res.status === 200 ? '200' : `${res.status} ${String(res.json().code)}`])
    }
    return byWorker
  }
  /** what every worker answered, once each, when both answered; else why not */
  const everyWorker = (byWorker: Map<number, string[]>): string[] =>
    byWorker.size === 2 ? [...new Set([...byWorker.values()].flat())] : [`only ${byWorker.size} worker(s) answered`]
  const bearer = (tokenText: string) => async () => await send(gw.url, '/v1/reports/x', { headers: { authorization: `Bearer ${tokenText}` } })
  const host = new URL(gw.url).host
  const agentRequest = async (): Promise<RawResponse> => {
    const headers = { 'signature-agent': JSON.stringify(AGENT) }
    const now = new Date()
    const signed = await signatureHeaders(new Request(`http://${host}/v1/agents/x`, { headers }), await signerFromJWK(key.privateJwk),
      { created: now, expires: new Date(now.getTime() + 60_000) })
    return await send(gw.url, '/v1/agents/x', { headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] } })
  }

  const corpToken = await corp.clientCredentialsToken([])
  const partnerToken = await partner.clientCredentialsToken([])
  t.same(everyWorker(await spread(8, bearer(corpToken))), ['200'], 'corp\'s token accepted by both workers (and cached by each)')
  t.same(everyWorker(await spread(8, bearer(partnerToken))), ['401 INVALID_TOKEN'], 'partner is trusted by none yet')
  t.same(everyWorker(await spread(8, agentRequest)), ['200'], 'the agent, its key pinned, reaches its route on both workers')

  await t.test('corp removed, partner added through POST /v1/reload: at once on both workers', async (t) => {
    writeFileSync(files.issuers, issuersOf(['partner', partner]))
    const started = performance.now()
    const res = await admin(api, 'POST', '/v1/reload')
    const ms = performance.now() - started
    t.equal(res.status, 200, res.text)
    t.same(res.json(), {
      routes: { file: files.routes, added: [], removed: [], changed: [] },
      issuers: { file: files.issuers, added: ['partner'], removed: ['corp'], changed: [] },
      agents: { file: files.agents, added: [], removed: [], changed: [] },
      workers: 2
    })
    t.comment(`POST /v1/reload answered in ${Math.round(ms)} ms (two workers, partner's keys fetched by each)`)
    t.same(everyWorker(await spread(8, bearer(corpToken))), ['401 INVALID_TOKEN'], 'corp\'s token, cached on both, refused by both at once')
    t.same(everyWorker(await spread(8, bearer(partnerToken))), ['200'], 'partner\'s token accepted by both')
    t.equal(gw.lines.filter((l) => l.msg === 'configuration reloaded' && gw.workers.includes(l.pid)).length, 2, 'each worker logged its reload')
  })

  await t.test('a file with a mistake: 422 with its reason; both workers keep the files in force', async (t) => {
    writeFileSync(files.issuers, `${issuersOf(['partner', partner], ['corp', corp])}  - { name: corp, issuer: "ftp://evil", audiences: [] }\n`)
    const res = await admin(api, 'POST', '/v1/reload')
    t.equal(res.status, 422)
    const problem = res.json<{ code: string, files: string[], problems: string[] }>()
    t.equal(problem.code, 'CONFIG_FILE_INVALID')
    t.same(problem.files, [files.issuers])
    t.ok(problem.problems.some((p) => p.startsWith(`${files.issuers}: issuers[2].audiences`)), problem.problems.join('; '))
    t.same(everyWorker(await spread(8, bearer(corpToken))), ['401 INVALID_TOKEN'], 'corp stays removed (the refused file named it again)')
    t.same(everyWorker(await spread(8, bearer(partnerToken))), ['200'], 'partner stays trusted')
  })

  await t.test('keygate reload (SIGHUP to the primary): the agents file\'s new pin on both workers, corp trusted again', async (t) => {
    writeFileSync(files.agents, pinned(replacement))
    writeFileSync(files.issuers, issuersOf(['partner', partner], ['corp', corp]))
    const start = gw.lines.length
    const cli = await keygateCli(['reload'], '', { KEYGATE_PID_FILE: files.pid })
    t.equal(cli.code, 0, cli.stderr)
    t.match(cli.stdout, /SIGHUP sent to keygate \(pid \d+\): it re-reads its route file, issuers file and agents file/)
    const reloaded = gw.workers.map(async (pid) =>
      await gw.waitForLine((l) => l.pid === pid && l.msg === 'configuration reloaded' && gw.lines.indexOf(l) >= start, `of worker ${pid} reloading`))
    const lines = await Promise.all(reloaded)
    t.match(lines[0], { agents: { changed: [AGENT] }, issuers: { added: ['corp'] } })
    t.same(everyWorker(await spread(8, agentRequest)), ['401 UNKNOWN_AGENT_KEY'], 'the old key no longer verifies on either worker')
    t.same(everyWorker(await spread(8, bearer(corpToken))), ['200'], 'corp\'s token accepted again by both')
  })
})
