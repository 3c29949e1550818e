// The route file's schema and rules: a table of bad files and the exact messages they get, and
// the defaults a minimal file is completed with.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { DEFAULT_IDENTITY_HEADERS } from '../../../../gateway/src/proxy/route.js'
import { HTTP_METHODS } from '@keygate/client/protocol'
import { RouteFileError, loadRouteFile, parseRouteText, routesFromDocument } from '../../../../gateway/src/proxy/route-file.js'
import { routeTextProblems } from '../../../helpers/routes.js'

const defaults = { upstream: 'http://127.0.0.1:8081', bodyLimit: 1048576, timeoutMs: 30000 }

const SMALLEST = `routes:
  - prefix: /v1/clients/
    upstream: http://127.0.0.1:8081
    auth: signed
  - prefix: /status/
    upstream: http://127.0.0.1:9000
    auth: public
    methods: [GET]
`

function problems (yaml: string): string[] {
  try {
    routesFromDocument(parseRouteText(yaml, 'routes.yaml'), 'routes.yaml', defaults)
  } catch (err) {
    if (err instanceof RouteFileError) return err.message.split('\n')
    throw err
  }
  return []
}

const route = (fields: string): string => `routes:\n  - ${fields.trim().split('\n').join('\n    ')}\n`

t.test('the smallest useful file works as written, with defaults', async (t) => {
  const routes = routesFromDocument(parseRouteText(SMALLEST, 'routes.yaml'), 'routes.yaml', defaults)
  t.equal(routes.length, 2)
  t.match(routes[0], {
    name: 'routes[0]',
    prefix: '/v1/clients/',
    exact: false,
    upstream: 'http://127.0.0.1:8081',
    auth: 'signed',
    methods: [...HTTP_METHODS],
    rewrite: undefined,
    bodyLimit: 1048576,
    timeoutMs: 30000,
    identityHeaders: DEFAULT_IDENTITY_HEADERS,
    addHeaders: {},
    removeHeaders: [],
    identityToken: undefined
  })
  t.same(routes[1]?.methods, ['GET'])
  t.equal(routes[1]?.auth, 'public')
})

t.test('JSON works too, and every field is read', async (t) => {
  const json = JSON.stringify({
    routes: [{
      name: 'orders',
      path: '/orders',
      upstream: 'https://orders.internal:8443/api',
      auth: 'bearer',
      methods: ['GET', 'POST'],
      rewrite: '/v2/orders',
      timeoutMs: 5000,
      bodyLimit: 2048,
      identityHeaders: { user: 'X-User' },
      addHeaders: { 'X-Env': 'prod' },
      removeHeaders: ['Cookie'],
      identityToken: { header: 'X-Proof', ttlSeconds: 60 },
      keepHeaders: ['X-HTTP-Method-Override']
    }, {
      prefix: '/files/',
      upstream: 'http://files.internal',
      auth: 'public',
      allowMatrixParams: true
    }]
  })
  const [r, files] = routesFromDocument(parseRouteText(json, 'routes.json'), 'routes.json', defaults)
  t.match(r, {
    name: 'orders',
    prefix: '/orders',
    exact: true,
    rewrite: '/v2/orders',
    timeoutMs: 5000,
    bodyLimit: 2048,
    identityHeaders: { user: 'x-user', key: 'x-gateway-key', keyName: 'x-gateway-key-name' },
    addHeaders: { 'x-env': 'prod' },
    removeHeaders: ['cookie'],
    identityToken: { header: 'x-proof', ttlSeconds: 60, audience: 'https://orders.internal:8443' },
    allowMatrixParams: false,
    keepHeaders: ['x-http-method-override']
  })
  t.match(files, { allowMatrixParams: true, keepHeaders: [] })
})

