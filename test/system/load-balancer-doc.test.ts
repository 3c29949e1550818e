// The nginx block of docs/load-balancer.md ("nginx in front of keygate"), read from the page (test/helpers/docs.ts)
// and run in Debian's nginx as written, with only what a deployment fills in changed: the gateway's
// address, a free port of 127.0.0.1 instead of 443 (a port a client must write in Host, as on
// :8091), and a certificate made here with openssl. Behind it, a gateway trusting 127.0.0.1 (what
// the page asks for nginx on the same machine) and a recorder as the upstream. Requests signed
// with the seed's scheme and with RFC 9421's default components (@target-uri: scheme, host and
// port as the client addressed them) reach the upstream. The same block with nginx's `$host`
// where it says `$http_host` (the docs' earlier advice) refuses RFC 9421: the test can fail.
import { generateKeyPairSync } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { Agent } from 'undici'
import { createClient, login, registerKey, type FetchFunction, type SignatureScheme } from '../../client/src/index.js'
import { loadConfig } from '../../gateway/src/config/env.js'
import { docSnippet } from '../helpers/docs.js'
import { findNginx, runNginx, type Nginx } from '../helpers/nginx.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { addUser, PASSWORD, startStack } from '../helpers/stack.js'

const nginx = findNginx()
const skip = 'reason' in nginx ? `nginx cannot be installed here: ${nginx.reason}` : false

const block = docSnippet('docs/load-balancer.md', 'nginx in front of keygate', 'nginx')

/** `text` with the one match of `pattern` replaced; throws when the block no longer has that line. */
function replaceOnce (text: string, pattern: RegExp, replacement: string): string {
  const matches = text.match(new RegExp(pattern.source, 'g')) ?? []
  if (matches.length !== 1) throw new Error(`the docs' nginx block has ${matches.length} lines like ${String(pattern)}, expected one:\n${text}`)
  return text.replace(pattern, replacement)
}

interface Tls { dir: string; cert: string; key: string; pem: string }

/** A self-signed certificate for 127.0.0.1 (openssl, as an operator would make a test one). */
function certificate (t: Test): Tls {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-tls-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const cert = join(dir, 'cert.pem')
  const key = join(dir, 'key.pem')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'pipe' })
  return { dir, cert, key, pem: readFileSync(cert, 'utf8') }
}

/** The block with the gateway's address, the port and the certificate filled in. */
function deployed (text: string, gatewayUrl: string, port: number, tls: Tls): string {
  let config = replaceOnce(text, /server 127\.0\.0\.1:8080;/, `server ${new URL(gatewayUrl).host};`)
  config = replaceOnce(config, /listen 443 ssl;/, `listen 127.0.0.1:${port} ssl;`)
  config = replaceOnce(config, /ssl_certificate +\S+;/, `ssl_certificate ${tls.cert};`)
  return replaceOnce(config, /ssl_certificate_key +\S+;/, `ssl_certificate_key ${tls.key};`)
}

interface Deployment { gatewayUrl: string; recorder: Recorder; tls: Tls; viaNginx: FetchFunction }

async function deploy (t: Test): Promise<Deployment> {
  const recorder = await startRecorder(t)
  const config = { clientAddress: loadConfig({ KEYGATE_TRUSTED_PROXIES: '127.0.0.1' }).clientAddress }
  const gw = await startStack(t, { store: 'memory', upstreamUrl: recorder.url, config })
  await addUser(gw, 'alice')
  const tls = certificate(t)
  // fetch that trusts the certificate made above, as a client of a real deployment trusts its CA
  const dispatcher = new Agent({ connect: { ca: tls.pem } })
  t.teardown(async () => { await dispatcher.close() })
  // (the undici package's Agent, which Node's fetch takes; its types are those of Node's own copy)
  const viaNginx: FetchFunction = async (url, init) =>
    await fetch(url, { ...init, dispatcher: dispatcher as unknown as NonNullable<RequestInit['dispatcher']> })
  return { gatewayUrl: gw.url, recorder, tls, viaNginx }
}

async function startProxy (t: Test, deployment: Deployment, text: string): Promise<Nginx> {
  if ('reason' in nginx) throw new Error(nginx.reason)
  return await runNginx(t, nginx.path, (port) => deployed(text, deployment.gatewayUrl, port, deployment.tls), 'https')
}

