// The CA keygate trusts when it fetches an identity provider's keys or a signed agent's directory
// (docs/identity-providers.md, "The CA keygate trusts"): Node's own, plus the file
// NODE_EXTRA_CA_CERTS names. An IdP whose JWKS is served over HTTPS with a certificate of a private
// CA (test/helpers/test-ca.ts), for a keygate process started as the page says: without the
// variable the keys are never usable (/readyz 503 IDP_KEYS_UNAVAILABLE, its tokens 503), with it
// /readyz is 200 and its token reaches the upstream. And the fetch of agents' directories
// (agents/directory-fetch.ts) in a Node process with and without the variable.
import { execFile } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { exportJWK, SignJWT } from 'jose'
import t, { type Test } from 'tap'
import { docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { redisEnv, spawnGateway } from '../helpers/process-tree.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { testCertificates } from '../helpers/test-ca.js'
import { TYPESCRIPT_NODE_ARGS } from '../helpers/typescript-node.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const certificates = testCertificates(['127.0.0.1'])
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const KID = 'private-ca-key'

/** an HTTPS server on 127.0.0.1 with the private CA's certificate, answering every path with `body` (JSON) */
async function httpsServer (t: Test, body: unknown): Promise<string> {
  const server = createServer({ cert: certificates.certPem, key: certificates.keyPem }, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** the private CA's certificate in a PEM file, as an operator would have it */
function caFile (t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-ca-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const path = join(dir, 'corp-ca.pem')
  writeFileSync(path, certificates.caPem)
  return path
}

// the page's command: the variable, set to the CA's file, for the gateway (which the tests run compiled: main.ts, what start:gateway runs)
const [variable = '', , command] = /^(\w+)=(\S+) (.*)$/.exec(docSnippet('docs/identity-providers.md', 'The CA keygate trusts', 'sh').trim())?.slice(1) ?? []

t.test('docs/identity-providers.md names the variable and the gateway it is set for', async (t) => {
  t.equal(variable, 'NODE_EXTRA_CA_CERTS')
  t.equal(command, 'npm run start:gateway')
})

t.test('an IdP whose JWKS has a private CA\'s certificate: refused without NODE_EXTRA_CA_CERTS, used with it', async (t) => {
  const jwk = { ...await exportJWK(publicKey), kid: KID, alg: 'RS256', use: 'sig' }
  const issuer = await httpsServer(t, { keys: [jwk] })
  const upstream = await startRecorder(t)
  const routes = routeFile(t, `routes:\n  - { prefix: /v1/reports/, upstream: ${upstream.url}, auth: bearer }\n`)
  const token = await new SignJWT({ scope: 'reports:read' }).setProtectedHeader({ alg: 'RS256', kid: KID })
    .setIssuer(issuer).setAudience('keygate').setSubject('ada').setIssuedAt().setExpirationTime('10m').sign(privateKey)
  const ca = caFile(t)

  const start = async (t: Test, extra: Record<string, string>): Promise<string> => {
    const gw = spawnGateway(t, {
      ...await redisEnv(t, 'idp-ca'),
      KEYGATE_ROUTES: routes.path,
      KEYGATE_OIDC_ISSUER: issuer,
      KEYGATE_OIDC_AUDIENCE: 'keygate',
      KEYGATE_OIDC_NAME: 'corp',
      KEYGATE_OIDC_JWKS_URI: `${issuer}/jwks`,
      ...extra
    })
    const listening = await gw.waitForLine((l) => /^keygate listens on /.test(l.msg), 'saying it listens')
    return /^keygate listens on (http:\/\/\S+) /.exec(listening.msg)?.[1] ?? ''
  }
  /** /readyz once `done` accepts it, or after 10 s (it answers 503 until the first fetch's outcome either way) */
  const readyz = async (url: string, done: (res: { status: number, text: string }) => boolean) => {
    for (let attempt = 0; ; attempt++) {
      const res = await send(url, '/readyz')
      if (done(res) || attempt === 100) return res
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  await t.test('without it: the TLS handshake fails, the keys are never usable', async (t) => {
    const url = await start(t, {})
    const ready = await readyz(url, (res) => res.status === 200 || /certificate/.test(res.text))
    t.comment(ready.text)
    t.equal(ready.status, 503)
    t.match(ready.text, /IDP_KEYS_UNAVAILABLE/)
    t.match(ready.text, /corp/, 'naming the issuer')
    t.match(ready.text, /certificate/, 'and why: the certificate')
    const res = await send(url, '/v1/reports/q', { headers: { authorization: `Bearer ${token}` } })
    t.equal(res.status, 503, 'its token: 503, not the client\'s fault')
    t.match(res.json(), { code: 'IDP_KEYS_UNAVAILABLE' })
    t.equal(upstream.requests.length, 0, 'nothing forwarded')
  })

  await t.test('with NODE_EXTRA_CA_CERTS naming the CA\'s file: usable, the token accepted', async (t) => {
    const url = await start(t, { [variable]: ca })
    t.equal((await readyz(url, (res) => res.status === 200)).status, 200, '/readyz 200')
    const res = await send(url, '/v1/reports/q', { headers: { authorization: `Bearer ${token}` } })
    t.equal(res.status, 200)
    t.equal(upstream.requests.at(-1)?.headers['x-gateway-user'], 'corp:ada', 'the IdP\'s user reached the upstream')
  })
})

t.test('an agent\'s directory with a private CA\'s certificate: the directory fetch trusts NODE_EXTRA_CA_CERTS', async (t) => {
  const origin = await httpsServer(t, { keys: [] })
  const ca = caFile(t)
  // keygate's directory fetch, with the origin allowed on a private address as the agents file's privateAddress does
  const script = `
    import { directoryFetch } from ${JSON.stringify(join(root, 'gateway/src/agents/directory-fetch.ts'))}
    const fetch = directoryFetch({ privateOrigins: new Set([${JSON.stringify(origin)}]) })
    try {
      const res = await fetch(${JSON.stringify(`${origin}/.well-known/http-message-signatures-directory`)})
      console.log(JSON.stringify({ status: res.status }))
    } catch (err) {
      console.log(JSON.stringify({ reason: err.reason, message: err.message }))
    }`
  const run = async (env: Record<string, string>): Promise<{ status?: number, reason?: string, message?: string }> => {
    const { stdout } = await promisify(execFile)(process.execPath, [...TYPESCRIPT_NODE_ARGS, '--input-type=module', '-e', script],
      { cwd: root, env: { PATH: process.env.PATH ?? '', ...env } })
    return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { status?: number, reason?: string, message?: string }
  }
  const without = await run({})
  t.equal(without.reason, 'tls', `without it: refused by TLS (${without.message ?? ''})`)
  t.same(await run({ [variable]: ca }), { status: 200 }, 'with it: fetched')
})
