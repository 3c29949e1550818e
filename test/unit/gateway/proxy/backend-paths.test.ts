// How backends read a path (proxy/backend-paths.ts), and the route table's refusal of a path that
// a weaker route matched raw but the upstream reads as a stronger route's (400 PATH_ALIAS).
// Through real sockets: test/security/path-aliases.test.ts.
import t from 'tap'
import { maskOf, normalisePath, PATH_NORMALISATIONS, type PathNormalisation } from '../../../../gateway/src/proxy/backend-paths.js'
import { asksMoreThan, route, type RouteConfig } from '../../../../gateway/src/proxy/route.js'
import { RouteTable } from '../../../../gateway/src/proxy/route-table.js'

const ALL = maskOf(PATH_NORMALISATIONS)

t.test('normalisePath: each normalisation alone and all together', async (t) => {
  const cases: Array<[path: string, normalisations: readonly PathNormalisation[], read: string]> = [
    ['/V1/Clients/42', ['case'], '/v1/clients/42'],
    ['/V1/Clients/42', ['slash', 'trim'], '/V1/Clients/42'],
    ['/v1/clients/', ['slash'], '/v1/clients'],
    ['/v1/clients/', ['case', 'trim'], '/v1/clients/'],
    ['/', ['slash'], '/'],
    ['/', PATH_NORMALISATIONS, '/'],
    ['/v1/clients./42', ['trim'], '/v1/clients/42'],
    ['/v1/clients%20/42', ['trim'], '/v1/clients/42'],
    ['/v1/clients%20%20/42', ['trim'], '/v1/clients/42'],
    ['/v1/clients.%20./42', ['trim'], '/v1/clients/42'],
    ['/v1/clients.%20./42', ['case', 'slash'], '/v1/clients. ./42'],
    ['/v1/clients%20', ['trim'], '/v1/clients'],
    ['/v1/%20/clients', ['trim'], '/v1/clients'],
    ['/v1/clients/%20', ['trim'], '/v1/clients/'],
    ['/v1/clients/%20', PATH_NORMALISATIONS, '/v1/clients'],
    ['/a.b/c', ['trim'], '/a.b/c'],
    ['/.well-known/x', ['trim'], '/.well-known/x'],
    ['/V1/CLIENTS./42/', PATH_NORMALISATIONS, '/v1/clients/42'],
    // %XX always decoded, byte by byte; only ASCII letters fold
    ['/v1/a%21b', [], '/v1/a!b'],
    ['/x/%C3%89', ['case'], '/x/\u00c3\u0089'],
    ['/X/\u00c9', ['case'], '/x/\u00c9'],
    ['/v1/clients?x', [], '/v1/clients?x']
  ]
  for (const [path, normalisations, read] of cases) {
    t.equal(normalisePath(path, maskOf(normalisations)), read, `${path} [${normalisations.join(', ')}]`)
  }
})

const DEFAULTS = { bodyLimit: 1024, timeoutMs: 1000 }
const U = 'http://u:1'
const at = (fields: Pick<RouteConfig, 'name' | 'prefix' | 'auth'> & Partial<RouteConfig>): RouteConfig =>
  route({ upstream: U, ...fields }, DEFAULTS)

function outcome (table: RouteTable, path: string, method = 'GET'): string {
  const match = table.match(path, method)
  return match.kind === 'route' ? match.route.name : match.kind === 'alias' ? `alias of ${match.stronger.name}` : match.kind
}

t.test('the issue\'s layout: a bearer catch-all "/" beside a signed /v1/clients/', async (t) => {
  const clients = at({ name: 'clients', prefix: '/v1/clients/', auth: 'signed', methods: ['GET'] })
  const table = new RouteTable([at({ name: 'catch-all', prefix: '/', auth: 'bearer' }), clients])
  const cases: Array<[string, string]> = [
    ['/V1/CLIENTS/42', 'alias of clients'], ['/v1/Clients/42', 'alias of clients'], ['/V1/clients/', 'alias of clients'],
    ['/v1/clients', 'alias of clients'], ['/v1/clients%20/42', 'alias of clients'], ['/v1/clients./42', 'alias of clients'],
    ['/v1/clients...', 'alias of clients'], ['/v1./clients/', 'alias of clients'],
    ['/v1/clients/42', 'clients'], ['/v1/clients/', 'clients'],
    ['/v1/clientsx', 'catch-all'], ['/v1/client', 'catch-all'], ['/v1', 'catch-all'], ['/v1/clients%21', 'catch-all'], ['/reports/x.', 'catch-all']
  ]
  for (const [path, expected] of cases) t.equal(outcome(table, path), expected, path)
  // a method the signed route does not take: canonically 405, so not forwarded through an alias either
  t.equal(outcome(table, '/V1/CLIENTS/42', 'DELETE'), 'alias of clients')
  t.equal(outcome(table, '/v1/clients/42', 'DELETE'), 'method-not-allowed')
  t.ok(table.guardsAgainstAliases(table.routes[0] as RouteConfig), 'the catch-all pays for the check')
  t.notOk(table.guardsAgainstAliases(table.routes[1] as RouteConfig), 'the signed route does not: nothing asks more')
})

