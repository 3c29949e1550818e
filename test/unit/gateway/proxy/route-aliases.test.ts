// The tier warning: a weaker route (public < bearer < signed) forwarding into a stronger route's
// path space on the same upstream. Warned for rewrites and upstream paths that map onto the
// stronger route's space; not for plain prefixes, where longest-prefix matching on the raw
// (canonical) path already gives every upstream path exactly one route.
import t from 'tap'
import { aliasGuards, routeWarnings } from '../../../../gateway/src/proxy/route-aliases.js'
import type { RouteConfig } from '../../../../gateway/src/proxy/route.js'
import { parseRouteText, routesFromDocument } from '../../../../gateway/src/proxy/route-file.js'

const defaults = { upstream: 'http://127.0.0.1:8081', bodyLimit: 1024, timeoutMs: 1000 }
const warnings = (yaml: string): string[] =>
  routeWarnings(routesFromDocument(parseRouteText(`routes:\n${yaml}`, 'routes.yaml'), 'routes.yaml', defaults)).map((w) => w.text)

const SIGNED_CLIENTS = '  - { name: clients, prefix: /v1/clients/, upstream: http://u:1, auth: signed, methods: [GET, POST] }\n'

t.test('the issue\'s example: a bearer /reports/ rewritten into the signed /v1/clients/', async (t) => {
  t.same(warnings(`${SIGNED_CLIENTS}  - { name: reports, prefix: /reports/, upstream: http://u:1, auth: bearer, methods: [GET], rewrite: /v1/clients/ }\n`), [
    'reports (bearer) forwards into the path space of clients (signed) on http://u:1: reports forwards /reports/... as /v1/clients/..., ' +
    'clients forwards /v1/clients/..., so with GET a bearer token alone reaches what clients guards with a token and a signature; ' +
    'give reports auth: signed, or forward it elsewhere'
  ])
})

t.test('warned: every way a weaker route can reach a stronger route\'s upstream paths', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['a rewrite into part of the space', '  - { name: w, prefix: /r/, upstream: http://u:1, auth: bearer, rewrite: /v1/ }\n',
      /^w \(bearer\) forwards into the path space of clients \(signed\) on http:\/\/u:1: w forwards \/r\/\.\.\. as \/v1\/\.\.\./],
    ['an upstream URL with a path', '  - { name: w, prefix: /clients/, upstream: "http://u:1/v1", auth: bearer }\n',
      /^w \(bearer\) .* w forwards \/clients\/\.\.\. as \/v1\/clients\/\.\.\./],
    ['an exact path rewritten into it', '  - { name: w, path: /summary, upstream: http://u:1, auth: public, rewrite: /v1/clients/summary }\n',
      /^w \(public\) .* w forwards \/summary as \/v1\/clients\/summary, .* so with GET a request with no credentials reaches/],
    ['HEAD into a space that takes GET', '  - { name: w, prefix: /r/, upstream: http://u:1, auth: bearer, methods: [HEAD], rewrite: /v1/clients/ }\n',
      /so with HEAD a bearer token alone/],
    ['the catch-all rewritten', '  - { name: w, prefix: /, upstream: http://u:1, auth: bearer, rewrite: /v1/ }\n', /^w \(bearer\)/]
  ]
  for (const [name, route, expected] of cases) {
    const found = warnings(SIGNED_CLIENTS + route)
    t.equal(found.length, 1, name)
    t.match(found[0], expected, name)
  }
  const twoMounts = warnings('  - { name: s, prefix: /s/, upstream: http://u:1, auth: signed, rewrite: /x/ }\n' +
    '  - { name: b, prefix: /b/, upstream: http://u:1, auth: bearer, rewrite: /x/ }\n')
  t.match(twoMounts, [/^b \(bearer\) forwards into the path space of s \(signed\)/], 'one upstream space mounted twice, at two tiers')
  const publicIntoBearer = warnings('  - { name: b, prefix: /b/, upstream: http://u:1, auth: bearer }\n' +
    '  - { name: p, prefix: /p/, upstream: http://u:1, auth: public, rewrite: /b/ }\n')
  t.match(publicIntoBearer, [/^p \(public\) forwards into the path space of b \(bearer\).*a request with no credentials reaches what b guards with a bearer token/])
  const publicIntoBoth = warnings(SIGNED_CLIENTS + '  - { name: b, prefix: /v1/, upstream: http://u:1, auth: bearer }\n' +
    '  - { name: p, prefix: /p/, upstream: http://u:1, auth: public, rewrite: /v1/ }\n')
  t.same(publicIntoBoth.map((w) => w.slice(0, w.indexOf(':'))), [
    'p (public) forwards into the path space of clients (signed) on http',
    'p (public) forwards into the path space of b (bearer) on http'
  ], 'each stronger route named')
})

