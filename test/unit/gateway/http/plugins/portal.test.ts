// The developer portal's files as keygate serves them from the sources (bundled at the first
// request): the page with its hashed bundles, caching and validators, the security headers on
// every answer under the prefix (a 404 too), the prefix moved or turned off, and the setting's
// refusals. The page in a browser: test/system/portal.test.ts; built and installed:
// test/system/keygate-package.test.ts and docker-image.test.ts.
import t from 'tap'
import type { Test } from 'tap'
import { loadConfig } from '../../../../../gateway/src/config/env.js'
import { PORTAL_HEADERS } from '../../../../../gateway/src/http/plugins/portal.js'
import { routesFromDocument } from '../../../../../gateway/src/proxy/route-file.js'
import { send, type RawResponse } from '../../../../helpers/http.js'
import { startStack } from '../../../../helpers/stack.js'

function securityHeaders (t: Test, answer: RawResponse, what: string): void {
  for (const [name, value] of Object.entries(PORTAL_HEADERS)) t.equal(answer.headers[name], value, `${what}: ${name}`)
  t.equal(answer.headers['set-cookie'], undefined, `${what}: no cookie`)
}

t.test('the page, its content-hashed bundles, their caching and the security headers', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const page = await send(gw.url, '/portal/')
  t.equal(page.status, 200)
  t.match(page.headers['content-type'], /^text\/html; charset=utf-8/)
  t.equal(page.headers['cache-control'], 'no-cache', 'the page is revalidated at each load')
  securityHeaders(t, page, 'the page')
  t.match(page.headers['content-security-policy'], /script-src 'self';/)
  t.notMatch(page.headers['content-security-policy'], /unsafe-inline|unsafe-eval/, 'no inline script or style, no eval')
  t.match(page.headers['content-security-policy'], /frame-ancestors 'none'/)
  t.notMatch(page.text, /<script(?![^>]*\bsrc=)/, 'no inline script in the page')
  t.notMatch(page.text, /\sstyle="/, 'no inline style attribute')
  t.match(page.text, /<link rel="icon" href="data:,">/, 'an empty icon the CSP\'s img-src data: allows: no request for /favicon.ico (keygate\'s 404)')
  t.match(page.headers['content-security-policy'], /img-src 'self' data:;/)

  const bundles = [...page.text.matchAll(/(?:src|href)="(assets\/[^"]+)" integrity="(sha384-[^"]+)"/g)]
  t.same(bundles.map(([, path]) => /^assets\/(main|style)\.[A-Z0-9]{8}\.(js|css)$/.test(path ?? '')), [true, true], 'two hashed bundles, each with its integrity')
  for (const [, path, integrity] of bundles) {
    const file = await send(gw.url, `/portal/${path ?? ''}`)
    t.equal(file.status, 200, path ?? '')
    t.equal(file.headers['cache-control'], 'public, max-age=31536000, immutable', `${path}: cached for good (its name changes with it)`)
    securityHeaders(t, file, path ?? '')
    const { createHash } = await import('node:crypto')
    t.equal(`sha384-${createHash('sha384').update(file.body).digest('base64')}`, integrity, `${path}: its bytes match the page's integrity`)
    const etag = file.headers.etag ?? ''
    t.match(etag, /^"[\w-]{27}"$/, 'a strong ETag')
    const again = await send(gw.url, `/portal/${path ?? ''}`, { headers: { 'if-none-match': etag } })
    t.equal(again.status, 304, 'If-None-Match: 304')
    t.equal(again.body.length, 0)
    t.equal((await send(gw.url, `/portal/${path ?? ''}`, { headers: { 'if-none-match': '"other"' } })).status, 200, 'another ETag: the file')
  }
  const script = await send(gw.url, `/portal/${bundles.find(([, path]) => path?.endsWith('.js') === true)?.[1] ?? ''}`)
  t.match(script.headers['content-type'], /^text\/javascript/)
  // an import statement where a statement starts (the snippets' text holds "import ... from '@keygate/client'" in strings)
  t.notMatch(script.text, /(?:^|[;}])\s*import\s*(?:[\w*{][^;"']*?from\s*)?["']/m, 'one bundle: it imports nothing (the client\'s code is in it)')

  const etag = page.headers.etag ?? ''
  t.equal((await send(gw.url, '/portal/', { headers: { 'if-none-match': etag } })).status, 304, 'the page revalidates')
  t.equal((await send(gw.url, '/portal/', { method: 'HEAD' })).status, 200, 'HEAD')

  const bare = await send(gw.url, '/portal')
  t.equal(bare.status, 308)
  t.equal(bare.headers.location, '/portal/', 'the prefix without its slash redirects to the page')
  for (const target of ['/portal/assets/main.NOPE0000.js', '/portal/keys', '/portal/assets/../index.html', '/portal/%2e%2e/v1/clients/']) {
    const missing = await send(gw.url, target)
    t.not(missing.status, 200, `${target}: not a file`)
    if (missing.status === 404) {
      t.equal(missing.json().code, 'NOT_FOUND', `${target}: 404 NOT_FOUND`)
      securityHeaders(t, missing, target)
    }
  }
  const unknown = await send(gw.url, '/portal/keys')
  t.equal(unknown.status, 404, 'a path under the prefix is the portal\'s, never a business route\'s')
  t.match(unknown.json().detail, /it lives at \/portal\//)
  t.equal((await send(gw.url, '/v1/clients/')).status, 401, 'the API is not the portal\'s: no portal headers on business routes')
  t.equal((await send(gw.url, '/v1/clients/')).headers['content-security-policy'], undefined)
})

t.test('KEYGATE_PORTAL_PREFIX moves it or turns it off', async (t) => {
  const moved = await startStack(t, { store: 'memory', config: { portalPrefix: '/developers' } })
  t.equal((await send(moved.url, '/developers/')).status, 200, 'served at the new prefix')
  const page = await send(moved.url, '/developers/')
  const bundle = /src="(assets\/[^"]+)"/.exec(page.text)?.[1] ?? ''
  t.equal((await send(moved.url, `/developers/${bundle}`)).status, 200, 'its bundles under it: the page names them relatively')
  t.not((await send(moved.url, '/portal/')).status, 200, 'and not at the default one')

  const off = await startStack(t, { store: 'memory', config: { portalPrefix: undefined } })
  const none = await send(off.url, '/portal/')
  t.not(none.status, 200, 'off: no portal')
  t.equal(none.headers['content-security-policy'], undefined)
})

t.test('the setting: default /portal, "off", a path; refused where it would overlap keygate\'s own', async (t) => {
  t.equal(loadConfig({}).portalPrefix, '/portal')
  t.equal(loadConfig({ KEYGATE_PORTAL_PREFIX: 'off' }).portalPrefix, undefined)
  t.equal(loadConfig({ KEYGATE_PORTAL_PREFIX: '/dev/portal' }).portalPrefix, '/dev/portal')
  for (const value of ['/v1', '/v1/portal', '/docs', '/', 'portal', '/portal/', '/Portal', '/%70ortal', '/a/../b', '/.well-known', '/healthz', 'on']) {
    t.throws(() => loadConfig({ KEYGATE_PORTAL_PREFIX: value }), { name: 'ConfigError', message: /^KEYGATE_PORTAL_PREFIX: ".*" is not allowed: / }, value)
  }
  t.throws(() => loadConfig({ KEYGATE_PORTAL_PREFIX: '/v1' }), { message: /it overlaps keygate's own \/v1;/ })
})

t.test('a route file may not route the portal\'s prefix, wherever it is', async (t) => {
  const document = (prefix: string): unknown => ({ routes: [{ name: 'x', prefix, upstream: 'http://127.0.0.1:1', auth: 'public' }] })
  const defaults = loadConfig({}).routeDefaults
  t.throws(() => routesFromDocument(document('/portal/'), 'routes.yaml', defaults), { message: /would shadow keygate's own \/portal/ })
  t.throws(() => routesFromDocument(document('/portal/x/'), 'routes.yaml', defaults), { message: /would shadow keygate's own \/portal/ })
  const moved = loadConfig({ KEYGATE_PORTAL_PREFIX: '/developers' }).routeDefaults
  t.doesNotThrow(() => routesFromDocument(document('/portal/'), 'routes.yaml', moved), 'moved: /portal/ is free')
  t.throws(() => routesFromDocument(document('/developers/'), 'routes.yaml', moved), { message: /would shadow keygate's own \/developers/ })
  const off = loadConfig({ KEYGATE_PORTAL_PREFIX: 'off' }).routeDefaults
  t.doesNotThrow(() => routesFromDocument(document('/portal/'), 'routes.yaml', off), 'off: /portal/ is free')
})

t.test('without an issuer that logs the portal in: no provider, no login endpoint, no cookie', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  const providers = await send(gw.url, '/portal/oidc/providers')
  t.equal(providers.status, 200)
  t.same(providers.json(), [], 'the page shows the password form only')
  t.equal(providers.headers['cache-control'], 'no-store')
  securityHeaders(t, providers, 'the providers')
  for (const path of ['/portal/oidc/corp/start', '/portal/oidc/callback?state=x&code=y']) {
    const answer = await send(gw.url, path)
    t.equal(answer.json<{ code: string }>().code, 'NOT_FOUND', path)
    securityHeaders(t, answer, path)
  }
  const session = await send(gw.url, '/portal/oidc/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  t.equal(session.json<{ code: string }>().code, 'NOT_FOUND')
})