t.test('bad files and the exact messages they get', async (t) => {
  const ok = 'prefix: /a/\nupstream: http://127.0.0.1:1\nauth: signed'
  const cases: Array<[string, string, string[]]> = [
    ['a misspelt tier', route('prefix: /a/\nupstream: http://127.0.0.1:1\nauth: sigend'),
      ['routes.yaml: routes[0].auth: "sigend" is not one of signed, bearer, agent, public']],
    ['the third route misspelt',
      `routes:\n  - ${ok.split('\n').join('\n    ')}\n  - prefix: /b/\n    upstream: http://x\n    auth: public\n` +
      '  - prefix: /c/\n    upstream: http://x\n    auth: sigend\n',
      ['routes.yaml: routes[2].auth: "sigend" is not one of signed, bearer, agent, public']],
    ['no upstream', route('prefix: /a/\nauth: signed'), ['routes.yaml: routes[0].upstream: is required']],
    ['no auth', route('prefix: /a/\nupstream: http://x'), ['routes.yaml: routes[0].auth: is required']],
    ['an unknown field', route(`${ok}\ncolour: red`),
      ['routes.yaml: routes[0].colour: is not a known field (known: name, prefix, path, upstream, auth, methods, rewrite, timeoutMs, ' +
        'bodyLimit, identityHeaders, agents, addHeaders, removeHeaders, replay, signature, signatureLabel, seedBodyBoundary, unseenBody, ' +
        'bodyOnMethods, identityToken, ' +
        'allowMatrixParams, keepHeaders, ' +
        'rateLimits, onStoreDown, scopes, backendNormalises, resource, dpop, mcp)']],
    ['an unknown method', route(`${ok}\nmethods: [GET, FETCH]`),
      ['routes.yaml: routes[0].methods[1]: "FETCH" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS']],
    ['a method twice', route(`${ok}\nmethods: [GET, GET]`), ['routes.yaml: routes[0].methods: lists an item twice']],
    ['an unknown backend normalisation', route(`${ok}\nbackendNormalises: [case, unicode]`),
      ['routes.yaml: routes[0].backendNormalises[1]: "unicode" is not one of case, slash, trim']],
    ['a backend normalisation twice', route(`${ok}\nbackendNormalises: [trim, trim]`), ['routes.yaml: routes[0].backendNormalises: lists an item twice']],
    ['no methods', route(`${ok}\nmethods: []`), ['routes.yaml: routes[0].methods: must not be empty']],
    ['a prefix without a leading slash', route('prefix: a/\nupstream: http://x\nauth: public'),
      ['routes.yaml: routes[0].prefix: "a/" is not a path starting with /']],
    ['a timeout in words', route(`${ok}\ntimeoutMs: soon`), ['routes.yaml: routes[0].timeoutMs: must be a whole number, not "soon"']],
    ['a bad header name', route(`${ok}\nremoveHeaders: ["bad header"]`), ['routes.yaml: routes[0].removeHeaders[0]: "bad header" is not an HTTP header name']],
    ['routes not a list', 'routes: {}\n', ['routes.yaml: routes: must be a list, not {}']],
    ['no routes', 'routes: []\n', ['routes.yaml: routes: must not be empty']],
    ['an empty file', '', ['routes.yaml: the file: must be a mapping of fields, not null']],
    ['a top-level typo', 'route:\n  - prefix: /a/\n',
      ['routes.yaml: routes: is required', 'routes.yaml: route: is not a known field (known: resources, routes)']],
    ['neither prefix nor path', route('upstream: http://x\nauth: public'),
      ['routes.yaml: routes[0]: give either prefix (a path and everything under it) or path (one exact path), not neither']],
    ['both prefix and path', route('prefix: /a/\npath: /a\nupstream: http://x\nauth: public'),
      ['routes.yaml: routes[0]: give either prefix (a path and everything under it) or path (one exact path), not both']],
    ['an ftp upstream', route('prefix: /a/\nupstream: ftp://files.internal\nauth: public'),
      ['routes.yaml: routes[0].upstream: "ftp://files.internal" is not an http(s) URL']],
    ['an upstream that is no URL', route('prefix: /a/\nupstream: localhost:8080\nauth: public'),
      ['routes.yaml: routes[0].upstream: "localhost:8080" is not an http(s) URL']],
    ['credentials in the upstream', route('prefix: /a/\nupstream: http://user:pw@x\nauth: public'),
      ['routes.yaml: routes[0].upstream: "http://user:pw@x" must be scheme://host[:port][/path] without credentials, query or fragment ' +
        '(send credentials with addHeaders)']],
    ['two routes, one prefix, a shared method',
      'routes:\n  - prefix: /a/\n    upstream: http://x\n    auth: public\n    methods: [GET, POST]\n' +
      '  - prefix: /a/\n    upstream: http://y\n    auth: signed\n    methods: [POST, PUT]\n',
      ['routes.yaml: routes[1]: prefix "/a/" with POST is already routed by routes[0]; give each method one route']],
    ['shadowing the token endpoint', route('prefix: /v1/auth/\nupstream: http://x\nauth: public'),
      ["routes.yaml: routes[0].prefix: \"/v1/auth/\" would shadow keygate's own /v1/auth/token; route a path outside it"]],
    ['shadowing key registration exactly', route('path: /v1/api-keys\nupstream: http://x\nauth: public'),
      ["routes.yaml: routes[0].path: \"/v1/api-keys\" would shadow keygate's own /v1/api-keys; route a path outside it"]],
    ['shadowing by segment prefix', route('prefix: /v1/api-keys\nupstream: http://x\nauth: signed'),
      ["routes.yaml: routes[0].prefix: \"/v1/api-keys\" would shadow keygate's own /v1/api-keys; route a path outside it"]],
    ['shadowing key revocation', route('prefix: /v1/api-keys/\nupstream: http://x\nauth: signed'),
      ["routes.yaml: routes[0].prefix: \"/v1/api-keys/\" would shadow keygate's own /v1/api-keys/...; route a path outside it"]],
    ['a path under key revocation', route('path: /v1/api-keys/abc\nupstream: http://x\nauth: public'),
      ["routes.yaml: routes[0].path: \"/v1/api-keys/abc\" would shadow keygate's own /v1/api-keys/...; route a path outside it"]],
    ['YAML that does not parse', 'routes:\n  - prefix: [\n',
      ['routes.yaml: cannot be parsed: Flow sequence in block collection must be sufficiently indented and end with a ] at line 3, column 1']],
    ['a duplicate key', route(`${ok}\nauth: public`), ['routes.yaml: cannot be parsed: Map keys must be unique at line 5, column 5']],
    ['every mistake at once, schema and rules, in route order',
      'routes:\n  - prefix: /d/\n    upstream: ftp://files\n    auth: public\n' +
      '  - prefix: /c/\n    upstream: http://x\n    auth: sigend\n' +
      '  - prefix: /v1/auth/\n    upstream: http://x\n    auth: public\n    colour: red\n',
      [
        'routes.yaml: routes[0].upstream: "ftp://files" is not an http(s) URL',
        'routes.yaml: routes[1].auth: "sigend" is not one of signed, bearer, agent, public',
        'routes.yaml: routes[2].colour: is not a known field (known: name, prefix, path, upstream, auth, methods, rewrite, timeoutMs, ' +
          'bodyLimit, identityHeaders, agents, addHeaders, removeHeaders, replay, signature, signatureLabel, seedBodyBoundary, unseenBody, ' +
        'bodyOnMethods, identityToken, ' +
          'allowMatrixParams, keepHeaders, ' +
          'rateLimits, onStoreDown, scopes, backendNormalises, resource, dpop, mcp)'
      ]]
  ]
  for (const [name, yaml, expected] of cases) t.same(problems(yaml), expected, name)
})

