// The upstream's half of decision mode's unseenBody: digest. keygate, asked by nginx (its dialect,
// as contract and docs/decision-mode.md give its headers) about an RFC 9421 POST whose body it is
// never shown, allows it and answers X-Keygate-Content-Digest; the service behind the proxy checks
// the body against it. Run here: the client/README.md block "Upstreams behind decision mode:
// checking the body" (a Node.js server, the packed @keygate/client installed in a project of its
// own, run with plain node) as the service, given what nginx would send it: keygate's header and
// the body, or a tampered body; checkForwardedDigest itself; and the Python recipe
// docs/recipes/forwarded_digest.py, over the cases the unit test runs
// (test/helpers/forwarded-digest-cases.ts) and over the real decision's header.
import { execFile } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createSigner, httpbis } from 'http-message-signatures'
import t from 'tap'
import { checkForwardedDigest, FORWARDED_DIGEST_HEADER, login, registerKey, signRequest } from '#client'
import { route } from '../../gateway/src/proxy/route.js'
import { installedWithApt, runs } from '../helpers/apt.js'
import { docSnippet } from '../helpers/docs.js'
import { digestOf, FORWARDED_DIGEST_CASES, type ForwardedDigestVerdict } from '../helpers/forwarded-digest-cases.js'
import { send, type RawResponse } from '../helpers/http.js'
import { exitOn, startCommand } from '../helpers/listening.js'
import { installInScratch, packed } from '../helpers/packages.js'
import { freePort } from '../helpers/redis.js'
import { addUser, PASSWORD, startTestGateway } from '../helpers/stack.js'

t.setTimeout(300_000)

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const README = 'client/README.md'
const HEADING = 'Upstreams behind decision mode: checking the body'
const RECIPE = join(ROOT, 'docs/recipes/forwarded_digest.py')
/** the origin the client addresses, which nginx passes on as X-Forwarded-Host and -Proto */
const ORIGIN = 'https://api.example.com'
const TARGET = '/v1/clients/'
const run = promisify(execFile)

/** The Python recipe's verdict on a header (undefined: absent) and a body, from its exit code and its line. */
async function pythonVerdict (python: string, header: string | undefined, body: Buffer): Promise<{ verdict: ForwardedDigestVerdict; line: string }> {
  const child = execFile(python, [RECIPE, ...(header === undefined ? [] : [header])], { encoding: 'utf8' })
  child.stdin?.end(body)
  const [code, stdout, stderr] = await new Promise<[number | null, string, string]>((resolve) => {
    let out = ''
    let err = ''
    child.stdout?.on('data', (chunk: string) => { out += chunk })
    child.stderr?.on('data', (chunk: string) => { err += chunk })
    child.on('close', (exit) => { resolve([exit, out, err]) })
  })
  const line = stdout.trim()
  if (stderr !== '') return { verdict: 'malformed', line: `stderr: ${stderr}` }
  if (code === 0) return { verdict: /nothing to check/.test(line) ? 'nothing-to-check' : 'ok', line }
  return { verdict: (/^refused \(([a-z-]+)\)/.exec(line)?.[1] ?? `exit ${String(code)}`) as ForwardedDigestVerdict, line }
}

function python (): string {
  const found = installedWithApt('python3', () => runs('python3', ['--version']) ?? runs('/usr/bin/python3', ['--version']), ['python3'])
  if ('reason' in found) throw new Error(`This test needs ${found.reason}`)
  return found.path
}

t.test('docs/recipes/forwarded_digest.py: every case as checkForwardedDigest decides it', async (t) => {
  const py = python()
  const { stdout } = await run(py, ['-c', 'import sys; print(sys.version_info >= (3, 8))'])
  t.equal(stdout.trim(), 'True', 'Python 3.8 or later, as the recipe says it needs')
  for (const { name, header, body, verdict, algorithms } of FORWARDED_DIGEST_CASES) {
    const got = await pythonVerdict(py, header, body)
    t.equal(got.verdict, verdict, `${name}: ${got.line}`)
    if (verdict === 'ok') t.match(got.line, `: ${(algorithms ?? []).join(', ')} of the body`, `${name}: checked ${String(algorithms)}`)
  }
  const { stdout: usage } = await run(py, [RECIPE, 'a', 'b']).catch((err: { stdout: string; stderr: string; code: number }) => {
    t.equal(err.code, 1, 'two arguments: a usage error')
    return { stdout: err.stderr }
  })
  t.match(usage, /^usage: python3 forwarded_digest.py \[HEADER_VALUE\] < body/)
})