const newClient = (taxId: string): string => JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', tax_id: taxId })

t.test('the docs\' nginx block, on another port than 443, passes both schemes\' signatures on', { skip }, async (t) => {
  const deployment = await deploy(t)
  const proxy = await startProxy(t, deployment, block)
  const port = new URL(proxy.url).port
  t.not(port, '443')
  const baseUrl = proxy.url
  const fetch = deployment.viaNginx
  const { token } = await login({ baseUrl, username: 'alice', password: PASSWORD, fetch })
  const { privateKey } = generateKeyPairSync('ed25519')
  await registerKey({ baseUrl, token, name: 'behind nginx', privateKey, fetch })

  const schemes: SignatureScheme[] = ['seed', 'rfc9421']
  for (const [i, scheme] of schemes.entries()) {
    const client = createClient({ baseUrl, token, privateKey, scheme, fetch })
    const body = newClient(String(10_000_000 + i))
    const posted = await client.send('POST', '/v1/clients/', body)
    if (scheme === 'rfc9421') {
      t.match(posted.headers['signature-input'], /^sig1=\("@method" "@target-uri" "content-digest" "content-type"\);/,
        'rfc9421: the default components, @target-uri among them')
      t.match(Buffer.from(posted.signingString).toString('utf8'), `"@target-uri": https://127.0.0.1:${port}/v1/clients/\n`,
        'rfc9421: the client signed the URI it addressed, port included')
    }
    t.equal(posted.response.status, 200, `${scheme}: the signed POST is accepted (${await posted.response.clone().text()})`)
    const seen = deployment.recorder.requests.at(-1)
    t.equal(seen?.method, 'POST', `${scheme}: the upstream received it`)
    t.equal(seen?.url, '/v1/clients/')
    t.equal(seen?.body.toString('utf8'), body, `${scheme}: with the body as signed`)
    t.equal(seen?.headers['x-forwarded-proto'], 'https', `${scheme}: and nginx's X-Forwarded-Proto`)
    t.equal(seen?.headers['x-forwarded-host'], `127.0.0.1:${port}`, `${scheme}: and its X-Forwarded-Host, port included`)

    const listed = await client.fetch('GET', '/v1/clients/?limit=10')
    t.equal(listed.status, 200, `${scheme}: a signed GET with a query is accepted`)
    t.equal(deployment.recorder.requests.at(-1)?.url, '/v1/clients/?limit=10', `${scheme}: the upstream received it`)
  }
  t.equal(deployment.recorder.requests.length, 4, 'every request reached the upstream, once')
})

t.test('the same block with nginx\'s $host (the port dropped) refuses RFC 9421\'s default signatures', { skip }, async (t) => {
  const withHost = block.replaceAll('$http_host', '$host')
  t.not(withHost, block, 'the docs\' block sends $http_host')
  const deployment = await deploy(t)
  const proxy = await startProxy(t, deployment, withHost)
  const port = new URL(proxy.url).port
  const baseUrl = proxy.url
  const fetch = deployment.viaNginx
  const { token } = await login({ baseUrl, username: 'alice', password: PASSWORD, fetch })
  const { privateKey } = generateKeyPairSync('ed25519')
  await registerKey({ baseUrl, token, name: 'behind nginx', privateKey, fetch })

  const seed = await createClient({ baseUrl, token, privateKey, fetch }).fetch('GET', '/v1/clients/')
  t.equal(seed.status, 200, 'the seed\'s scheme signs no host: accepted')
  const rfc = await createClient({ baseUrl, token, privateKey, scheme: 'rfc9421', fetch }).fetch('GET', '/v1/clients/')
  const problem = await rfc.json() as { code?: string; signatureBase?: string[] }
  t.equal(rfc.status, 401, 'RFC 9421 over @target-uri: refused')
  t.equal(problem.code, 'INVALID_SIGNATURE')
  t.equal(problem.signatureBase?.[1], '"@target-uri": https://127.0.0.1/v1/clients/', `keygate verified a URI without the client's :${port}`)
  t.equal(deployment.recorder.requests.length, 1, 'only the seed request reached the upstream')
})