t.test('mcp: sessions bound on every MCP route, for a day after their last use unless ttlSeconds says otherwise', async (t) => {
  const routesOf = (yaml: string) => routesFromDocument(parseRouteText(yaml, 'routes.yaml'), 'routes.yaml', defaults)
  t.equal(routesOf(route('prefix: /a/\nupstream: http://x\nauth: bearer'))[0]?.mcp, undefined, 'a route without mcp is not MCP')
  t.same(routesOf(route('prefix: /mcp\nupstream: http://x\nauth: bearer\nmcp: {}'))[0]?.mcp?.sessions, { ttlSeconds: 86400 }, 'the default lifetime')
  t.same(routesOf(route('prefix: /mcp\nupstream: http://x\nauth: bearer\nmcp: { sessions: { ttlSeconds: 600 } }'))[0]?.mcp?.sessions,
    { ttlSeconds: 600 })
  t.same(problems(route('prefix: /mcp\nupstream: http://x\nauth: bearer\nmcp: { sessions: { ttlSeconds: 10 } }')),
    ['routes.yaml: routes[0].mcp.sessions.ttlSeconds: 10 is not allowed (expected integer to be greater or equal to 60)'])
  t.same(problems(route('prefix: /mcp\nupstream: http://x\nauth: bearer\nmcp: { sessions: { bind: false } }')),
    ['routes.yaml: routes[0].mcp.sessions.bind: is not a known field (known: ttlSeconds)'])
})

