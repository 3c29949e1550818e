// The route file's resources: a good file gives each route its resource; each mistake is one
// problem in words, naming the entry and the field (the issuers are checked where the issuers
// file is known too: test/unit/gateway/resources/resources.test.ts, test/unit/gateway/proxy/config-reload.test.ts).
import t from 'tap'
import { docSnippet } from '../../../helpers/docs.js'
import { routesOfText, routeTextProblems } from '../../../helpers/routes.js'

const file = (resources: string, routes: string): string => `resources:\n${resources}\nroutes:\n${routes}\n`
const MCP = `  - id: https://api.example.com/mcp
    name: MCP
    issuers: [corp]`
const route = (extra: string, auth = 'bearer'): string => `  - prefix: /mcp/
    upstream: http://x
    auth: ${auth}
${extra.split('\n').map((line) => `    ${line}`).join('\n')}`

t.test('a good file: each route of a resource carries it, with its metadata URL', async (t) => {
  const routes = routesOfText(file(`${MCP}
    documentation: https://docs.example.com/mcp
    audiences: [api://mcp]`, `${route('resource: https://api.example.com/mcp\nscopes: [mcp:tools]')}
  - prefix: /plain/
    upstream: http://x
    auth: bearer`))
  t.match(routes[0]?.resource, {
    id: 'https://api.example.com/mcp',
    name: 'MCP',
    documentation: 'https://docs.example.com/mcp',
    issuers: ['corp'],
    audiences: ['api://mcp'],
    metadataUrl: 'https://api.example.com/.well-known/oauth-protected-resource/mcp'
  })
  t.equal(routes[1]?.resource, undefined, 'a route that names none')
  const two = routesOfText(file(MCP, `${route('resource: https://api.example.com/mcp')}\n${route('resource: https://api.example.com/mcp').replace('/mcp/', '/more/')}`))
  t.equal(two[0]?.resource, two[1]?.resource, 'one object per resource, shared by its routes')
})

t.test('every mistake, in words', async (t) => {
  const cases: Array<[string, string, string[]]> = [
    ['an unknown resource', file(MCP, route('resource: https://api.example.com/other')), [
      'routes.yaml: resources: "https://api.example.com/mcp" is named by no route; give its routes resource: https://api.example.com/mcp, or drop it',
      'routes.yaml: routes[0].resource: "https://api.example.com/other" is not one of the file\'s resources (known: https://api.example.com/mcp)'
    ]],
    ['no resources at all', `routes:\n${route('resource: https://api.example.com/mcp')}\n`, [
      'routes.yaml: routes[0].resource: "https://api.example.com/mcp" is not one of the file\'s resources (it has none: list them under resources)'
    ]],
    ['a tier without a bearer token', file(MCP, route('resource: https://api.example.com/mcp', 'public')), [
      'routes.yaml: routes[0].resource: a resource\'s routes take bearer tokens; give it auth: bearer or signed, or drop resource'
    ]],
    ['http off loopback', file(MCP.replace('https://api.example.com/mcp', 'http://api.example.com/mcp'), route('resource: http://api.example.com/mcp')), [
      'routes.yaml: resources[0].id: "http://api.example.com/mcp" must be an https URL (http only on a loopback host, for tests)',
      'routes.yaml: routes[0].resource: "http://api.example.com/mcp" is not one of the file\'s resources (it has none: list them under resources)'
    ]],
    ['a query', file(MCP.replace('/mcp', '/mcp?v=1'), route('resource: https://api.example.com/mcp?v=1')), [
      'routes.yaml: resources[0].id: "https://api.example.com/mcp?v=1" must have no query and no fragment (RFC 8707 §2)',
      'routes.yaml: routes[0].resource: "https://api.example.com/mcp?v=1" is not one of the file\'s resources (it has none: list them under resources)'
    ]],
    ['one id twice', file(`${MCP}\n${MCP}`, route('resource: https://api.example.com/mcp')), [
      'routes.yaml: resources[1].id: "https://api.example.com/mcp" is already a resource; give each resource one entry'
    ]],
    ['one metadata path for two hosts', file(`${MCP}\n${MCP.replace('api.example.com', 'other.example.com')}`,
      `${route('resource: https://api.example.com/mcp')}\n${route('resource: https://other.example.com/mcp').replace('/mcp/', '/other/')}`), [
      'routes.yaml: resources[1].id: "https://other.example.com/mcp" has the path of "https://api.example.com/mcp", so both would have their ' +
        'metadata at /.well-known/oauth-protected-resource/mcp (keygate answers by path, never by Host); give each resource its own path',
      'routes.yaml: routes[1].resource: "https://other.example.com/mcp" is not one of the file\'s resources (known: https://api.example.com/mcp)'
    ]],
    ['no issuer', file(MCP.replace('[corp]', '[]'), route('resource: https://api.example.com/mcp')), [
      'routes.yaml: resources[0].issuers: must not be empty'
    ]],
    ['an issuer name that cannot be one', file(MCP.replace('[corp]', '[Corp_1]'), route('resource: https://api.example.com/mcp')), [
      'routes.yaml: resources[0].issuers[0]: "Corp_1" is not an issuer\'s name: lower-case letters, digits and "-", at most 32, starting with a letter or digit'
    ]],
    ['documentation not a URL', file(`${MCP}\n    documentation: see the wiki`, route('resource: https://api.example.com/mcp')), [
      'routes.yaml: resources[0].documentation: "see the wiki" is not an http(s) URL'
    ]],
    ['a route under the metadata path', 'routes:\n  - prefix: /.well-known/oauth-protected-resource/mine\n    upstream: http://x\n    auth: public\n', [
      'routes.yaml: routes[0].prefix: "/.well-known/oauth-protected-resource/mine" would shadow keygate\'s own ' +
        '/.well-known/oauth-protected-resource/...; route a path outside it'
    ]]
  ]
  for (const [name, yaml, expected] of cases) t.same(routeTextProblems(yaml), expected, name)
})

t.test('docs/resource-server.md\'s route file loads as the page says', async (t) => {
  const [route] = routesOfText(docSnippet('docs/resource-server.md', 'Naming resources', 'yaml'))
  t.match(route?.resource, {
    id: 'https://api.example.com/mcp',
    name: 'Example MCP server',
    documentation: 'https://docs.example.com/mcp',
    issuers: ['corp'],
    audiences: ['api://mcp'],
    metadataUrl: 'https://api.example.com/.well-known/oauth-protected-resource/mcp'
  })
  t.same(route?.scopes, ['mcp:tools'])
})

t.test('dpop (docs/dpop.md): on a route, or on a resource for each of its routes; only where tokens are taken', async (t) => {
  const routes = routesOfText(file(`${MCP}\n    dpop: required`, `${route('resource: https://api.example.com/mcp')}
  - prefix: /strict/
    upstream: http://x
    auth: signed
    dpop: required
  - prefix: /plain/
    upstream: http://x
    auth: bearer`))
  t.same(routes.map((r) => r.dpop), ['required', 'required', 'allowed'], 'the resource\'s route, the route that says so, the default')
  t.equal(routes[0]?.resource?.dpopRequired, true)
  t.same(routeTextProblems(`routes:\n${route('dpop: required', 'public')}\n`),
    ['routes.yaml: routes[0].dpop: DPoP binds tokens, which only bearer and signed routes take; give it auth: bearer or signed, or drop it'])
  t.match(routeTextProblems(`routes:\n${route('dpop: always')}\n`).join('\n'), /routes\[0\]\.dpop/, 'an unknown value: refused')
})
