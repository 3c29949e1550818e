// The developer portal in a real browser: headless Chromium (test/helpers/chromium.ts) drives the
// page keygate serves at /portal/, by its labels, as a user would, against a keygate on Redis in
// front of a recording upstream. Keys are made in the page (Ed25519, P-256; exportable; made
// elsewhere with the page's own openssl commands), signed calls go out in both schemes, a rewriting
// proxy (request interception) makes keygate refuse one and the page shows why, keys rotate and
// are revoked, the private key stays unexportable across a reload (a key made exportable too, once
// downloaded), a key's view shows its requests (usage flushed every 200 ms) and its calls per tool
// on an MCP route (a real MCP server behind it), Try it folds the long
// parts of its answer, the CSP holds and blocks nothing the page does, no /favicon.ico is asked
// for, and axe-core finds no serious or critical violation on any view. Screenshots of each view go to
// KEYGATE_SCREENSHOTS_DIR (npm run portal:screenshots: docs/portal) or a temporary folder.
import { execFileSync } from 'node:child_process'
import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { HTTPRequest } from 'puppeteer-core'
import t, { type Test } from 'tap'
import { createClient, registerKey } from '#client'
import { axeViolations, seriousOnes } from '../helpers/axe.js'
import { launchChromium } from '../helpers/chromium.js'
import { startMcpServer } from '../helpers/mcp-server.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { addUser, login, PASSWORD, startStack } from '../helpers/stack.js'

const ROOT = resolve(import.meta.dirname, '../..')
/** the views docs/portal.md shows, by file name */
const SCREENSHOTS = ['login.png', 'keys.png', 'key.png', 'new-key.png', 'try-it.png', 'try-it-refused.png'] as const

