// @keygate/client in a real browser: headless Chromium (see test/helpers/chromium.ts for which one)
// loads the built module (client/tsconfig.json compiled, as npm run build -w @keygate/client does)
// from a <script type="module"> and signs with the page's WebCrypto, against a running gateway that
// accepts what it signs. The page is same-origin with the gateway, so no CORS is involved: it is
// served at the gateway's origin by request interception, as are the module's files; every other
// request to that origin goes to the gateway, and nothing may go anywhere else.
import { createVerify, generateKeyPairSync } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join, normalize, sep } from 'node:path'
import t from 'tap'
import { builtCheckout } from '../helpers/build.js'
import { launchChromium } from '../helpers/chromium.js'
import { docSnippet } from '../helpers/docs.js'
import { addUser, PASSWORD, startStack } from '../helpers/stack.js'

t.setTimeout(300_000)

const TS = 1_790_000_000_000

/** The page: imports the client as a browser program would, runs the whole flow, and leaves what the user would see in window.result. */
const PAGE_SCRIPT = `
import {
  apiKeyOf, createClient, dpopThumbprint, generateDpopKey, keyRegistration, login, registerKey, signRequest, SigningInputError
} from '/__client/index.js'

const input = JSON.parse(document.getElementById('input').textContent)
const baseUrl = location.origin
const answer = async (response) => ({ status: response.status, body: await response.json() })
const out = {}
try {
  const { token } = await login({ baseUrl, username: 'alice', password: input.password })

  // 1. A PKCS#8 PEM private key, as a web app might hold one
  out.registration = await keyRegistration('browser pem', input.pem)
  const registered = await registerKey({ baseUrl, token, name: 'browser pem', privateKey: input.pem })
  out.apiKeys = [registered.apiKey, await apiKeyOf(input.pem), await apiKeyOf(input.pkcs1)]
  const client = createClient({ baseUrl, token, privateKey: input.pem })
  const ada = JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '31415926' })
  const created = await answer(await client.fetch('POST', '/v1/clients/', ada))
  out.created = created
  out.fetched = await answer(await client.fetch('GET', '/v1/clients/' + created.body.id))
  const fixed = { method: 'POST', target: '/v1/clients/', body: input.fixedBody, apiKey: registered.apiKey, timestamp: input.ts }
  out.fixed = await signRequest({ ...fixed, privateKey: input.pem })
  out.fixedPkcs1 = await signRequest({ ...fixed, privateKey: input.pkcs1 })

  // A signature with one bit flipped, sent with the page's own fetch
  const headers = await signRequest({ method: 'GET', target: '/v1/clients/' + created.body.id, apiKey: registered.apiKey, privateKey: input.pem })
  const bytes = [...atob(headers['X-API-Signature'])].map((c) => c.charCodeAt(0))
  bytes[10] ^= 0x01
  out.tampered = await answer(await fetch('/v1/clients/' + created.body.id, {
    headers: { ...headers, 'X-API-Signature': btoa(String.fromCharCode(...bytes)), authorization: 'Bearer ' + token }
  }))

  // 2. A non-extractable CryptoKey made by the page: its public half registered as SPKI PEM
  const pair = await crypto.subtle.generateKey(
    { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, false, ['sign', 'verify'])
  const spki = new Uint8Array(await crypto.subtle.exportKey('spki', pair.publicKey))
  const publicPem = '-----BEGIN PUBLIC KEY-----\\n' + btoa(String.fromCharCode(...spki)).match(/.{1,64}/g).join('\\n') + '\\n-----END PUBLIC KEY-----\\n'
  const second = await registerKey({ baseUrl, token, name: 'browser cryptokey', privateKey: pair.privateKey, publicKey: publicPem })
  out.cryptoKeyApiKeys = [second.apiKey, await apiKeyOf(pair.publicKey), await apiKeyOf(publicPem)]
  out.extractable = pair.privateKey.extractable
  const webClient = createClient({ baseUrl, token, privateKey: pair.privateKey, apiKey: second.apiKey })
  const grace = JSON.stringify({ name: 'Grace Hopper', email: 'grace@example.com', tax_id: '27182818' })
  const made = await answer(await webClient.fetch('POST', '/v1/clients/', grace))
  out.cryptoKeyCreated = made
  out.cryptoKeyFetched = await answer(await webClient.fetch('GET', '/v1/clients/' + made.body.id))
  try {
    createClient({ baseUrl, token, privateKey: pair.privateKey })
  } catch (err) {
    out.mistake = { isSigningInputError: err instanceof SigningInputError, input: err.input, message: err.message }
  }

  // 3. Page-made Ed25519 and P-256 key pairs (non-extractable), in both schemes: RFC 9421 and the X-API-* headers
  out.modern = {}
  for (const [type, algorithm] of [['ed25519', { name: 'Ed25519' }], ['p256', { name: 'ECDSA', namedCurve: 'P-256' }]]) {
    const modern = await crypto.subtle.generateKey(algorithm, false, ['sign', 'verify'])
    const der = new Uint8Array(await crypto.subtle.exportKey('spki', modern.publicKey))
    const pem = '-----BEGIN PUBLIC KEY-----\\n' + btoa(String.fromCharCode(...der)).match(/.{1,64}/g).join('\\n') + '\\n-----END PUBLIC KEY-----\\n'
    const done = await registerKey({ baseUrl, token, name: 'browser ' + type, privateKey: modern.privateKey, publicKey: pem })
    const results = { apiKey: done.apiKey }
    for (const scheme of ['rfc9421', 'seed']) {
      const modernClient = createClient({ baseUrl, token, privateKey: modern.privateKey, apiKey: done.apiKey, scheme })
      const taxId = String(10000000 + Object.keys(out.modern).length * 10 + (scheme === 'seed' ? 1 : 2))
      const body = JSON.stringify({ name: type + ' ' + scheme, email: type + scheme + '@example.com', tax_id: taxId })
      const made = await answer(await modernClient.fetch('POST', '/v1/clients/', body))
      results[scheme] = { created: made, fetched: await answer(await modernClient.fetch('GET', '/v1/clients/' + made.body.id + '?via=' + scheme)) }
    }
    out.modern[type] = results
  }

  // 4. DPoP: page-made non-extractable key pairs (ES256, EdDSA); the token bound to each, used with proofs, refused as Bearer
  out.dpop = {}
  for (const alg of ['ES256', 'EdDSA']) {
    const dpop = await generateDpopKey(alg)
    const bound = await login({ baseUrl, username: 'alice', password: input.password, dpop })
    const claims = JSON.parse(atob(bound.token.split('.')[1].replaceAll('-', '+').replaceAll('_', '/')))
    const dpopClient = createClient({ baseUrl, token: bound.token, privateKey: input.pem, dpop })
    out.dpop[alg] = {
      extractable: dpop.privateKey.extractable,
      tokenType: bound.tokenType,
      bound: claims.cnf?.jkt === await dpopThumbprint(dpop),
      withProof: (await dpopClient.fetch('GET', '/v1/clients/')).status,
      asBearer: (await createClient({ baseUrl, token: bound.token, privateKey: input.pem }).fetch('GET', '/v1/clients/')).status
    }
  }
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err)
}
window.result = out
`

