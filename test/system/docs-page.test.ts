// The /docs page in a real browser: headless Chromium (see test/helpers/chromium.ts for which one)
// loads it from a running gateway and must show keygate's endpoints and the configured routes, with
// the error codes of an operation, while fetching nothing from any other host (the page works offline).
import t from 'tap'
import { launchChromium } from '../helpers/chromium.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { startStack } from '../helpers/stack.js'

t.test('the /docs page shows every endpoint in Chromium, offline', async (t) => {
  const recorder = await startRecorder(t)
  const file = routeFile(t, `routes:
  - { name: clients, prefix: /v1/clients/, upstream: ${recorder.url}, auth: signed, methods: [GET, POST] }
  - { name: orders, prefix: /orders/, upstream: ${recorder.url}, auth: bearer, methods: [GET, DELETE] }
  - { name: status, path: /status, upstream: ${recorder.url}, auth: public, methods: [GET] }
`)
  const gw = await startStack(t, { store: 'memory', upstreamUrl: recorder.url, config: { routesFile: file.path } })
  const origin = new URL(gw.url).origin

  const browser = await launchChromium()
  t.teardown(async () => { await browser.close() })
  t.comment(`browser: ${await browser.version()}`)
  const page = await browser.newPage()
  const elsewhere: string[] = []
  const failures: string[] = []
  await page.setRequestInterception(true)
  page.on('request', (request) => {
    const url = request.url()
    if (url.startsWith('data:') || new URL(url).origin === origin) {
      void request.continue()
    } else {
      elsewhere.push(url)
      void request.abort()
    }
  })
  page.on('pageerror', (err) => { failures.push(`page error: ${err instanceof Error ? err.message : String(err)}`) })
  page.on('requestfailed', (request) => { if (!elsewhere.includes(request.url())) failures.push(`failed: ${request.url()}`) })
  page.on('response', (response) => { if (response.status() >= 400) failures.push(`${response.status()}: ${response.url()}`) })

  await page.goto(`${gw.url}/docs`, { waitUntil: 'networkidle0', timeout: 60_000 })
  await page.waitForSelector('.opblock', { timeout: 60_000 })
  const operations = await page.$$eval('.opblock', (blocks) => blocks.map((block) => {
    const method = block.querySelector('.opblock-summary-method')?.textContent?.trim() ?? ''
    const path = block.querySelector('.opblock-summary-path')?.getAttribute('data-path') ?? ''
    return `${method} ${path}`
  }))
  t.same([...operations].sort(), [
    'DELETE /orders/',
    'DELETE /v1/api-keys/{apiKey}',
    'GET /.well-known/jwks.json',
    'GET /.well-known/oauth-protected-resource',
    'GET /healthz',
    'GET /orders/',
    'GET /readyz',
    'GET /status',
    'GET /v1/api-keys',
    'GET /v1/api-keys/{apiKey}/usage',
    'GET /v1/api-keys/{apiKey}/usage/series',
    'GET /v1/clients/',
    'GET /v1/routes',
    'GET /v1/time',
    'GET /v1/usage',
    'POST /v1/api-keys',
    'POST /v1/auth/token',
    'POST /v1/clients/'
  ], 'the page shows keygate\'s endpoints and the configured routes, each once')

  const info = await page.$eval('.information-container', (el) => el.textContent ?? '')
  t.match(info, /keygate/, 'the title')
  t.match(info, /signing string/, 'the signing scheme, in words')
  t.ok(await page.$('.btn.authorize'), 'the security schemes give an Authorize button')

  // Open POST /v1/auth/token: its problem+json answers show with their codes.
  await page.click('#operations-auth-post_v1_auth_token .opblock-summary')
  await page.waitForSelector('#operations-auth-post_v1_auth_token .responses-table', { timeout: 30_000 })
  const responses = await page.$eval('#operations-auth-post_v1_auth_token .responses-table', (el) => el.textContent ?? '')
  for (const code of ['INVALID_CREDENTIALS', 'RATE_LIMITED', 'VALIDATION_FAILED']) t.match(responses, code, `the opened operation shows ${code}`)

  t.same(elsewhere, [], 'the page asked no other host for anything')
  t.same(failures, [], 'no script error, failed or refused request')
  t.equal(recorder.requests.length, 0, 'the page reached no upstream')
})