t.test('the developer portal in Chromium: keys made, used, rotated and revoked in the page', async (t) => {
  const recorder = await startRecorder(t)
  const mcp = await startMcpServer(t)
  const routes = routeFile(t, `routes:
  - name: clients
    prefix: /v1/clients/
    upstream: ${recorder.url}
    auth: signed
    methods: [GET, POST]
    rateLimits:
      - { by: key, limit: 100, window: 1h }
      - { by: user, limit: 1000, window: 1d }
  - { name: status, path: /status, upstream: ${recorder.url}, auth: public, methods: [GET] }
  - { name: mcp, path: /mcp, upstream: ${mcp.url}, auth: signed, mcp: { tools: { whoami: [] } } }
`)
  // usage counts flushed to Redis every 200 ms (5 s by default): a key's view shows the calls just made
  const gw = await startStack(t, {
    store: 'redis', upstreamUrl: recorder.url, config: { routesFile: routes.path, usageAnalytics: { enabled: true, flushMs: 200, maxSeries: 50_000 } }
  })
  await addUser(gw, 'alice')
  const origin = new URL(gw.url).origin
  const portal = `${origin}/portal/`

  const work = mkdtempSync(join(tmpdir(), 'keygate-portal-'))
  t.teardown(() => { rmSync(work, { recursive: true, force: true }) })
  const shots = process.env.KEYGATE_SCREENSHOTS_DIR !== undefined && process.env.KEYGATE_SCREENSHOTS_DIR !== ''
    ? resolve(process.env.KEYGATE_SCREENSHOTS_DIR)
    : join(work, 'screenshots')
  const downloads = join(work, 'downloads')
  mkdirSync(shots, { recursive: true })
  mkdirSync(downloads)

  const browser = await launchChromium()
  t.teardown(async () => { await browser.close() })
  t.comment(`browser: ${await browser.version()}`)
  const page = await browser.newPage()
  await page.setViewport({ width: 1200, height: 900 })
  const cdp = await page.createCDPSession()
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads, eventsEnabled: true })

  // A rewriting proxy on the way, when a test sets one; nothing may go to another origin.
  let rewrite: ((request: HTTPRequest) => { url?: string; postData?: string } | undefined) | undefined
  const elsewhere: string[] = []
  const failures: string[] = []
  // the page names an icon (an empty data: URL): no /favicon.ico asked for, which keygate would answer 404
  const favicons: string[] = []
  // the page's requests that carry its token: what a script or an extension in the page could lift
  const carried: Array<{ method: string; url: string; authorization: string; dpop: string | undefined }> = []
  await page.setRequestInterception(true)
  page.on('request', (request) => {
    const url = request.url()
    if (url.startsWith('blob:') || url.startsWith('data:')) { void request.continue(); return }
    if (new URL(url).pathname.endsWith('/favicon.ico')) favicons.push(url)
    const sent = request.headers()
    if (sent.authorization !== undefined) carried.push({ method: request.method(), url, authorization: sent.authorization, dpop: sent.dpop })
    if (new URL(url).origin !== origin) {
      elsewhere.push(url)
      void request.abort()
      return
    }
    void request.continue(rewrite?.(request))
  })
  page.on('pageerror', (err) => { failures.push(`page error: ${err instanceof Error ? err.message : String(err)}`) })
  // what the CSP blocks in each document (the DevTools protocol adds this listener; the CSP does not govern it)
  await page.evaluateOnNewDocument(`window.cspViolations = []
    document.addEventListener('securitypolicyviolation', (event) => { window.cspViolations.push(event.effectiveDirective + ' ' + event.blockedURI) })`)
  // every answer under /portal/ (the page, its bundles): the security headers
  const portalAnswers: Array<{ url: string; csp: string | undefined; nosniff: string | undefined; frames: string | undefined }> = []
  page.on('response', (response) => {
    if (!response.url().startsWith(portal)) return
    const headers = response.headers()
    portalAnswers.push({
      url: response.url(), csp: headers['content-security-policy'], nosniff: headers['x-content-type-options'], frames: headers['x-frame-options']
    })
  })

  // an accessible name and role; a name holding " is quoted with ' (puppeteer's ARIA selectors take no escapes)
  const aria = (name: string, role: string): string => `::-p-aria([name=${name.includes('"') ? `'${name}'` : `"${name}"`}][role="${role}"])`
  const click = async (name: string, role = 'button'): Promise<void> => { await page.locator(aria(name, role)).click() }
  const fill = async (name: string, value: string, role = 'textbox'): Promise<void> => { await page.locator(aria(name, role)).fill(value) }
  // the test's own typecheck has no DOM library: what runs in the page is given as text
  /** waits until the element's text matches (a string: is it) */
  const shows = async (selector: string, want: string | RegExp): Promise<void> => {
    const test = typeof want === 'string' ? `=== ${JSON.stringify(want)}` : `.match(new RegExp(${JSON.stringify(want.source)}, ${JSON.stringify(want.flags)}))`
    await page.waitForFunction(`(document.querySelector(${JSON.stringify(selector)})?.textContent ?? '')${test}`)
  }
  const heading = async (text: string): Promise<void> => { await shows('h1', text) }
  const focused = async (): Promise<string> => await page.evaluate('document.activeElement?.textContent ?? ""') as string
  const status = async (): Promise<string> => await page.$eval('#status', (el) => el.textContent ?? '')
  /** Sends the Try it form and waits for the answer (or the page's refusal to send). */
  const send = async (): Promise<string> => {
    await click('Send')
    await shows('#status', /^(Answer|Not sent):/)
    return await status()
  }
  const text = async (selector: string): Promise<string> => await page.$eval(selector, (el) => el.textContent ?? '')
  const shoot = async (name: (typeof SCREENSHOTS)[number]): Promise<void> => {
    await page.mouse.move(0, 0) // no button left in its hover colour
    await page.screenshot({ path: join(shots, name), fullPage: true })
  }
  /** the page from its top down to an element (Try it goes on with what was sent and the snippets: long, and shown as text) */
  const shootDownTo = async (name: (typeof SCREENSHOTS)[number], selector: string): Promise<void> => {
    await page.mouse.move(0, 0)
    const bottom = await page.evaluate(`document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect().bottom + window.scrollY`) as number
    await page.screenshot({ path: join(shots, name), clip: { x: 0, y: 0, width: 1200, height: Math.ceil(bottom) + 24 }, captureBeyondViewport: true })
  }
  const accessible = async (t: Test, view: string): Promise<void> => {
    const violations = await axeViolations(page)
    t.same(seriousOnes(violations), [],
      `axe: no serious or critical violation on ${view}`)
    for (const { line } of violations) t.comment(`axe on ${view}: ${line}`)
  }
  /**
   * Every visible control of the view is reached by Tab from the top of the page (a radio group
   * is one stop, as in every browser): nothing works only with a mouse.
   */
  const keyboardReaches = async (t: Test, view: string): Promise<void> => {
    const controls = await page.evaluate(`(() => {
      // shown: a box, not visibility: hidden, not inside a closed <details> (its content is content-visibility: hidden)
      const visible = (el) => !el.disabled && el.checkVisibility({ visibilityProperty: true, contentVisibilityAuto: false })
      const stops = new Map()
      for (const el of document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')) {
        // tabindex=-1: focused by the page itself (a view's heading), never a Tab stop
        if (!visible(el) || el.tabIndex < 0) continue
        const stop = el.type === 'radio' ? 'radio:' + el.name : 'control:' + stops.size
        el.dataset.stop = stop
        stops.set(stop, (el.getAttribute('aria-label') || el.labels?.[0]?.textContent || el.textContent || el.name || el.tagName).trim().slice(0, 60))
      }
      document.activeElement?.blur()
      return [...stops]
    })()`) as Array<[string, string]>
    const reached = new Set<string>()
    for (let i = 0; i < controls.length + 3; i++) {
      await page.keyboard.press('Tab')
      const stop = await page.evaluate('document.activeElement?.dataset?.stop ?? ""') as string
      if (stop !== '') reached.add(stop)
    }
    t.same(controls.filter(([stop]) => !reached.has(stop)).map(([, name]) => name), [], `${view}: Tab reaches each of its ${controls.length} controls`)
  }
  /** logs in, and waits for the view it leads to */
  const logIn = async (then = 'Your keys'): Promise<void> => {
    await fill('Username', 'alice')
    await fill('Password', PASSWORD)
    await click('Log in')
    await heading(then)
  }
  const newKey = async (name: string, type: 'ed25519' | 'p256' | 'rsa', where?: string): Promise<string> => {
    await click('New key', 'link')
    await heading('New key')
    if (where !== undefined) await click(where, 'radio')
    await fill('Name', name)
    await page.locator(aria('Key type', 'combobox')).fill(type)
    return name
  }
  const apiKeyShown = async (name: string): Promise<string> => {
    await heading(`Key "${name}"`)
    return await text('code.apikey')
  }
  /** in the page: the database the portal keeps its keys in, opened, and `act` run on its store */
  const inKeyStore = (act: string): string => `(async () => {
    const db = await new Promise((resolve, reject) => {
      const open = indexedDB.open('keygate-portal')
      open.onsuccess = () => { resolve(open.result) }
      open.onerror = () => { reject(open.error) }
    })
    const ask = (mode, request) => new Promise((resolve, reject) => {
      const asked = request(db.transaction('keys', mode).objectStore('keys'))
      asked.onsuccess = () => { resolve(asked.result) }
      asked.onerror = () => { reject(asked.error) }
    })
    try { return await (${act})(ask) } finally { db.close() }
  })()`
  /** the private key IndexedDB holds for `apiKey`, and what the page's own exportKey of it does */
  const storedKey = async (apiKey: string): Promise<unknown> => await page.evaluate(inKeyStore(`async (ask) => {
    const record = await ask('readonly', (store) => store.get(${JSON.stringify(apiKey)}))
    const exported = await crypto.subtle.exportKey('pkcs8', record.privateKey).then(() => 'exported', (err) => err.name + ': ' + err.message)
    return { extractable: record.privateKey.extractable, algorithm: record.privateKey.algorithm.name, exported }
  }`))
  type Scheme = 'Seed (X-API-* headers)' | 'RFC 9421 (HTTP Message Signatures)'
  /** fills Try it's form and sends it */
  const tryIt = async (input: { key: string; scheme: Scheme; method: string; query?: string; body?: string }): Promise<string> => {
    await click('Try it', 'link')
    await heading('Try it')
    await page.locator(aria('Route', 'combobox')).fill('clients')
    await page.locator(aria('Method', 'combobox')).fill(input.method)
    await fill('Path', '/v1/clients/')
    await fill('Query (optional)', input.query ?? '')
    await fill('Body (optional)', input.body ?? '')
    await click(input.scheme, 'radio')
    await page.locator(aria('Key', 'combobox')).fill(input.key)
    return await send()
  }

  // 1. The page, its security headers, the login view
  const answer = await page.goto(portal, { waitUntil: 'networkidle0' })
  const headers = answer?.headers() ?? {}
  t.match(headers['content-security-policy'], /^default-src 'none'; script-src 'self'; style-src 'self';/, 'the page comes with its strict CSP')
  t.equal(headers['x-content-type-options'], 'nosniff')
  t.equal(headers['referrer-policy'], 'no-referrer')
  t.equal(headers['set-cookie'], undefined, 'and no cookie')
  await heading('Log in')
  t.match(page.url(), /#\/login$/, 'not logged in: the login view')
  t.match(await text('main'), /reloading the page asks you to log in again/, 'which says a reload logs out')
  t.equal(await page.evaluate('document.activeElement?.getAttribute("name")'), 'username', 'the focus is on the username')
  await shoot('login.png')
  await accessible(t, 'the login view')

  // The CSP: an inline script put in the page does not run, and the browser reports why.
  const blocked = await page.evaluate(`(async () => {
    const violation = new Promise((resolve) => {
      document.addEventListener('securitypolicyviolation', (event) => { resolve(event.effectiveDirective) }, { once: true })
    })
    const script = document.createElement('script')
    script.textContent = 'window.injected = true'
    document.body.append(script)
    return { directive: await violation, ran: window.injected === true }
  })()`)
  t.same(blocked, { directive: 'script-src-elem', ran: false }, 'the CSP blocks an injected inline script, with a securitypolicyviolation')

  // from the keyboard alone: the focus is on the username; Tab to the password, Enter sends
  await page.keyboard.type('alice')
  await page.keyboard.press('Tab')
  await page.keyboard.type('not the password')
  await page.keyboard.press('Enter')
  await shows('#status', /^Not logged in/)
  t.match(await status(), /INVALID_CREDENTIALS/, 'a wrong password: keygate\'s code, in the live region')
  await keyboardReaches(t, 'the login view')
  await logIn()
  t.match(await status(), 'Logged in as alice')

  // 2. Keys made in the page: Ed25519 and P-256, not exportable
  await newKey('laptop ed25519', 'ed25519')
  await shoot('new-key.png')
  await accessible(t, 'the new-key view')
  await keyboardReaches(t, 'the new-key view')
  await click('Create key')
  const ed25519 = await apiKeyShown('laptop ed25519')
  t.match(ed25519, /^[0-9a-f]{64}$/, 'an Ed25519 key made in the page is registered')
  t.match(await text('dl.facts'), /TypeEd25519/)
  t.match(await text('dl.facts'), /Private keyin this browser, not exportable/)
  await newKey('laptop p256', 'p256')
  await click('Create key')
  const p256 = await apiKeyShown('laptop p256')
  t.match(p256, /^[0-9a-f]{64}$/, 'and a P-256 key')
  await accessible(t, 'a key\'s view')
  await keyboardReaches(t, 'a key\'s view')

  // 3. Try it: signed calls in both schemes reach the upstream with the identity
  t.equal(await tryIt({ key: ed25519, scheme: 'Seed (X-API-* headers)', method: 'POST', body: '{"name":"Ada Lovelace"}' }), 'Answer: 200 OK',
    'POST, seed scheme, Ed25519: accepted')
  t.equal(await focused(), 'Answer', 'the focus moves to the answer')
  let reached = recorder.requests.at(-1)
  t.match(reached, {
    method: 'POST', url: '/v1/clients/', headers: { 'x-gateway-user': 'alice', 'x-gateway-key': ed25519, 'x-gateway-key-name': 'laptop ed25519' }
  },
  'the upstream got it with the identity keygate vouches for')
  t.equal(reached?.body.toString(), '{"name":"Ada Lovelace"}', 'and the body as typed')
  t.equal(await tryIt({ key: p256, scheme: 'RFC 9421 (HTTP Message Signatures)', method: 'GET', query: 'limit=10' }), 'Answer: 200 OK',
    'GET with a query, RFC 9421, P-256: accepted')
  reached = recorder.requests.at(-1)
  t.match(reached, { method: 'GET', url: '/v1/clients/?limit=10', headers: { 'x-gateway-user': 'alice', 'x-gateway-key': p256, 'signature-input': /^sig1=/ } })
  t.match(await text('.answer'), /x-gateway-user|recorded/, 'the page shows the answer\'s headers and body')
  const snippets = await text('.snippets')
  t.match(snippets, /curl and openssl[\s\S]*@keygate\/client[\s\S]*Python/, 'then the three snippets of the request')
  t.equal(snippets.split(p256).length - 1, 3, 'each with the apiKey')
  t.ok(snippets.split('/v1/clients/?limit=10').length - 1 >= 3, 'and the target')
  const folds = async (): Promise<Array<[string, boolean]>> => await page.$$eval('.answer details', (all) =>
    all.map((one): [string, boolean] => [one.querySelector('summary')?.textContent ?? '', one.open]))
  t.match(await folds(), [[/^Headers and body \(\d+ bytes, application\/json\)$/, false], [/^What this browser sent, and what it signed$/, false],
    [/^This request as code: /, false]], 'the headers and body, what was sent and the snippets are folded')
  const answerHeight = async (): Promise<number> => await page.$eval('.answer', (el) => el.getBoundingClientRect().height)
  const folded = await answerHeight()
  t.ok(folded < 600, `the answer, folded, is short: its status in view (${Math.round(folded)} px)`)
  await page.click('.answer details.raw > summary')
  t.match(await folds(), [[/^Headers/, true], [/^What/, false], [/^This/, false]], 'a click on its summary unfolds the headers and body')
  t.ok(await page.$eval('.answer pre[aria-label="Answer body"]', (el) => el.getClientRects().length > 0), 'the body is then shown')
  await shootDownTo('try-it.png', '.answer pre[aria-label="Answer body"]')
  await accessible(t, 'Try it with an accepted answer')

  // 3b. The page's token is DPoP-bound: lifted out of its requests, it is refused without a proof by the page's key
  const lifted = carried.find((one) => one.method === 'GET' && new URL(one.url).pathname === '/v1/api-keys')
  t.match(lifted, { authorization: /^DPoP [\w-]+\.[\w-]+\.[\w-]+$/, dpop: /^[\w-]+\.[\w-]+\.[\w-]+$/ },
    'the page sends its token with the DPoP scheme and a proof')
  const stolen = (lifted?.authorization ?? '').slice('DPoP '.length)
  const claims = JSON.parse(Buffer.from(stolen.split('.')[1] ?? '', 'base64url').toString()) as { cnf?: { jkt?: string } }
  t.match(claims.cnf?.jkt, /^[\w-]{43}$/, 'the token carries cnf.jkt: bound to the page\'s non-extractable key')
  const beforeTheft = recorder.requests.length
  const withStolen = async (path: string, headers: Record<string, string>): Promise<[number, string]> => {
    const res = await fetch(`${origin}${path}`, { headers })
    return [res.status, (await res.json() as { code: string }).code]
  }
  t.same(await withStolen('/v1/api-keys', { authorization: `Bearer ${stolen}` }), [401, 'DPOP_REQUIRED'], 'the lifted token as Bearer: 401')
  t.same(await withStolen('/v1/api-keys', { authorization: `DPoP ${stolen}` }), [401, 'INVALID_DPOP_PROOF'], 'with the DPoP scheme but no proof: 401')
  t.same(await withStolen('/v1/api-keys', { authorization: `DPoP ${stolen}`, dpop: lifted?.dpop ?? '' }), [401, 'INVALID_DPOP_PROOF'],
    'with the page\'s own proof lifted too (already used): 401')
  const thief = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const thiefClient = createClient({ baseUrl: origin, token: stolen, privateKey: thief })
  t.equal((await thiefClient.fetch('GET', '/v1/clients/')).status, 401, 'on a signed route, with a signature: 401')
  t.equal(recorder.requests.length, beforeTheft, 'none of them reached the upstream')

  // 4. A rewriting proxy: keygate refuses, and the page says which part changed
  const upstreamSaw = recorder.requests.length
  rewrite = (request) => request.method() === 'POST' && request.url().endsWith('/v1/clients/')
    ? { postData: (request.postData() ?? '').replace('Ada', 'Eve') }
    : undefined
  t.equal(await tryIt({ key: ed25519, scheme: 'Seed (X-API-* headers)', method: 'POST', body: '{"name":"Ada Lovelace"}' }),
    'Answer: 401 Unauthorized INVALID_SIGNATURE', 'a body changed on the way: refused')
  let diagnosis = await text('section.diagnosis')
  t.match(diagnosis, 'another signing string than this browser signed; differing: bodySha256, signingStringSha256.', 'the diagnosis names the body\'s hash')
  const rows = await page.$$eval('table.diagnosis tr.differs th', (cells) => cells.map((cell) => cell.textContent))
  t.same(rows, ['Body SHA-256', 'Signing string SHA-256'], 'and marks the rows that differ (same length: the body was swapped in place)')
  rewrite = (request) => request.url().includes('?limit=10') ? { url: request.url().replace('limit=10', 'limit=99') } : undefined
  t.equal(await tryIt({ key: p256, scheme: 'RFC 9421 (HTTP Message Signatures)', method: 'GET', query: 'limit=10' }),
    'Answer: 401 Unauthorized INVALID_SIGNATURE', 'a query changed on the way (RFC 9421): refused')
  diagnosis = await text('section.diagnosis')
  t.match(diagnosis, /another signature base than this browser signed: 2 lines differ/, 'the diagnosis compares the signature bases')
  const marked = await page.$$eval('ol.lines li.differs', (items) => items.map((item) => item.textContent))
  t.same(marked, [`differs: "@target-uri": ${origin}/v1/clients/?limit=10`, `differs: "@target-uri": ${origin}/v1/clients/?limit=99`],
    'the line this browser signed and the one keygate verified, marked')
  rewrite = undefined
  t.equal(recorder.requests.length, upstreamSaw, 'neither refused request reached the upstream')
  await shootDownTo('try-it-refused.png', 'section.diagnosis')
  await accessible(t, 'Try it with a diagnosis')
  await keyboardReaches(t, 'Try it')

  // 5. Usage and the keys list, paged (keys made elsewhere too, by a program)
  await page.goto(`${portal}#/keys/${ed25519}`)
  await heading('Key "laptop ed25519"')
  await page.waitForSelector('caption ::-p-text(Limits per key)')
  const tableRows = async (selector: string): Promise<string[][]> => await page.$$eval(`${selector} tbody tr`, (rows) =>
    rows.map((row) => [...row.children].map((cell) => cell.textContent ?? '')))
  const keyLimit = await tableRows('.limits table')
  t.same(keyLimit, [['key-1h', 'clients', '100 per 1h per key', '1', '99', keyLimit[0]?.[5]]],
    'the key\'s usage: one call counted against its per-key limit (the refused one never passed the signature)')
  // its own requests: the accepted POST and the refused one, counted for the key that signed them
  await page.waitForSelector('caption ::-p-text(Requests signed with)')
  const totals = ['2', '1', '0', '1', '0', '1', 'INVALID_SIGNATURE 1']
  t.same(await tableRows('.calls .table-wrap:nth-child(1) table'), [['the last hour', ...totals], ['the last day', ...totals]],
    'the key\'s requests over the last hour and day: 2, one 2xx, one 4xx refused by keygate, INVALID_SIGNATURE')
  const minutes = await tableRows('.calls .table-wrap:nth-child(2) table')
  t.ok(minutes.length >= 1 && minutes.length <= 2, `minute by minute: the minutes with a request (${minutes.length})`)
  t.equal(minutes.reduce((sum, row) => sum + Number(row[1]), 0), 2, 'two requests in them')
  t.match(minutes[0]?.[0], /^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/, 'each a minute, UTC')
  const hours = await tableRows('.calls .table-wrap:nth-child(3) table')
  t.equal(hours.reduce((sum, row) => sum + Number(row[1]), 0), 2, 'and hour by hour')
  await accessible(t, 'a key\'s view with its requests')
  await shoot('key.png')
  await click('Reload its usage')
  await shows('#status', 'The usage of "laptop ed25519" is reloaded.')
  t.same((await tableRows('.calls .table-wrap:nth-child(1) table'))[0], ['the last hour', ...totals], 'Reload its usage reads them again')
  const token = await login(gw.url, 'alice')
  const made = Array.from({ length: 9 }, (_, i) => ({ name: `cli key ${i + 1}`, privateKey: generateKeyPairSync('ed25519').privateKey }))
  for (const key of made) await registerKey({ baseUrl: gw.url, token, name: key.name, privateKey: key.privateKey })
  await click('Your keys', 'link')
  await heading('Your keys')
  await page.waitForSelector('caption ::-p-text(page 1)')
  const listed = async (): Promise<string[][]> => await page.$$eval('table.keys tbody tr', (rows) =>
    rows.map((row) => [row.children[0]?.textContent ?? '', row.children[7]?.textContent ?? '']))
  const first = await listed()
  t.equal(first.length, 10, 'ten keys a page')
  t.same(first.slice(0, 9).map(([, where]) => where), Array(9).fill('elsewhere'), 'keys made by a program: not in this browser')
  t.same(first[9], ['laptop p256', 'in this browser'], 'the page\'s own keys: in this browser')
  await page.waitForSelector('caption ::-p-text(Your limits per user)')
  t.match(await text('main'), /user-1d\s*clients\s*1000 per 1d per user\s*2\s*998/, 'the user\'s usage: both calls that passed')
  await shoot('keys.png')
  await accessible(t, 'the keys view')
  await keyboardReaches(t, 'the keys view')
  await click('Next page')
  await page.waitForSelector('caption ::-p-text(page 2)')
  t.same(await listed(), [['laptop ed25519', 'in this browser']], 'the next page: the rest')
  t.equal(await focused(), 'Previous page', 'the focus stays on the pager (Next is disabled on the last page)')
  await click('Previous page')
  await page.waitForSelector('caption ::-p-text(page 1)')
  t.equal(await focused(), 'Next page', 'back on the first page, where Previous is disabled: the focus on Next')

  // 6. Rotate the Ed25519 key, try the new one, revoke the old one; the old key is refused
  await click('Next page')
  await click('laptop ed25519', 'link')
  await heading('Key "laptop ed25519"')
  await click('Rotate')
  await shows('h1', /^Key "laptop ed25519 \(rotated /)
  const rotated = await text('code.apikey')
  const rotatedName = (await text('h1')).replace(/^Key "|"$/g, '')
  t.match(await text('.rotation'), /This key replaces "laptop ed25519"/, 'rotate: a new key, which the page ties to the old one')
  t.equal(await page.$(aria('Revoke the old key', 'button')), null, 'no offer to revoke the old key before the new one has worked')
  t.equal(await tryIt({ key: rotated, scheme: 'Seed (X-API-* headers)', method: 'GET' }), 'Answer: 200 OK', 'the new key works')
  t.match(recorder.requests.at(-1)?.headers, { 'x-gateway-key': rotated, 'x-gateway-key-name': rotatedName })
  await click('Revoke the old key')
  await click('Yes, revoke "laptop ed25519"')
  await shows('#status', /revoked/)
  t.match(await status(), 'Key "laptop ed25519" revoked', 'the old key revoked, after its confirmation')
  t.equal(await tryIt({ key: ed25519, scheme: 'Seed (X-API-* headers)', method: 'GET' }), 'Answer: 401 Unauthorized UNKNOWN_API_KEY',
    'the revoked key\'s next call: refused, with its code')
  t.match(await text('.problem'), /Refused: UNKNOWN_API_KEY/)

  // Revoke from a key's own view: the confirmation, then keygate refuses the key
  await page.goto(`${portal}#/keys/${p256}`)
  await heading('Key "laptop p256"')
  await click('Revoke')
  t.match(await focused(), /^Revoke the key "laptop p256"\? .*cannot be undone/, 'the confirmation is asked, and focused')
  await click('Cancel')
  t.equal(await focused(), 'Revoke', 'Cancel: nothing revoked, the focus back on Revoke')
  await click('Revoke')
  await click('Yes, revoke "laptop p256"')
  await heading('Key "laptop p256"')
  await shows('dl.facts', /Staterevoked/)
  t.equal(await tryIt({ key: p256, scheme: 'RFC 9421 (HTTP Message Signatures)', method: 'GET' }), 'Answer: 401 Unauthorized UNKNOWN_API_KEY',
    'a key revoked from its view is refused too')

  // 7. The private key cannot be exported by the page itself, and survives a reload
  t.match(await storedKey(rotated), { extractable: false, algorithm: 'Ed25519', exported: /^InvalidAccessError/ },
    'the page\'s own exportKey of its IndexedDB CryptoKey fails')
  await page.reload({ waitUntil: 'networkidle0' })
  await heading('Log in')
  t.pass('a reload asks to log in again: the token was in memory only')
  await logIn('Try it')
  t.pass('and then goes back to the view it was on')
  t.equal(await tryIt({ key: rotated, scheme: 'RFC 9421 (HTTP Message Signatures)', method: 'GET', query: 'after=reload' }), 'Answer: 200 OK',
    'after the reload, Try it still signs with the key kept in IndexedDB')

  // 8. An exportable key, downloaded for the CLI
  await newKey('for the cli', 'p256', 'Made in this browser, exportable, downloaded for the CLI')
  t.match(await text('form'), /Anyone who gets that file can sign requests as you/, 'the page says plainly what exportable means')
  const downloaded = new Promise<void>((resolve) => {
    cdp.on('Browser.downloadProgress', (event) => { if (event.state === 'completed') resolve() })
  })
  await click('Create and download key')
  const exportable = await apiKeyShown('for the cli')
  await downloaded
  const pemFile = join(downloads, 'for-the-cli.pem')
  t.ok(existsSync(pemFile), 'its private key was downloaded as for-the-cli.pem')
  t.match(await status(), 'downloaded as for-the-cli.pem')
  const pem = readFileSync(pemFile, 'utf8')
  t.match(pem, /^-----BEGIN PRIVATE KEY-----\n/, 'PKCS#8 PEM')
  const der = execFileSync('openssl', ['pkey', '-in', pemFile, '-pubout', '-outform', 'DER'])
  t.equal(createHash('sha256').update(der).digest('hex'), exportable, 'openssl reads it: its public half is the registered key')
  const cli = createClient({ baseUrl: gw.url, token, privateKey: pem })
  t.equal((await cli.fetch('GET', '/v1/clients/?from=cli')).status, 200, 'and a program (the CLI\'s client) signs with it: accepted')
  t.equal(recorder.requests.at(-1)?.headers['x-gateway-key-name'], 'for the cli')
  t.match(await text('dl.facts'), /Private keyin this browser, not exportable \(made exportable: a copy was downloaded as a file once\)/,
    'the page says the copy it keeps is no longer exportable')
  t.match(await storedKey(exportable), { extractable: false, algorithm: 'ECDSA', exported: /^InvalidAccessError/ },
    'a key made exportable: after its download, the copy in IndexedDB is not extractable, and the page\'s own exportKey of it fails')
  t.equal(await tryIt({ key: exportable, scheme: 'Seed (X-API-* headers)', method: 'GET', query: 'from=browser' }), 'Answer: 200 OK',
    'and Try it still signs with that copy')
  t.equal(recorder.requests.at(-1)?.headers['x-gateway-key'], exportable)
  // its calls on an MCP route: the key's view gives them by tool, an unlisted tool as other
  for (const [id, name] of [[1, 'whoami'], [2, 'whoami'], [3, 'launch-the-missiles']] as const) {
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } })
    const res = await cli.fetch('POST', '/mcp', body, { headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' } })
    t.equal(res.status, 200, `tools/call ${name} through the MCP route`)
    await res.body?.cancel()
  }
  await gw.app.keygate.usage?.flush()
  await page.goto(`${portal}#/keys/${exportable}`)
  await heading('Key "for the cli"')
  await page.waitForSelector('caption ::-p-text(on MCP routes)')
  t.same(await tableRows('table.tools'), [['whoami', 'tools/call', 'mcp', '2', '0'], ['other', 'tools/call', 'mcp', '1', '0']],
    'the key\'s calls per tool over the day')
  await accessible(t, 'a key\'s view with its calls per tool')
  // a key an earlier version of the page stored extractable: replaced by a non-extractable copy when next read
  const older = '0'.repeat(64)
  await page.evaluate(inKeyStore(`async (ask) => {
    const pair = await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])
    await ask('readwrite', (store) => store.put({ apiKey: '${older}', user: 'alice', name: 'stored extractable', keyType: 'ed25519',
      privateKey: pair.privateKey, publicKey: pair.publicKey, exportable: true, createdAt: new Date().toISOString() }))
  }`))
  t.match(await storedKey(older), { extractable: true, exported: 'exported' }, 'a key stored extractable (as before)')
  await click('Your keys', 'link')
  await page.waitForSelector('caption ::-p-text(page 1)')
  t.match(await storedKey(older), { extractable: false, algorithm: 'Ed25519', exported: /^InvalidAccessError/ },
    'once the page has read it, a non-extractable copy has replaced it')
  await page.evaluate(inKeyStore(`(ask) => ask('readwrite', (store) => store.delete('${older}'))`))

  // 9. A key made elsewhere: the page's openssl commands, run in a shell, then its PEM and proof pasted
  await newKey('openssl key', 'ed25519', 'Made elsewhere with openssl: register its public key')
  const commands = await page.$eval('pre[aria-label="openssl commands"]', (el) => el.textContent ?? '')
  t.match(commands, /openssl genpkey -algorithm ed25519 -out openssl-key\.pem/, 'the commands, with the name filled in')
  const shell = join(work, 'openssl')
  mkdirSync(shell)
  execFileSync('sh', ['-c', commands], { cwd: shell, stdio: 'pipe' })
  await fill('Public key (PEM)', readFileSync(join(shell, 'openssl-key.pub.pem'), 'utf8'))
  await fill('Proof (base64)', readFileSync(join(shell, 'openssl-key.proof'), 'utf8'))
  await accessible(t, 'the new-key view, for a key made elsewhere')
  await click('Register key')
  const external = await apiKeyShown('openssl key')
  const opensslSpki = createPublicKey(readFileSync(join(shell, 'openssl-key.pem'))).export({ type: 'spki', format: 'der' })
  t.equal(external, createHash('sha256').update(opensslSpki).digest('hex'),
    'the key openssl made is registered')
  t.match(await text('dl.facts'), /Private keynot in this browser/)

  t.ok(portalAnswers.length >= 6, `the page and its two bundles were loaded twice (${portalAnswers.length} answers under /portal/)`)
  t.same(portalAnswers.filter(({ csp, nosniff, frames }) => csp !== headers['content-security-policy'] || nosniff !== 'nosniff' || frames !== 'DENY'), [],
    'every one with the CSP, nosniff and X-Frame-Options')
  // A revoked key's private key can go from this browser; logging out forgets the token
  await page.goto(`${portal}#/keys/${ed25519}`)
  await shows('dl.facts', /Private keyin this browser/)
  await click('Delete its private key from this browser')
  await shows('dl.facts', /Private keynot in this browser/)
  t.pass('a revoked key\'s private key deleted from this browser')
  await click('Log out')
  await heading('Log in')
  t.equal(await status(), 'Logged out.', 'Log out: back to the login view')
  await page.goto(`${portal}#/keys`)
  await heading('Log in')
  t.pass('and the keys need a login again')

  t.same(elsewhere, [], 'the page asked no other origin for anything')
  t.same(favicons, [], 'nor for /favicon.ico, at any of its loads')
  t.equal(await page.$eval('link[rel="icon"]', (el) => el.getAttribute('href')), 'data:,', 'it names its icon as an empty data: URL')
  t.same(await page.evaluate('window.cspViolations'), [], 'which the CSP allows: nothing blocked since the last load')
  t.same(failures, [], 'no script error')

  // docs/portal.md shows each screenshot this test takes, and names the headers the page came with
  const doc = readFileSync(join(ROOT, 'docs/portal.md'), 'utf8')
  const prose = doc.replace(/\s+/g, ' ')
  for (const name of ['Content-Security-Policy', 'Permissions-Policy', 'Cross-Origin-Opener-Policy', 'Cross-Origin-Resource-Policy', 'Referrer-Policy']) {
    t.ok(prose.includes(`\`${name}: ${headers[name.toLowerCase()] ?? '(not sent)'}\``), `docs/portal.md gives the ${name} the page came with`)
  }
  for (const name of SCREENSHOTS) {
    t.ok(existsSync(join(shots, name)), `${name} taken`)
    t.ok(doc.includes(`](portal/${name})`), `docs/portal.md shows ${name}`)
    t.ok(existsSync(join(ROOT, 'docs/portal', name)), `docs/portal/${name} is in the repository`)
  }
})