t.test('a real decision (nginx dialect) allows an RFC 9421 POST it is not shown the body of; the upstream checks the body', async (t) => {
  // The service: the README's block, run as written (its port made a free one) with plain node in a
  // project where the packed @keygate/client is installed
  const block = docSnippet(README, HEADING, 'js')
  const port = await freePort()
  const script = block.replaceAll('8081', String(port))
  t.not(script, block, 'the block\'s port made a free one')
  const project = await installInScratch(t, (await packed('@keygate/client')).path)
  writeFileSync(join(project, 'upstream.mjs'), script)
  const service = await startCommand(process.execPath, ['upstream.mjs'], {}, project, { ready: /^listening on (http:\/\/\S+)$/m })
  t.teardown(async () => { await exitOn(service.child, 'SIGTERM') })
  t.equal(service.url, `http://127.0.0.1:${port}`, 'the service says where it listens')

  // keygate, with a decision listener and a route that lets a signed digest stand for the body
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: service.url,
    routes: (upstream) => [route({
      name: 'deferred', prefix: TARGET, upstream, auth: 'signed', methods: ['POST'], signature: 'rfc9421', unseenBody: 'digest'
    }, { bodyLimit: 1 << 20, timeoutMs: 5000 })],
    config: { decision: { port: 0, host: '127.0.0.1', trustedProxies: ['127.0.0.1'] } }
  })
  const decisions = await gw.app.keygate.decisions!.listen({ port: 0, host: '127.0.0.1' })
  await addUser(gw, 'alice')
  const { token } = await login({ baseUrl: gw.url, username: 'alice', password: PASSWORD })
  const privateKey = generateKeyPairSync('ed25519').privateKey
  const { apiKey } = await registerKey({ baseUrl: gw.url, token, name: 'laptop', privateKey })

  /** What nginx's auth_request asks keygate about the client's request: its headers, and the original's in X-Original-* (never its body). */
  const decide = async (headers: Record<string, string>, body: string): Promise<RawResponse> => await send(decisions, '/decide/nginx', {
    method: 'GET',
    headers: {
      ...headers,
      authorization: `Bearer ${token}`,
      'x-original-method': 'POST',
      'x-original-uri': TARGET,
      'x-forwarded-host': new URL(ORIGIN).host,
      'x-forwarded-proto': 'https',
      'x-forwarded-for': '203.0.113.7',
      'x-original-content-length': String(Buffer.byteLength(body))
    }
  })
  /** What nginx then sends the service: the client's request, with keygate's X-Keygate-Content-Digest set on it (or none), and a body. */
  const forward = async (digest: string | undefined, body: string | Buffer): Promise<RawResponse> => await send(service.url, TARGET, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(digest !== undefined && { [FORWARDED_DIGEST_HEADER]: digest }) },
    body
  })

  const body = JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '12345678' })
  const tampered = body.replace('ada@', 'eve@')

  // 1. Signed by @keygate/client: Content-Digest sha-256
  const signed = await signRequest({ scheme: 'rfc9421', method: 'POST', target: TARGET, body, apiKey, privateKey, baseUrl: ORIGIN })
  t.equal(signed['Content-Digest'], digestOf('sha-256', body), 'the client signs the body\'s sha-256')
  const clientHeaders: Record<string, string> = Object.fromEntries(Object.entries(signed).map(([name, value]) => [name.toLowerCase(), value]))

  // 2. Signed by another implementation (http-message-signatures), with a Content-Digest of two digests
  const twoDigests = `${digestOf('sha-512', body)}, ${digestOf('sha-256', body)}`
  const other = await httpbis.signMessage({
    key: createSigner(privateKey, 'ed25519', apiKey),
    fields: ['@method', '@target-uri', 'content-type', 'content-digest'],
    params: ['keyid', 'alg', 'created', 'nonce'],
    paramValues: { created: new Date(), nonce: 'forwarded-digest-test' }
  }, { method: 'POST', url: ORIGIN + TARGET, headers: { 'content-type': 'application/json', 'content-digest': twoDigests } })
  const otherHeaders: Record<string, string> = Object.fromEntries(Object.entries(other.headers).map(([name, value]) => [name.toLowerCase(), String(value)]))

  const py = python()
  for (const [signer, headers, digest, algorithms] of [
    ['@keygate/client (sha-256)', clientHeaders, digestOf('sha-256', body), ['sha-256']],
    ['http-message-signatures (sha-512 and sha-256)', otherHeaders, twoDigests, ['sha-512', 'sha-256']]
  ] as const) {
    t.test(signer, async (t) => {
      const decision = await decide(headers, body)
      t.equal(decision.status, 200, `keygate allows it, not shown the body: ${decision.headers['x-keygate-problem'] ?? ''}`)
      const forwarded = decision.headers[FORWARDED_DIGEST_HEADER]
      t.equal(forwarded, digest, 'and answers the Content-Digest the signature covers')
      if (typeof forwarded !== 'string') return

      t.same(await checkForwardedDigest(decision.headers, Buffer.from(body)), { ok: true, checked: true, algorithms },
        'checkForwardedDigest accepts the body that was signed')
      t.match(await checkForwardedDigest(decision.headers, Buffer.from(tampered)), { ok: false, reason: 'mismatch' },
        'and refuses a tampered one')
      t.match(await pythonVerdict(py, forwarded, Buffer.from(body)), { verdict: 'ok' }, 'the Python recipe accepts the body')
      t.match(await pythonVerdict(py, forwarded, Buffer.from(tampered)), { verdict: 'mismatch' }, 'and refuses the tampered one')

      // The README's service, given what nginx gives it
      const passed = await forward(forwarded, body)
      t.equal(passed.status, 200, `the service takes the body signed: ${passed.text}`)
      t.same(passed.json(), { bytes: Buffer.byteLength(body), digestChecked: true }, 'having checked its digest')
      const refused = await forward(forwarded, tampered)
      t.equal(refused.status, 400, 'the service refuses the tampered body')
      t.match(refused.text, /^mismatch: x-keygate-content-digest sha-\d+ is not the digest of the \d+ bytes of body received/, refused.text)
    })
  }

  t.test('the README\'s service without the header: nothing to check', async (t) => {
    const passed = await forward(undefined, body)
    t.equal(passed.status, 200)
    t.same(passed.json(), { bytes: Buffer.byteLength(body), digestChecked: false })
    const empty = await send(service.url, TARGET, { method: 'GET' })
    t.same(empty.json(), { bytes: 0, digestChecked: false }, 'a request without a body either')
    const malformed = await forward('sha-256=abc', body)
    t.equal(malformed.status, 400, 'a header that does not parse is refused')
    t.match(malformed.text, /^malformed: /)
  })
})
