// The route table's matching of paths with ";" (matrix parameters): matched as a backend that
// drops them reads the path, taken only by a route that allows them, and only below its prefix.
// Through real sockets: test/security/canonical-paths.test.ts.
import t from 'tap'
import { route } from '../../../../gateway/src/proxy/route.js'
import { RouteTable, withoutMatrixParams } from '../../../../gateway/src/proxy/route-table.js'

const DEFAULTS = { bodyLimit: 1024, timeoutMs: 1000 }
const catchAll = route({ name: 'catch-all', prefix: '/', upstream: 'http://u', auth: 'bearer', allowMatrixParams: true }, DEFAULTS)
const clients = route({ name: 'clients', prefix: '/v1/clients/', upstream: 'http://u', auth: 'signed' }, DEFAULTS)
const files = route({ name: 'files', prefix: '/files', upstream: 'http://u', auth: 'public', allowMatrixParams: true }, DEFAULTS)
const table = new RouteTable([catchAll, clients, files])

const outcome = (path: string): string => {
  const match = table.match(path, 'GET')
  return match.kind === 'route' ? match.route.name : match.kind
}

t.test('withoutMatrixParams drops each segment\'s ";..."', async (t) => {
  t.equal(withoutMatrixParams('/a;x=1/b;y;z/c'), '/a/b/c')
  t.equal(withoutMatrixParams('/v1/clients;x/42'), '/v1/clients/42')
  t.equal(withoutMatrixParams('/plain/path/'), '/plain/path/')
})

t.test('";" never steers a path past the route it belongs to', async (t) => {
  const cases: Array<[string, string]> = [
    ['/v1/clients/42', 'clients'],
    ['/anything;v=1/x', 'catch-all'],
    ['/v1/clients;x/42', 'invalid-target'],
    ['/v1;x/clients/42', 'invalid-target'],
    ['/v1/clients/42;x', 'invalid-target'],
    ['/files/a;v=1', 'files'],
    ['/files;v=1', 'invalid-target'],
    ['/files;v=1/a', 'invalid-target'],
    ['/filesx;v=1', 'catch-all']
  ]
  for (const [path, expected] of cases) t.equal(outcome(path), expected, path)
  t.match(table.match('/v1/clients;x/42', 'GET'), { kind: 'invalid-target', detail: /route for this path does not take them/ })
  t.match(table.match('/files;v=1/a', 'GET'), { kind: 'invalid-target', detail: /inside its route's prefix: only the path below \/files may carry them/ })
})

t.test('without a route that allows them, a ";" path is refused or not found, never forwarded', async (t) => {
  const strict = new RouteTable([{ ...clients, methods: ['GET', 'POST'] }])
  t.match(strict.match('/v1/clients/42;x', 'GET'), { kind: 'invalid-target' })
  t.same(strict.match('/other;x', 'GET'), { kind: 'not-found' })
  t.match(strict.match('/v1/clients/42;x', 'DELETE'), { kind: 'method-not-allowed' })
})
