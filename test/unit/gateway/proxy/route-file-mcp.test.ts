// The route file's `mcp` object (docs/mcp.md): what it takes, and each mistake said for the file's
// author: an unknown field, a bad requirement, methods that their own maps judge, scopes on a tier
// without a user, an origin as no browser sends it.
import t from 'tap'
import { docSnippet } from '../../../helpers/docs.js'
import { routeEntryProblems, routesOfEntry, routesOfText } from '../../../helpers/routes.js'

t.test('a policy loads, and is shown as written', async (t) => {
  const [route] = routesOfEntry(`auth: bearer
scopes: [mcp:use]
mcp:
  tools: { "search_*": [mcp:read], shutdown: deny }
  resources: { "file:///public/*": [] }
  methods: { "logging/*": [mcp:admin] }
  default: deny
  origins: [https://app.example.com, "http://localhost:5173"]`)
  t.ok(route?.mcp, 'the route is an MCP route')
  t.same(route?.mcp?.origins, new Set(['https://app.example.com', 'http://localhost:5173']))
  t.same(JSON.parse(JSON.stringify(route)).mcp.tools, { 'search_*': ['mcp:read'], shutdown: 'deny' })
  t.equal(routesOfEntry('auth: bearer')[0]?.mcp, undefined, 'no mcp: an ordinary route')
  t.same(routeEntryProblems('auth: public\nmcp: { default: deny, methods: { "tools/list": [] } }'), [], 'a public route: [] and deny')
})

t.test('each mistake is named', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['auth: bearer\nmcp: { tool: {} }', /routes\[0\]\.mcp\.tool: is not a known field \(known: tools, resources, prompts, methods, default, origins, sessions, toolRateLimits, streams\)/],
    ['auth: bearer\nmcp: { default: allow }', /routes\[0\]\.mcp\.default: .*not a list of scopes, or deny/],
    ['auth: bearer\nmcp: { tools: { x: ["has space"] } }', /routes\[0\]\.mcp\.tools\.x/],
    ['auth: bearer\nmcp: { methods: { "tools/call": [a] } }', /mcp\.methods: tools\/call is judged per name by mcp\.tools; list it there/],
    ['auth: agent\nagents: any\nmcp: { tools: { x: [a] } }', /an agent route has no user whose scopes it could check/],
    ['auth: public\nmcp: { default: [a] }', /a public route has no user whose scopes it could check/],
    ['auth: bearer\nmcp: { origins: ["https://app.example.com/"] }', /mcp\.origins\[0\]: "https:\/\/app\.example\.com\/" is not an origin as a browser sends it/],
    ['auth: bearer\nmcp: { origins: ["https://APP.example.com"] }', /mcp\.origins\[0\]/],
    ['auth: bearer\nmcp: { origins: ["null"] }', /mcp\.origins\[0\]/],
    ['auth: bearer\nmcp: { streams: { idleSeconds: 0 } }', /routes\[0\]\.mcp\.streams\.idleSeconds: 0 is not allowed \(expected integer to be greater or equal to 1\)/],
    ['auth: bearer\nmcp: { streams: { idleSeconds: 86401 } }', /mcp\.streams\.idleSeconds: 86401 is not allowed/],
    ['auth: bearer\nmcp: { streams: { idleSeconds: 1.5 } }', /mcp\.streams\.idleSeconds: must be a whole number/],
    ['auth: bearer\nmcp: { streams: { idleMs: 1000 } }', /mcp\.streams\.idleMs: is not a known field \(known: idleSeconds\)/]
  ]
  for (const [entry, problem] of cases) t.match(routeEntryProblems(entry).join('\n'), problem, entry)
})

t.test('docs/mcp.md\'s route file loads as the page says', async (t) => {
  const [route] = routesOfText(docSnippet('docs/mcp.md', 'A route file', 'yaml'))
  const policy = route?.mcp
  t.ok(policy, 'an MCP route')
  t.same(policy?.default, 'deny')
  t.same([...policy?.origins ?? []], ['https://app.example.com'])
  t.same(policy?.sessions, { ttlSeconds: 86_400 }, 'sessions bound for a day after their last use, by default')
  t.same(policy?.streams, { idleSeconds: 300 }, 'a stream cut after 5 minutes without a byte, by default')
  t.same(routesOfEntry('auth: bearer\nmcp: { streams: { idleSeconds: 3600 } }')[0]?.mcp?.streams, { idleSeconds: 3600 }, 'or as the route says')
  t.same(route?.resource?.id, 'https://api.example.com/mcp')
  const search = policy?.toolLimits?.globs.find((rule) => rule.pattern === 'search_*')?.requirement
  t.match(search, [{ by: 'user', limit: 60, window: '1m', policy: 'tool-user-1m' }], 'a glob\'s own limit')
  t.match(policy?.toolLimits?.exact.get('delete_repository'), [{ by: 'user', limit: 10, window: '1d', policy: 'tool-user-1d' }])
})