t.test('matrix parameters: a boolean, on prefix routes', async (t) => {
  const cases: Array<[string, string, string[]]> = [
    ['allowMatrixParams not a boolean', route('prefix: /a/\nupstream: http://x\nauth: public\nallowMatrixParams: yes'),
      ['routes.yaml: routes[0].allowMatrixParams: must be true or false, not "yes"']],
    ['allowMatrixParams on an exact path', route('path: /a\nupstream: http://x\nauth: public\nallowMatrixParams: true'),
      ['routes.yaml: routes[0].allowMatrixParams: an exact path takes no matrix parameters; only a prefix route does, below its prefix']]
  ]
  for (const [name, yaml, expected] of cases) t.same(problems(yaml), expected, name)
})

t.test('scopes: scopes by the one rule, on signed and bearer routes only; read and write apart on one prefix', async (t) => {
  const cases: Array<[string, string, string[]]> = [
    ['a scope with a space', route('prefix: /a/\nupstream: http://x\nauth: signed\nscopes: [clients:read, "clients write"]'),
      ['routes.yaml: routes[0].scopes[1]: "clients write" is not a scope: 1-64 letters, digits, ":", ".", "_", "-" or "/" (no spaces)']],
    ['an empty scope', route('prefix: /a/\nupstream: http://x\nauth: bearer\nscopes: [""]'),
      ['routes.yaml: routes[0].scopes[0]: "" is not a scope: 1-64 letters, digits, ":", ".", "_", "-" or "/" (no spaces)']],
    ['a scope twice', route('prefix: /a/\nupstream: http://x\nauth: signed\nscopes: [a, a]'), ['routes.yaml: routes[0].scopes: lists an item twice']],
    ['not a list', route('prefix: /a/\nupstream: http://x\nauth: signed\nscopes: clients:read'),
      ['routes.yaml: routes[0].scopes: must be a list, not "clients:read"']],
    ['scopes on a public route', route('prefix: /a/\nupstream: http://x\nauth: public\nscopes: [clients:read]'),
      ['routes.yaml: routes[0].scopes: a public route has no user whose scopes it could check; give it auth: bearer or signed, or drop scopes']],
    ['the scopes header named with "_"', route('prefix: /a/\nupstream: http://x\nauth: signed\nidentityHeaders: { scopes: x_scopes }'),
      ['routes.yaml: routes[0].identityHeaders.scopes: "x_scopes" is not an HTTP header name without "_" ' +
        '(CGI-style servers read x_user and x-user as one header; use "-")']],
    ['scopes of every allowed character', route('prefix: /a/\nupstream: http://x\nauth: signed\nscopes: [a.B_c-d/e:9, "' + 'x'.repeat(64) + '"]'), []]
  ]
  for (const [name, yaml, expected] of cases) t.same(problems(yaml), expected, name)

  const routes = routesFromDocument(parseRouteText(`routes:
  - { prefix: /v1/clients/, upstream: http://x, auth: signed, methods: [GET], scopes: [clients:read] }
  - { prefix: /v1/clients/, upstream: http://x, auth: signed, methods: [POST], scopes: [clients:read, clients:write] }
  - { prefix: /v1/reports/, upstream: http://x, auth: bearer, scopes: [reports:read], identityHeaders: { scopes: X-Scopes } }
  - { prefix: /v1/other/, upstream: http://x, auth: signed }
`, 'routes.yaml'), 'routes.yaml', defaults)
  t.same(routes.map((r) => [r.methods, r.scopes]), [[['GET'], ['clients:read']], [['POST'], ['clients:read', 'clients:write']],
    [[...HTTP_METHODS], ['reports:read']], [[...HTTP_METHODS], []]], 'one prefix, a scope per method; none by default')
  t.equal(routes[2]?.identityHeaders.scopes, 'x-scopes', 'the scopes header renamed, in lower case')
  t.equal(routes[0]?.identityHeaders.scopes, DEFAULT_IDENTITY_HEADERS.scopes, 'by default x-gateway-scopes')
})

