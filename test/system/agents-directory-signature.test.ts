// Issue #40, point 2: key directories signed two ways, each fetched by a running keygate over
// HTTPS (the test's CA and resolver; the agents file lets these origins be on loopback): one as
// Cloudflare's web-bot-auth helper signs it (covering "@authority";req alone), one as the Web Bot
// Auth draft's possession proof signs it, made by Cloudflare's http-message-sig (covering
// "@authority";req and content-digest). Both let their agents in. A directory whose signature
// does not cover "@authority";req, and one whose body is not the one its signed digest names, are
// refused with 401 AGENT_DIRECTORY_UNAVAILABLE, saying why, nothing forwarded.
import { createHash, generateKeyPairSync } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { exportJWK, type JWK } from 'jose'
import t from 'tap'
import { signatureHeaders as httpMessageSignatureHeaders, type Component } from 'http-message-sig'
import { directoryResponseHeaders, HTTP_MESSAGE_SIGNATURES_DIRECTORY, helpers, jwkToKeyID, MediaType, signatureHeaders } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { startStack } from '../helpers/stack.js'
import { testCertificates } from '../helpers/test-ca.js'

const HOSTS = ['helper.test', 'draft.test', 'no-authority.test', 'altered.test'] as const
const { caPem, certPem, keyPem } = testCertificates(HOSTS)

const { privateKey, publicKey } = generateKeyPairSync('ed25519')
const publicJwk: JWK = await exportJWK(publicKey)
const privateJwk: JWK = await exportJWK(privateKey)
const keyid = await jwkToKeyID(publicJwk as never, helpers.WEBCRYPTO_SHA256, helpers.BASE64URL_DECODE)
const REQUEST_AUTHORITY: Component = { name: '@authority', parameters: new Map([['req', true]]) }

/** The directory's body and its fields, signed as `host` asks. */
async function directoryAnswer (host: string): Promise<{ body: string, headers: Record<string, string> }> {
  const body = JSON.stringify({ keys: [publicJwk] })
  const url = `https://${host}${HTTP_MESSAGE_SIGNATURES_DIRECTORY}`
  const created = new Date()
  const expires = new Date(created.getTime() + 300_000)
  const headers: Record<string, string> = { 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY }
  if (host.startsWith('helper.test')) {
    const signed = await directoryResponseHeaders({ request: new Request(url), response: new Response(body, { headers }) } as never,
      [await signerFromJWK(privateJwk)], { created, expires })
    return { body, headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] } }
  }
  headers['content-digest'] = `sha-256=:${createHash('sha256').update(body).digest('base64')}:`
  const components = host.startsWith('no-authority.test') ? ['content-digest'] : [REQUEST_AUTHORITY, 'content-digest']
  const signed = await httpMessageSignatureHeaders({ request: { method: 'GET', url, headers: {} }, response: { status: 200, headers } }, {
    signer: await signerFromJWK(privateJwk), components, key: 'sig1', keyid, tag: 'http-message-signatures-directory', created, expires
  })
  // altered.test: the bytes sent are not those its signed digest names
  const sent = host.startsWith('altered.test') ? `${body} ` : body
  return { body: sent, headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] } }
}

const fetched = new Map<string, number>()
const directory = createHttpsServer({ cert: certPem, key: keyPem }, (req, res) => {
  const host = req.headers.host ?? ''
  fetched.set(host, (fetched.get(host) ?? 0) + 1)
  if (req.url !== HTTP_MESSAGE_SIGNATURES_DIRECTORY) { res.writeHead(404).end(); return }
  void directoryAnswer(host).then(({ body, headers }) => { res.writeHead(200, headers).end(body) })
})
await new Promise<void>((resolve) => directory.listen(0, '127.0.0.1', resolve))
t.teardown(async () => { directory.closeAllConnections(); await new Promise((resolve) => directory.close(resolve)) })
const port = (directory.address() as AddressInfo).port
const origin = (host: string): string => `https://${host}:${port}`

const recorder = await startRecorder(t)
const routes = routeFile(t, `routes:
  - { name: agents, prefix: /v1/agents/, upstream: ${recorder.url}, auth: agent, agents: any, methods: [GET] }
`)
const agentsFile = join(routes.path, '..', 'agents.yaml')
writeFileSync(agentsFile, `directories:\n${HOSTS.map((host) => `  - { origin: ${origin(host)}, privateAddress: true }\n`).join('')}`)
const resolver = async (hostname: string): Promise<Array<{ address: string, family: 4 | 6 }>> => {
  if ((HOSTS as readonly string[]).includes(hostname)) return [{ address: '127.0.0.1', family: 4 }]
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
}
const gw = await startStack(t, {
  store: 'memory',
  upstreamUrl: recorder.url,
  config: { routesFile: routes.path, agentDirectoriesFile: agentsFile },
  agentDirectories: { resolver, ca: caPem }
})
const gatewayHost = new URL(gw.url).host

/** A GET of `path` signed by web-bot-auth as the agent of `agent`'s directory; keygate's answer. */
async function send (path: string, agent: string): Promise<{ status: number, body: Record<string, unknown> }> {
  const headers: Record<string, string> = { 'signature-agent': JSON.stringify(agent) }
  const created = new Date()
  const signed = await signatureHeaders(new Request(`http://${gatewayHost}${path}`, { headers }), await signerFromJWK(privateJwk),
    { created, expires: new Date(created.getTime() + 60_000) })
  return await new Promise((resolve, reject) => {
    const outgoing = httpRequest(`${gw.url}${path}`, { headers: { ...headers, signature: signed.Signature, 'signature-input': signed['Signature-Input'] } },
      (response) => {
        const chunks: Buffer[] = []
        response.on('data', (chunk: Buffer) => chunks.push(chunk))
        response.on('end', () => {
          resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown> })
        })
      })
    outgoing.on('error', reject)
    outgoing.end()
  })
}

t.test('signed as web-bot-auth\'s helper signs it, and as the draft\'s possession proof: both agents get in', async (t) => {
  for (const host of ['helper.test', 'draft.test']) {
    const answer = await send(`/v1/agents/${host}`, origin(host))
    t.equal(answer.status, 200, `${host}: ${JSON.stringify(answer.body)}`)
    t.equal(recorder.requests.at(-1)?.headers['x-gateway-agent'], origin(host), `${host}: the upstream hears the agent`)
    t.equal(fetched.get(`${host}:${port}`), 1, `${host}: its directory fetched once`)
  }
})

t.test('refused: a signature without "@authority";req, and a body that is not the one the signed digest names', async (t) => {
  const before = recorder.requests.length
  const cases: Array<[string, RegExp]> = [
    ['no-authority.test', /no signature on it verifies: sig1 must cover "@authority";req/],
    ['altered.test', /no signature on it verifies: sig1: covers "content-digest", which does not match the \d+ bytes received/]
  ]
  for (const [host, why] of cases) {
    const answer = await send(`/v1/agents/${host}`, origin(host))
    t.equal(answer.status, 401, host)
    t.equal(answer.body.code, 'AGENT_DIRECTORY_UNAVAILABLE', `${host}: ${String(answer.body.detail)}`)
    t.match(answer.body.detail, why, `${host}: saying why`)
  }
  t.equal(recorder.requests.length, before, 'nothing forwarded')
})