t.test('which routes count: tiers, scopes, origins, carve-outs, exact paths, rewrites', async (t) => {
  const b = at({ name: 'b', prefix: '/', auth: 'bearer' })
  const c = at({ name: 'c', prefix: '/v1/clients/', auth: 'signed' })
  const e = at({ name: 'e', prefix: '/admin', exact: true, auth: 'signed' })
  const cases: Array<[name: string, routes: RouteConfig[], path: string, expected: string]> = [
    ['public under bearer', [at({ name: 'p', prefix: '/', auth: 'public' }), at({ name: 'b', prefix: '/admin/', auth: 'bearer' })], '/Admin/x', 'alias of b'],
    ['more scopes, same tier', [at({ name: 'b', prefix: '/', auth: 'bearer' }), at({ name: 'adm', prefix: '/admin/', auth: 'bearer', scopes: ['admin'] })],
      '/ADMIN/x', 'alias of adm'],
    ['other scopes, not more', [at({ name: 'b', prefix: '/', auth: 'bearer', scopes: ['x'] }), at({ name: 'y', prefix: '/y/', auth: 'bearer', scopes: ['y'] })],
      '/Y/1', 'b'],
    ['same tier, no scopes', [at({ name: 'b', prefix: '/', auth: 'bearer' }), at({ name: 'c', prefix: '/c/', auth: 'bearer' })], '/C/1', 'b'],
    ['another upstream', [b, at({ name: 's', prefix: '/s/', auth: 'signed', upstream: 'http://u:2' })], '/S/1', 'b'],
    ['upstream paths that differ only in case', [at({ name: 'b', prefix: '/', auth: 'bearer', upstream: 'http://u:1/API' }),
      at({ name: 's', prefix: '/s/', auth: 'signed', upstream: 'http://u:1/api' })], '/S/1', 'alias of s'],
    ['a public carve-out inside a signed space', [at({ name: 's', prefix: '/v1/', auth: 'signed' }), at({ name: 'p', prefix: '/v1/public/', auth: 'public' })],
      '/v1/public/x', 'p'],
    ['an exact signed path', [b, e], '/admin/', 'alias of e'],
    ['an exact signed path', [b, e], '/ADMIN', 'alias of e'],
    ['an exact signed path, a longer sibling', [b, e], '/admin/x', 'b'],
    ['a strict backend', [b, at({ name: 's', prefix: '/s/', auth: 'signed', backendNormalises: [] })], '/S/1', 'b'],
    ['a strict backend still decodes', [b, at({ name: 's', prefix: '/a!b/', auth: 'signed', backendNormalises: [] })], '/a%21b/1', 'alias of s'],
    ['a case-only backend keeps the slash', [b, at({ name: 's', prefix: '/s/', auth: 'signed', backendNormalises: ['case'] })], '/s', 'b'],
    ['a case-only backend', [b, at({ name: 's', prefix: '/s/', auth: 'signed', backendNormalises: ['case'] })], '/S/1', 'alias of s'],
    // a rewrite onto a stronger route's space as it is: the route file's choice, warned of by routes check (route-aliases.ts)
    ['a rewrite onto the space', [at({ name: 'r', prefix: '/reports/', auth: 'bearer', rewrite: '/v1/clients/' }), c], '/reports/42', 'r'],
    // ... but a rewrite that reaches it only as the backend reads it, is refused like any alias
    ['a rewrite onto another spelling', [at({ name: 'r', prefix: '/reports/', auth: 'bearer', rewrite: '/V1/Clients/' }), c], '/reports/42', 'alias of c'],
    ['an upstream path onto it', [at({ name: 'u', prefix: '/clients/', auth: 'bearer', upstream: 'http://u:1/V1' }), c], '/clients/42', 'alias of c']
  ]
  for (const [name, routes, path, expected] of cases) t.equal(outcome(new RouteTable(routes), path), expected, `${name}: ${path}`)
})

t.test('asksMoreThan: a higher tier, or the same tier and strictly more scopes', async (t) => {
  const r = (auth: RouteConfig['auth'], scopes: string[] = []): RouteConfig => at({ name: auth, prefix: '/', auth, scopes })
  t.ok(asksMoreThan(r('signed'), r('bearer', ['a', 'b'])))
  t.ok(asksMoreThan(r('bearer'), r('public')))
  t.ok(asksMoreThan(r('bearer', ['a', 'b']), r('bearer', ['a'])))
  t.notOk(asksMoreThan(r('bearer', ['a']), r('bearer', ['a'])))
  t.notOk(asksMoreThan(r('bearer', ['b', 'c']), r('bearer', ['a'])))
  t.notOk(asksMoreThan(r('public'), r('public')))
  t.notOk(asksMoreThan(r('bearer', ['a']), r('signed')))
})

t.test('all three by default, secure by default', async (t) => {
  t.same(at({ name: 'x', prefix: '/', auth: 'signed' }).backendNormalises, ['case', 'slash', 'trim'])
  t.equal(ALL, maskOf(['trim', 'slash', 'case']))
})

t.test('the OpenAPI document lists PATH_ALIAS on the routes that can answer it, and only there', async (t) => {
  const { businessPaths, ERRORS_EXTENSION } = await import('../../../../gateway/src/http/docs/openapi.js')
  const paths = businessPaths([at({ name: 'catch-all', prefix: '/', auth: 'bearer' }), at({ name: 'clients', prefix: '/v1/clients/', auth: 'signed' })])
  t.ok((paths['/']?.get?.[ERRORS_EXTENSION] as string[]).includes('PATH_ALIAS'), 'the catch-all: a stronger route beside it')
  t.notOk((paths['/v1/clients/']?.get?.[ERRORS_EXTENSION] as string[]).includes('PATH_ALIAS'), 'the signed route: nothing stronger')
})