t.test('keepHeaders: only the headers keygate strips, any case', async (t) => {
  const cases: Array<[string, string, string[]]> = [
    ['keepHeaders naming a header keygate does not strip', route('prefix: /a/\nupstream: http://x\nauth: public\nkeepHeaders: [X-HTTP-Method, X-Forwarded-For]'),
      ['routes.yaml: routes[0].keepHeaders[1]: "x-forwarded-for" is not one of the headers keygate strips (x-http-method-override, x-http-method, ' +
        'x-method-override, x-original-url, x-rewrite-url); other client headers are forwarded anyway']],
    ['keepHeaders not a list', route('prefix: /a/\nupstream: http://x\nauth: public\nkeepHeaders: x-http-method'),
      ['routes.yaml: routes[0].keepHeaders: must be a list, not "x-http-method"']],
    ['a header twice', route('prefix: /a/\nupstream: http://x\nauth: public\nkeepHeaders: [x-http-method, x-http-method]'),
      ['routes.yaml: routes[0].keepHeaders: lists an item twice']],
    ['every one of them, in any case', route('prefix: /a/\nupstream: http://x\nauth: public\n' +
      'keepHeaders: [X-HTTP-Method-Override, x-http-method, X-Method-Override, X-ORIGINAL-URL, x-rewrite-url]'), []]
  ]
  for (const [name, yaml, expected] of cases) t.same(problems(yaml), expected, name)
})

t.test('canonical paths, rewrites that glue segments, identity header names', async (t) => {
  const cases: Array<[string, string, string[]]> = [
    ['a rewrite gluing segments', route('name: reports\nprefix: /reports/\nupstream: http://x\nauth: bearer\nrewrite: /v1/clients'),
      ['routes.yaml: routes[0].rewrite: "/v1/clients" glues segments: the prefix "/reports/" ends in "/" and the rewrite does not, ' +
        'so /reports/-admin would be forwarded as /v1/clients-admin; end both in "/" or neither']],
    ['the reverse: a segment prefix rewritten to a path ending in "/"', route('prefix: /status\nupstream: http://x\nauth: public\nrewrite: /health/'),
      ['routes.yaml: routes[0].rewrite: "/health/" ends in "/" and the prefix "/status" does not, so /status would be forwarded as /health/, ' +
        'another path; end both in "/" or neither']],
    ['a catch-all rewritten without its slash', route('prefix: /\nupstream: http://x\nauth: public\nrewrite: /api'),
      ['routes.yaml: routes[0].rewrite: "/api" glues segments: the prefix "/" ends in "/" and the rewrite does not, ' +
        'so /-admin would be forwarded as /api-admin; end both in "/" or neither']],
    ['a prefix with an encoded unreserved character', route('prefix: /v1/%63lients/\nupstream: http://x\nauth: public'),
      ['routes.yaml: routes[0].prefix: "/v1/%63lients/" can never match: The request path has an encoded unreserved character %63 (\'c\'): ' +
        'send it unencoded']],
    ['a path with an empty segment', route('path: /a//b\nupstream: http://x\nauth: public'),
      ['routes.yaml: routes[0].path: "/a//b" can never match: The request path has an empty segment ("//"), which servers merge: ' +
        'send the path with single slashes']],
    ['a prefix with ";"', route('prefix: /a;v=1/\nupstream: http://x\nauth: public'),
      ['routes.yaml: routes[0].prefix: "/a;v=1/" can never match: The path has a ";" (matrix parameters), which routes are matched without ' +
        'and backends drop; a route takes them below its prefix with allowMatrixParams']],
    ['a rewrite with an encoded slash', route('prefix: /a/\nupstream: http://x\nauth: public\nrewrite: /b%2Fc/'),
      ['routes.yaml: routes[0].rewrite: "/b%2Fc/" is not a canonical path: The request path has an encoded "/" (%2F), which one server reads ' +
        'as a segment boundary and another as part of a segment: keygate refuses it; send such a value in the query']],
    ['a rewrite with a dot segment', route('prefix: /a/\nupstream: http://x\nauth: public\nrewrite: /b/../c/'),
      ['routes.yaml: routes[0].rewrite: "/b/../c/" is not a canonical path: The request path has a "." or ".." segment, or ".." next to a "/" ' +
        '(plain or percent-encoded); send the normalised path']],
    ['an identity header with "_"', route('prefix: /a/\nupstream: http://x\nauth: bearer\nidentityHeaders: { user: x_user }'),
      ['routes.yaml: routes[0].identityHeaders.user: "x_user" is not an HTTP header name without "_" (CGI-style servers read x_user and x-user ' +
        'as one header; use "-")']],
    ['an identity token header with "_"', route('prefix: /a/\nupstream: http://x\nauth: bearer\nidentityToken: { header: X_Proof }'),
      ['routes.yaml: routes[0].identityToken.header: "X_Proof" is not an HTTP header name without "_" (CGI-style servers read x_user and x-user ' +
        'as one header; use "-")']]
  ]
  for (const [name, yaml, expected] of cases) t.same(problems(yaml), expected, name)

  const fine = `routes:
  - { prefix: /reports/, upstream: http://x, auth: signed, rewrite: /v1/clients/ }
  - { prefix: /status, upstream: http://x, auth: public, rewrite: /health }
  - { path: /me, upstream: http://x, auth: bearer, rewrite: /v2/users/me }
  - { prefix: /files/, upstream: http://x, auth: public, allowMatrixParams: true }
  - { prefix: /x/, upstream: http://x, auth: public, rewrite: /, identityHeaders: { user: X-User-Name } }
`
  t.same(problems(fine), [], 'rewrites ending in "/" with their prefix or not at all, exact paths rewritten whole, matrix parameters under a prefix')
})