t.test('not warned: longest-prefix matching already gives each upstream path one route', async (t) => {
  const cases: Array<[string, string]> = [
    ['a bearer catch-all "/" beside it, no rewrite', '  - { prefix: /, upstream: http://u:1, auth: bearer }\n'],
    ['a public prefix inside it, no rewrite (a deliberate carve-out)', '  - { prefix: /v1/clients/public/, upstream: http://u:1, auth: public }\n'],
    ['a bearer /v1/ around it, no rewrite', '  - { prefix: /v1/, upstream: http://u:1, auth: bearer }\n'],
    ['the rewrite on another upstream', '  - { prefix: /r/, upstream: http://other:1, auth: bearer, rewrite: /v1/clients/ }\n'],
    ['the rewrite on another port of the same host', '  - { prefix: /r/, upstream: http://u:2, auth: bearer, rewrite: /v1/clients/ }\n'],
    ['the rewrite beside it', '  - { prefix: /r/, upstream: http://u:1, auth: bearer, rewrite: /v1/clientele/ }\n'],
    ['a rewrite of the same tier', '  - { prefix: /r/, upstream: http://u:1, auth: signed, rewrite: /v1/clients/ }\n'],
    ['a stronger route rewritten into a weaker one', '  - { prefix: /r/, upstream: http://u:1, auth: signed, rewrite: /open/ }\n' +
      '  - { prefix: /open/, upstream: http://u:1, auth: public }\n'],
    ['no method in common', '  - { prefix: /r/, upstream: http://u:1, auth: bearer, methods: [DELETE], rewrite: /v1/clients/ }\n'],
    ['the overlap is taken by a more specific signed route', '  - { prefix: /r/, upstream: http://u:1, auth: bearer, rewrite: /v1/ }\n' +
      '  - { prefix: /r/clients/, upstream: http://u:1, auth: signed, rewrite: /v1/clients/ }\n']
  ]
  for (const [name, routes] of cases) t.same(warnings(SIGNED_CLIENTS + routes), [], name)
  t.same(warnings('  - { prefix: /a/, upstream: http://u:1, auth: public, methods: [GET] }\n' +
    '  - { prefix: /a/, upstream: http://u:1, auth: signed, methods: [POST] }\n'), [], 'one prefix split by method: public reads, signed writes')
})

t.test('backendNormalises: routes check says what each setting protects, and warns where one leaves an alias open', async (t) => {
  const load = (yaml: string): RouteConfig[] => routesFromDocument(parseRouteText(`routes:\n${yaml}`, 'routes.yaml'), 'routes.yaml', defaults)
  const catchAll = '  - { name: all, prefix: /, upstream: http://u:1, auth: bearer }\n'
  const all = load(SIGNED_CLIENTS + catchAll)
  t.same(warnings(SIGNED_CLIENTS + catchAll), [], 'the default (all three) leaves nothing open')
  t.match(aliasGuards(all), [
    /^alias guard: clients \(signed\) on http:\/\/u:1, against all \(bearer\): protects backends with case folding .*Express \(default\).*ASP\.NET Core, IIS; a trailing slash added or dropped .*Rails.*; trailing dots and spaces trimmed .*IIS/
  ])
  t.equal(aliasGuards(all).length, 1, 'only the route a weaker one shares an upstream with')
  const strict = `  - { name: clients, prefix: /v1/clients/, upstream: http://u:1, auth: signed, backendNormalises: [slash] }\n${catchAll}`
  t.match(warnings(strict), [
    /^clients \(signed\) has backendNormalises: \[slash\], so all \(bearer\) on http:\/\/u:1 forward its paths spelled with case folding .*; trailing dots and spaces trimmed .*add case, trim to its backendNormalises$/
  ])
  t.match(aliasGuards(load(strict)), [/protects backends with a trailing slash added or dropped [^;]*$/])
  const none = `  - { name: clients, prefix: /v1/clients/, upstream: http://u:1, auth: signed, backendNormalises: [] }\n${catchAll}`
  t.match(aliasGuards(load(none)), [/percent-decoding only/])
  t.same(warnings('  - { name: clients, prefix: /v1/clients/, upstream: http://u:1, auth: signed, backendNormalises: [] }\n' +
    '  - { prefix: /, upstream: http://u:2, auth: bearer }\n'), [], 'no weaker route on its upstream: nothing open')
})
