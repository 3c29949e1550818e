// The developer portal's login through an identity provider (issue 31), against a real OpenID
// Provider (oidc-provider, test/helpers/oidc-provider.ts) and a keygate on Redis whose issuers file
// gives the IdP a portalLogin block (a confidential client, its secret in an environment variable).
// In Chromium, by keyboard only: the portal, "Log in with ...", the IdP's sign-in and consent, back
// logged in as `<issuer>:<subject>`, the keys view loaded with the token; no URL the page visited
// or requested, no storage, no cookie ever holds the token; the page never calls the IdP (only
// navigates to it: the token endpoint is keygate's to call); the CSP blocks nothing; axe-core finds
// no serious or critical violation on the login view with its IdP link. On the wire: an unknown
// state, a replayed callback, a callback without the login cookie, the IdP's access_denied, a
// handoff taken twice, each refused with its code; and a login begun at one keygate and completed
// at another on the same Redis prefix.
import type { HTTPRequest } from 'puppeteer-core'
import t from 'tap'
import { axeViolations, seriousOnes } from '../helpers/axe.js'
import { launchChromium } from '../helpers/chromium.js'
import { docBlocks, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { startTestIdp } from '../helpers/oidc-provider.js'
import { routeFile } from '../helpers/routes.js'
import { startStack, startTestGateway } from '../helpers/stack.js'
import { uniquePrefix } from '../helpers/redis.js'

const CLIENT = { id: 'keygate-portal', secret: 'portal-secret-for-tests' }
const SECRET_ENV = 'KEYGATE_TEST_PORTAL_CLIENT_SECRET'

t.test('the portal\'s login through an identity provider', async (t) => {
  const idp = await startTestIdp(t)
  process.env[SECRET_ENV] = CLIENT.secret
  t.teardown(() => { delete process.env[SECRET_ENV] })
  const issuers = routeFile(t, `issuers:
  - name: corp
    issuer: ${idp.issuer}
    audiences: [${idp.audience}]
    accessTokenType: at+jwt
    portalLogin:
      clientId: ${CLIENT.id}
      clientSecretEnv: ${SECRET_ENV}
      scopes: [api:read]
      authorizationParams: { resource: "${idp.audience}" }
      label: Corp SSO
`, 'issuers.yaml')
  const redisPrefix = uniquePrefix()
  const config = { identityProviders: { file: issuers.path, oidc: undefined } }
  const gw = await startStack(t, { store: 'redis', redisPrefix, config })
  // a second keygate on the same Redis prefix: a login begun at one completes at the other
  const other = await startTestGateway(t, { store: 'redis', redisPrefix, upstreamUrl: gw.upstreamUrl, config })
  const callbackOf = (url: string): string => `${new URL(url).origin}/portal/oidc/callback`
  await idp.addClient({ id: CLIENT.id, secret: CLIENT.secret, redirectUris: [callbackOf(gw.url), callbackOf(other.url)] })

  /** GET start as a browser: the IdP's authorization URL and the login cookie (throws when it is not that) */
  const start = async (url = gw.url): Promise<{ location: string; cookie: string; setCookie: string }> => {
    const res = await fetch(`${url}/portal/oidc/corp/start?then=%23%2Fkeys`, { redirect: 'manual' })
    const setCookie = res.headers.get('set-cookie') ?? ''
    const cookie = /^keygate_login=([A-Za-z0-9_-]{43});/.exec(setCookie)
    if (res.status !== 303 || cookie === null) throw new Error(`start answered ${res.status} (${setCookie}): ${await res.text()}`)
    return { location: res.headers.get('location') ?? '', cookie: `keygate_login=${cookie[1] ?? ''}`, setCookie }
  }
  /** GET the callback (at `url`'s keygate) as the browser would: the handoff id the page is sent to (throws when it is not that) */
  const callback = async (redirect: string, cookie: string | undefined, url = gw.url): Promise<string> => {
    const back = new URL(redirect)
    const res = await fetch(`${url}${back.pathname}${back.search}`, { redirect: 'manual', headers: cookie === undefined ? {} : { cookie } })
    const handoff = /^\/portal\/#\/login\?handoff=([A-Za-z0-9_-]{43})$/.exec(res.headers.get('location') ?? '')
    if (res.status !== 303 || res.headers.get('cache-control') !== 'no-store' || handoff === null) {
      throw new Error(`the callback answered ${res.status} to ${res.headers.get('location')}, not a page's handoff`)
    }
    return handoff[1] ?? ''
  }
  const redeem = async (handoff: string, cookie: string | undefined, url = gw.url) => {
    const res = await send(url, '/portal/oidc/session', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(cookie !== undefined && { cookie }) },
      body: JSON.stringify({ handoff })
    })
    return { status: res.status, body: res.json<Record<string, unknown>>(), headers: res.headers }
  }
  /** the session request as docs/portal.md writes it, its placeholders filled: the handoff id, the login cookie */
  const redeemAsDocumented = async (handoff: string, cookie: string) => {
    const [request] = docBlocks('docs/portal.md', 'The session request', 'http')
    const [head = '', body = ''] = (request ?? '').split(/\n\n/)
    const [line = '', ...headerLines] = head.split('\n')
    const [method, path] = line.split(' ')
    const filled = (text: string): string => text.replace('keygate_login=<the login cookie>', cookie).replace('<the id after handoff=>', handoff)
    const headers = Object.fromEntries(headerLines.map((h) => h.split(': ')).map(([name = '', value = '']) => [name.toLowerCase(), filled(value)]))
    const res = await send(gw.url, path ?? '', { method: method ?? '', headers, body: filled(body.trim()) })
    return { status: res.status, body: res.json<Record<string, unknown>>(), headers: res.headers }
  }

  t.test('the providers the page offers', async (t) => {
    const res = await send(gw.url, '/portal/oidc/providers')
    t.equal(res.status, 200)
    t.same(res.json(), [{ name: 'corp', label: 'Corp SSO' }])
    t.equal(res.headers['content-security-policy']?.includes("form-action 'none'"), true, 'under the portal\'s CSP')
  })

  t.test('the authorization request: code, PKCE S256, state, nonce, keygate\'s callback', async (t) => {
    const { location, setCookie } = await start()
    t.match(setCookie, /^keygate_login=[A-Za-z0-9_-]{43}; Path=\/portal\/oidc\/; Max-Age=600; HttpOnly; SameSite=Lax$/,
      'the login cookie: a random value, HttpOnly, SameSite=Lax, under /portal/oidc/ only')
    const url = new URL(location)
    t.equal(url.origin, idp.issuer)
    const q = url.searchParams
    t.match(Object.fromEntries(q), {
      response_type: 'code',
      client_id: CLIENT.id,
      redirect_uri: callbackOf(gw.url),
      scope: 'openid api:read',
      code_challenge_method: 'S256',
      resource: idp.audience
    })
    for (const name of ['state', 'nonce', 'code_challenge']) t.match(q.get(name), /^[A-Za-z0-9_-]{43}$/, `${name}: 256 random bits`)
    t.not(q.get('state'), q.get('nonce'))
  })

  t.test('a login on the wire, then its callback again, another browser, a handoff twice', async (t) => {
    const { location, cookie } = await start()
    const redirect = await idp.authorize(location, 'bob')
    t.match(new URL(redirect).searchParams.get('iss'), idp.issuer, 'RFC 9207: the IdP names itself')
    const handoff = await callback(redirect, cookie)
    t.pass('the callback sends the page to its handoff, in the URL\'s fragment, with Cache-Control: no-store')
    const session = await redeemAsDocumented(handoff, cookie)
    t.equal(session.status, 200, `the handoff taken, as docs/portal.md shows: ${String(session.body.code ?? '')} ${String(session.body.detail ?? '')}`)
    const documented = JSON.parse(docSnippet('docs/portal.md', 'The session request', 'json')) as Record<string, unknown>
    t.same(Object.keys(session.body).sort(), Object.keys(documented).sort(), 'the answer has the fields the page shows')
    t.match(session.body, { token: /^eyJ/, expiresAt: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ }, 'a JWT, and an ISO time')
    t.equal(session.body.username, 'corp:bob')
    t.equal(session.body.then, '#/keys')
    t.equal(session.headers['cache-control'], 'no-store')
    t.match(session.headers['set-cookie'], /^keygate_login=; Path=\/portal\/oidc\/; Max-Age=0/, 'the login cookie cleared')
    const keys = await send(gw.url, '/v1/api-keys', { headers: { authorization: `Bearer ${String(session.body.token)}` } })
    t.equal(keys.status, 200, 'the token is one keygate accepts')

    const again = await redeem(handoff, cookie)
    t.match([again.status, again.body.code], [400, 'LOGIN_STATE_INVALID'], 'a handoff taken twice: refused')
    const replayed = await redeem(await callback(redirect, cookie), cookie)
    t.match([replayed.status, replayed.body.code], [400, 'LOGIN_STATE_INVALID'], 'the same callback twice: refused')
    t.match(replayed.body.detail, /already completed/)

    const second = await start()
    const foreign = await redeem(await callback(await idp.authorize(second.location, 'bob'), undefined), undefined)
    t.match([foreign.status, foreign.body.code], [400, 'LOGIN_STATE_INVALID'], 'a callback without the login cookie (another browser): refused')
    t.match(foreign.body.detail, /did not begin this login/)

    const third = await start()
    const stolen = await redeem(await callback(await idp.authorize(third.location, 'bob'), third.cookie), second.cookie)
    t.match([stolen.status, stolen.body.code], [400, 'LOGIN_STATE_INVALID'], 'a handoff redeemed with another browser\'s cookie: refused')
  })

  t.test('an unknown state; the IdP\'s access_denied; a state begun at one keygate, completed at another', async (t) => {
    const unknown = await redeem(await callback(`${gw.url}/portal/oidc/callback?state=${'A'.repeat(43)}&code=x`, undefined), undefined)
    t.match([unknown.status, unknown.body.code], [400, 'LOGIN_STATE_INVALID'])
    t.match(unknown.body.detail, /unknown, already completed, or older than 10 minutes/)

    const { location, cookie } = await start()
    const denied = await redeem(await callback(await idp.authorize(location, 'bob', { deny: true }), cookie), cookie)
    t.match([denied.status, denied.body.code], [401, 'IDP_LOGIN_FAILED'], 'the IdP\'s error, for the page to show')
    t.match(denied.body.detail, /^corp answered access_denied: The user declined/)

    const across = await start(gw.url)
    const handoff = await callback(await idp.authorize(across.location, 'carol'), across.cookie, other.url)
    const session = await redeem(handoff, across.cookie, other.url)
    t.equal(session.body.username, 'corp:carol', 'begun at one keygate, completed at the other: the state is in the store')
  })

  t.test('refusals before the IdP: an unknown issuer, a malformed handoff, a flood of starts from one address', async (t) => {
    t.equal((await send(gw.url, '/portal/oidc/nobody/start')).json<{ code: string }>().code, 'NOT_FOUND')
    const malformed = await send(gw.url, '/portal/oidc/session', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"handoff":"x"}'
    })
    t.equal(malformed.json<{ code: string }>().code, 'VALIDATION_FAILED')
    // from another loopback address, so the other tests' starts stay within their own address's budget
    const statuses: number[] = []
    for (let i = 0; i < 32; i++) statuses.push((await send(gw.url, '/portal/oidc/corp/start', { localAddress: '127.0.0.2' })).status)
    t.same(statuses.slice(0, 30), Array(30).fill(303), '30 starts a minute from one address')
    const flooded = await send(gw.url, '/portal/oidc/corp/start', { localAddress: '127.0.0.2' })
    t.match([flooded.status, flooded.json<{ code: string }>().code], [429, 'RATE_LIMITED'], 'then 429: a flood cannot fill the store')
    t.ok(Number(flooded.headers['retry-after']) > 0, 'with Retry-After')
  })

  t.test('in Chromium, by keyboard only', async (t) => {
    const origin = new URL(gw.url).origin
    const browser = await launchChromium()
    t.teardown(async () => { await browser.close() })
    const page = await browser.newPage()
    await page.setViewport({ width: 1200, height: 900 })
    const requested: string[] = []
    const navigated: string[] = []
    const fromPage: string[] = []
    const failures: string[] = []
    let token: string | undefined
    await page.setRequestInterception(true)
    page.on('request', (request: HTTPRequest) => {
      const url = request.url()
      requested.push(url)
      if (url.startsWith('data:')) { void request.continue(); return }
      const at = new URL(url).origin
      // keygate's origin; the IdP's only by a top-level navigation (the page never fetches from it)
      if (at === origin || (at === idp.issuer && request.isNavigationRequest())) { void request.continue(); return }
      // the browser's own favicon fetch while it shows the IdP's page: not the page's doing
      if (at === idp.issuer && new URL(url).pathname === '/favicon.ico' && request.resourceType() === 'other') { void request.abort(); return }
      fromPage.push(`${request.resourceType()} ${url}`)
      void request.abort()
    })
    page.on('framenavigated', (frame) => { navigated.push(frame.url()) })
    page.on('response', (response) => {
      if (response.url() === `${origin}/portal/oidc/session` && response.ok()) {
        response.json().then((body: { token?: string }) => { token = body.token }, () => undefined)
      }
    })
    page.on('pageerror', (err) => { failures.push(`page error: ${err instanceof Error ? err.message : String(err)}`) })
    await page.evaluateOnNewDocument(`window.cspViolations = []
      document.addEventListener('securitypolicyviolation', (event) => { window.cspViolations.push(event.effectiveDirective + ' ' + event.blockedURI) })`)
    const focused = async (): Promise<string> =>
      await page.evaluate('(document.activeElement?.textContent || document.activeElement?.id || "").trim()') as string
    const cspViolations = async (): Promise<string[]> => await page.evaluate('window.cspViolations') as string[]
    const shows = async (selector: string, want: RegExp): Promise<void> => {
      await page.waitForFunction(`(document.querySelector(${JSON.stringify(selector)})?.textContent ?? '').match(new RegExp(${JSON.stringify(want.source)}))`)
    }

    await page.goto(`${origin}/portal/`)
    await shows('h1', /^Log in$/)
    await page.waitForSelector('a.button')
    t.equal(await page.evaluate('document.activeElement?.name'), 'username', 'the password form\'s username has the focus')
    const violations = await axeViolations(page)
    t.same(seriousOnes(violations), [], 'axe: no serious or critical violation on the login view with its IdP link')
    for (const { line } of violations) t.comment(`axe on the login view: ${line}`)
    t.same(await cspViolations(), [], 'the CSP blocked nothing')

    // the IdP's link is just before the form: one Shift+Tab
    await page.keyboard.down('Shift')
    await page.keyboard.press('Tab')
    await page.keyboard.up('Shift')
    t.equal(await focused(), 'Log in with Corp SSO')
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')])
    t.equal(new URL(page.url()).origin, idp.issuer, 'at the IdP')
    await page.waitForSelector('#login')
    if (await focused() !== 'login') await page.keyboard.press('Tab')
    t.equal(await focused(), 'login', 'the IdP\'s Username field')
    await page.keyboard.type('alice')
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')])
    await page.waitForFunction('document.activeElement?.textContent === "Allow"')
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')])
    await shows('h1', /^Your keys$/)
    await shows('#status', /^Logged in as corp:alice\.$/)
    await shows('.who', /Logged in as corp:alice/)
    // the keys view loaded its list with the token (none yet)
    await shows('#app', /You have no keys yet/)
    t.equal(new URL(page.url()).hash, '#/keys', 'the URL holds no handoff')

    t.ok(token !== undefined && token.length > 100, 'the page took its token from keygate')
    const tok = token ?? 'missing'
    t.same([...requested, ...navigated].filter((url) => url.includes(tok)), [], 'no URL requested or visited carries the token')
    const stored = await page.evaluate(`(async () => {
      const all = [JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage }), document.cookie]
      for (const { name } of await indexedDB.databases()) {
        const db = await new Promise((resolve, reject) => {
          const r = indexedDB.open(name)
          r.onsuccess = () => resolve(r.result)
          r.onerror = () => reject(r.error)
        })
        for (const store of db.objectStoreNames) {
          const r = db.transaction(store).objectStore(store).getAll()
          all.push(JSON.stringify(await new Promise((resolve) => { r.onsuccess = () => resolve(r.result) })))
        }
        db.close()
      }
      return all.join('\\n')
    })()`) as string
    t.notOk(stored.includes(tok), 'localStorage, sessionStorage, IndexedDB and document.cookie hold no token')
    const cdp = await page.createCDPSession()
    const { cookies } = await cdp.send('Network.getAllCookies')
    t.same(cookies.filter((c) => c.value.includes(tok) || c.value.includes(tok.slice(0, 40))), [], 'no cookie holds the token')
    t.same(cookies.filter((c) => c.name === 'keygate_login'), [], 'the login cookie is gone once the page took its token')
    t.same(fromPage, [], 'the page requested nothing of the IdP (or anywhere else) but by navigating')
    t.equal(requested.filter((url) => url.startsWith(`${idp.issuer}/token`)).length, 0, 'the browser never reached the IdP\'s token endpoint')
    t.same(await cspViolations(), [], 'the CSP blocked nothing')

    // a login that fails (here: a state keygate never made): the page says why, with the code
    await page.goto(`${origin}/portal/oidc/callback?state=${'A'.repeat(43)}&code=x`)
    await shows('#status', /^Not logged in: 400 LOGIN_STATE_INVALID: This login is unknown/)
    t.equal(new URL(page.url()).hash, '#/login', 'the spent handoff left the address bar')
    await shows('h1', /^Log in$/)
    t.same(failures, [])
  })
})