t.test('allowed: the same prefix split by method, catch-alls over keygate\'s endpoints, exact beside prefix', async (t) => {
  const yaml = `routes:
  - prefix: /a/
    upstream: http://x
    auth: public
    methods: [GET]
  - prefix: /a/
    upstream: http://y
    auth: signed
    methods: [POST]
  - prefix: /
    upstream: http://z
    auth: signed
  - path: /a/
    upstream: http://w
    auth: bearer
`
  t.same(problems(yaml), [])
})

t.test('loadRouteFile names the file; a missing file says so', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-routes-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  writeFileSync(join(dir, 'platform.yaml'), route('prefix: /a/\nupstream: http://x\nauth: nope'))
  await t.rejects(
    loadRouteFile(join(dir, 'platform.yaml'), defaults),
    { name: 'RouteFileError', message: 'platform.yaml: routes[0].auth: "nope" is not one of signed, bearer, agent, public' }
  )
  await t.rejects(loadRouteFile(join(dir, 'missing.yaml'), defaults), { message: `${join(dir, 'missing.yaml')}: cannot be read: ENOENT` })
})

t.test('agent routes: agents required, origins as https://host[:port], no scopes; agents on a public route refused', async (t) => {
  const problems = (entry: string): string[] => routeTextProblems(`routes:\n  - { prefix: /a/, upstream: http://127.0.0.1:1, ${entry} }\n`)
  t.same(problems('auth: agent'),
    ['routes.yaml: routes[0].agents: an agent route says which signed agents it lets in: any, or a list of their directory origins'])
  t.same(problems('auth: agent, agents: [https://agent.example/, "http://b.example"]'), [
    'routes.yaml: routes[0].agents[0]: "https://agent.example/" is not an origin as https://host[:port] (lower case, no path, no trailing /)',
    'routes.yaml: routes[0].agents[1]: "http://b.example" is not an origin as https://host[:port] (lower case, no path, no trailing /)'
  ])
  t.same(problems('auth: agent, agents: any, scopes: [a:b]'),
    ['routes.yaml: routes[0].scopes: an agent route has no user whose scopes it could check; drop scopes'])
  t.same(problems('auth: public, agents: any'),
    ['routes.yaml: routes[0].agents: a public route asks for nothing; give it auth: agent (or bearer or signed, for a user\'s agent)'])
  t.same(problems('auth: bearer, agents: [https://agent.example:8443]'), [], 'a user\'s agent: a bearer route may name agents')
})