t.test('the built client signs in Chromium (a PEM key; page-made RSA, Ed25519 and P-256 CryptoKeys; both schemes); keygate accepts it', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'alice')
  const origin = new URL(gw.url).origin

  // The built module: client/dist of the suite's one build of the checkout (npm run build, whose
  // first step is npm run build -w @keygate/client), read-only.
  const dist = join(await builtCheckout(), 'client', 'dist')
  t.ok(existsSync(join(dist, 'index.js')) && existsSync(join(dist, 'protocol/index.js')), 'the client is built')

  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const fixedBody = '{"name":"Zoë","email":"zoe@example.com","tax_id":"12345678"}'
  const input = {
    password: PASSWORD,
    pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    pkcs1: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
    fixedBody,
    ts: TS
  }
  const html = '<!doctype html><meta charset="utf-8"><title>keygate client</title>' +
    `<script type="application/json" id="input">${JSON.stringify(input).replaceAll('<', '\\u003c')}</script>` +
    `<script type="module">${PAGE_SCRIPT}</script>`

  const browser = await launchChromium()
  t.teardown(async () => { await browser.close() })
  t.comment(`browser: ${await browser.version()}`)
  const page = await browser.newPage()
  const served: string[] = []
  const elsewhere: string[] = []
  const failures: string[] = []
  await page.setRequestInterception(true)
  page.on('request', (request) => {
    const url = new URL(request.url())
    if (url.origin !== origin) {
      elsewhere.push(url.href)
      void request.abort()
    } else if (url.pathname === '/__page.html') {
      void request.respond({ status: 200, contentType: 'text/html; charset=utf-8', body: html })
    } else if (url.pathname.startsWith('/__client/')) {
      const file = normalize(join(dist, decodeURIComponent(url.pathname.slice('/__client/'.length))))
      if (file.startsWith(dist + sep) && file.endsWith('.js') && existsSync(file)) {
        served.push(url.pathname)
        void request.respond({ status: 200, contentType: 'text/javascript; charset=utf-8', body: readFileSync(file) })
      } else {
        void request.respond({ status: 404, contentType: 'text/plain', body: 'not found' })
      }
    } else {
      void request.continue()
    }
  })
  page.on('pageerror', (err) => { failures.push(`page error: ${err instanceof Error ? err.message : String(err)}`) })
  page.on('requestfailed', (request) => { if (!elsewhere.includes(request.url())) failures.push(`failed: ${request.url()}`) })

  await page.goto(`${gw.url}/__page.html`, { timeout: 60_000 })
  await page.waitForFunction('window.result !== undefined', { timeout: 120_000 })
  const result = await page.evaluate('window.result') as Record<string, unknown> & {
    error?: string
    registration: { name: string; publicKey: string; signature: string }
    apiKeys: string[]
    created: { status: number; body: Record<string, unknown> }
    fetched: { status: number; body: Record<string, unknown> }
    fixed: Record<string, string>
    fixedPkcs1: Record<string, string>
    tampered: { status: number; body: Record<string, unknown> }
    cryptoKeyApiKeys: string[]
    cryptoKeyCreated: { status: number; body: Record<string, unknown> }
    cryptoKeyFetched: { status: number; body: Record<string, unknown> }
    dpop?: Record<string, unknown>
  }
  t.equal(result.error, undefined, 'the page ran the whole flow without an error')

  t.equal(result.registration.publicKey, publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    'keyRegistration: the public half, as node:crypto writes it')
  t.ok(createVerify('sha256').update('browser pem').verify(publicKey, result.registration.signature, 'base64'), 'and the name signed')
  const [registered, own, ofPkcs1] = result.apiKeys
  t.match(registered, /^[0-9a-f]{64}$/, 'registerKey from the page: keygate answered an apiKey')
  t.equal(own, registered, 'apiKeyOf(pem) in the page is the apiKey keygate computed')
  t.equal(ofPkcs1, registered, 'and so is apiKeyOf of the PKCS#1 PEM ("BEGIN RSA PRIVATE KEY") of the same key')

  t.equal(result.created.status, 201, 'the signed POST /v1/clients/ is accepted')
  t.match(result.created.body, { id: String, name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '31415926' }, 'and creates the client')
  t.equal(result.fetched.status, 200, 'the signed GET /v1/clients/{id} is accepted')
  t.same(result.fetched.body, result.created.body, 'and answers the created client')

  t.same(Object.keys(result.fixed), ['X-API-Key', 'X-API-Timestamp', 'X-API-Signature'])
  const signed = Buffer.from(`${TS}POST/v1/clients/${fixedBody}`, 'utf8')
  t.ok(createVerify('sha256').update(signed).verify(publicKey, result.fixed['X-API-Signature'] ?? '', 'base64'),
    'node:crypto verifies the page\'s signature over the exact UTF-8 bytes of the signing string')
  t.same(result.fixedPkcs1, result.fixed, 'the PKCS#1 PEM of the key signs alike')

  t.equal(result.tampered.status, 401, 'a signature with one bit flipped is refused')
  t.match(result.tampered.body, { code: 'INVALID_SIGNATURE', apiKey: registered, method: 'GET' }, 'with INVALID_SIGNATURE')

  const [cryptoKeyApiKey, ...computed] = result.cryptoKeyApiKeys
  t.match(cryptoKeyApiKey, /^[0-9a-f]{64}$/, 'a page-made key pair registers with its public half given as SPKI PEM')
  t.same(computed, [cryptoKeyApiKey, cryptoKeyApiKey], 'apiKeyOf(publicKey) and apiKeyOf(public PEM) agree with keygate')
  t.not(cryptoKeyApiKey, registered)
  t.equal(result.extractable, false, 'the private CryptoKey is not extractable')
  t.equal(result.cryptoKeyCreated.status, 201, 'a POST signed with the non-extractable CryptoKey is accepted')
  t.match(result.cryptoKeyCreated.body, { id: String, name: 'Grace Hopper', tax_id: '27182818' })
  t.equal(result.cryptoKeyFetched.status, 200)
  t.same(result.cryptoKeyFetched.body, result.cryptoKeyCreated.body, 'and the GET of the client it created')
  t.match(result.mistake, { isSigningInputError: true, input: 'apiKey', message: /non-extractable CryptoKey/ },
    'createClient with that key and no apiKey throws a SigningInputError at once')

  type ModernRun = { created: { status: number; body: Record<string, unknown> }; fetched: { status: number } }
  const modern = result.modern as Record<string, Record<string, ModernRun>>
  for (const type of ['ed25519', 'p256']) {
    for (const scheme of ['rfc9421', 'seed']) {
      const run = modern[type]?.[scheme]
      t.equal(run?.created.status, 201, `a page-made ${type} key, ${scheme}: the signed POST is accepted (${JSON.stringify(run?.created.body)})`)
      t.equal(run?.fetched.status, 200, `a page-made ${type} key, ${scheme}: the signed GET with a query too`)
    }
  }

  for (const alg of ['ES256', 'EdDSA']) {
    t.same(result.dpop?.[alg], { extractable: false, tokenType: 'DPoP', bound: true, withProof: 200, asBearer: 401 },
      `DPoP ${alg} in the page: a non-extractable key, the token bound to it (cnf.jkt), accepted with proofs, refused as Bearer`)
  }

  t.ok(served.includes('/__client/index.js') && served.includes('/__client/protocol/index.js'), 'the page loaded the built module\'s files')
  t.same(elsewhere, [], 'the page asked no other origin for anything')
  t.same(failures, [], 'no script error or failed request')

  // client/README.md's "In a browser" block, as the page of a site keygate serves: the built module at
  // the block's /assets/keygate-client/, and before the block the username and password the reader's
  // login form would give it. What the reader sees is what the page's requests got.
  await t.test('client/README.md "In a browser": the block, as a page at keygate\'s origin, logs in, registers a page-made key and signs a GET', async (t) => {
    const block = docSnippet('client/README.md', 'In a browser', 'html')
    const readme = await browser.newPage()
    t.teardown(async () => { await readme.close() })
    const assets = '/assets/keygate-client/'
    t.ok(block.includes(`'${assets}index.js'`), 'the block imports the module from /assets/keygate-client/')
    const given = `<script>var username = 'alice', password = ${JSON.stringify(PASSWORD)}</script>`
    const html = `<!doctype html><meta charset="utf-8"><title>keygate client</title>${given}\n${block}`
    const answers: Array<{ method: string; path: string; status: number; sent: Record<string, string>; body: unknown }> = []
    const problems: string[] = []
    await readme.setRequestInterception(true)
    readme.on('request', (request) => {
      const url = new URL(request.url())
      if (url.origin !== origin) {
        problems.push(`asked another origin: ${url.href}`)
        void request.abort()
      } else if (url.pathname === '/__readme.html') {
        void request.respond({ status: 200, contentType: 'text/html; charset=utf-8', body: html })
      } else if (url.pathname.startsWith(assets)) {
        const file = normalize(join(dist, decodeURIComponent(url.pathname.slice(assets.length))))
        const found = file.startsWith(dist + sep) && file.endsWith('.js') && existsSync(file)
        void request.respond(found
          ? { status: 200, contentType: 'text/javascript; charset=utf-8', body: readFileSync(file) }
          : { status: 404, contentType: 'text/plain', body: 'not found' })
      } else {
        void request.continue()
      }
    })
    const done = new Promise<void>((resolve) => {
      readme.on('response', (response) => {
        const url = new URL(response.url())
        if (!url.pathname.startsWith('/v1/')) return
        const request = response.request()
        void response.json().catch(() => undefined).then((body: unknown) => {
          answers.push({ method: request.method(), path: url.pathname + url.search, status: response.status(), sent: request.headers(), body })
          if (request.method() === 'GET' && url.pathname === '/v1/clients/') resolve()
        })
      })
    })
    readme.on('pageerror', (err) => { problems.push(`page error: ${err instanceof Error ? err.message : String(err)}`) })
    await readme.goto(`${gw.url}/__readme.html`, { timeout: 60_000 })
    let waited: NodeJS.Timeout | undefined
    await Promise.race([done, new Promise((resolve) => { waited = setTimeout(resolve, 60_000) })])
    clearTimeout(waited) // else it keeps the test's process alive for its 60 s after the test
    t.same(problems, [], 'no script error, nothing asked of another origin')
    t.same(answers.map(({ method, path, status }) => `${method} ${path} ${status}`),
      ['POST /v1/auth/token 200', 'POST /v1/api-keys 201', 'GET /v1/clients/ 200'], 'the page logged in, registered its key and its signed GET was accepted')
    const [, registered, listed] = answers
    const apiKey = (registered?.body as { apiKey?: string } | undefined)?.apiKey
    t.match(apiKey, /^[0-9a-f]{64}$/, 'keygate answered the registration with an apiKey')
    t.equal(listed?.sent['x-api-key'], apiKey, 'the GET was signed with the page-made key registered')
    t.match(listed?.body, { items: Array }, 'and answered alice\'s clients')
  })
})
