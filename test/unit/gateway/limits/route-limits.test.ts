// The route file's rate-limit fields: what a valid entry becomes, and a table of bad files with
// the exact messages they get (each naming the route and the field, and saying why).
import t from 'tap'
import { windowSeconds } from '../../../../gateway/src/limits/rate-limit.js'
import { routesOfText as load, routeTextProblems as problems } from '../../../helpers/routes.js'

/** one route of `auth` with these extra lines */
const route = (auth: string, extra: string, prefix = '/v1/things/', methods = ''): string =>
  `  - prefix: ${prefix}\n    upstream: http://127.0.0.1:8081\n    auth: ${auth}\n${methods === '' ? '' : `    methods: [${methods}]\n`}` +
  extra.trim().split('\n').map((line) => `    ${line}`).join('\n') + '\n'
const file = (...routes: string[]): string => `routes:\n${routes.join('')}`

t.test('windows: a whole number and s, m, h or d', async (t) => {
  t.equal(windowSeconds('1s'), 1)
  t.equal(windowSeconds('10s'), 10)
  t.equal(windowSeconds('1m'), 60)
  t.equal(windowSeconds('1h'), 3600)
  t.equal(windowSeconds('30d'), 2_592_000)
  for (const bad of ['0s', '1', '1.5s', '1w', ' 1s', '01s', 's', '1S']) t.equal(windowSeconds(bad), undefined, bad)
})

t.test('a valid file: each limit with its counter and policy name; onStoreDown defaults to allow', async (t) => {
  const routes = load(file(
    route('signed', 'rateLimits:\n  - { by: key, limit: 20, window: 10s }\n  - { by: user, limit: 100000, window: 30d, bucket: monthly }\n' +
      'onStoreDown: deny', '/v1/things/', 'GET'),
    route('signed', 'rateLimits:\n  - { by: user, limit: 100000, window: 30d, bucket: monthly }', '/v1/things/', 'POST'),
    route('public', 'rateLimits:\n  - { by: address, limit: 5, window: 1s }', '/status/'),
    route('bearer', '', '/other/'),
    route('agent', 'agents: any\nrateLimits:\n  - { by: agent, limit: 3, window: 1m }\n  - { by: address, limit: 10, window: 1m }', '/agents/'),
    route('bearer', 'agents: [https://agent.example]\nrateLimits:\n  - { by: agent, limit: 5, window: 1h, bucket: agents }\n  - { by: user, limit: 5, window: 1h }',
      '/assist/')
  ))
  const [get, post, status, other, agents, assist] = routes
  t.match(agents?.rateLimits, [{ by: 'agent', limit: 3, window: '1m', policy: 'agent-1m' }, { by: 'address', policy: 'address-1m' }],
    'an agent route counts by agent')
  t.match(assist?.rateLimits, [{ by: 'agent', policy: 'agents-agent-1h' }, { by: 'user' }], 'a bearer route naming agents counts by agent or user')
  t.match(get?.rateLimits, [
    { by: 'key', limit: 20, window: '10s', windowMs: 10_000, bucket: undefined, policy: 'key-10s' },
    { by: 'user', limit: 100_000, window: '30d', windowMs: 2_592_000_000, bucket: 'monthly', policy: 'monthly-user-30d' }
  ])
  t.equal(get?.onStoreDown, 'deny')
  t.equal(post?.onStoreDown, 'allow', 'the default')
  t.equal(get?.rateLimits[1]?.counter, post?.rateLimits[0]?.counter, 'one bucket: one counter on both routes')
  t.not(get?.rateLimits[0]?.counter, status?.rateLimits[0]?.counter)
  t.same(other?.rateLimits, [], 'no limits')

  // Without a bucket each route counts alone: a GET and a POST route of one prefix do not share.
  const split = load(file(
    route('signed', 'rateLimits:\n  - { by: key, limit: 20, window: 10s }', '/v1/things/', 'GET'),
    route('signed', 'rateLimits:\n  - { by: key, limit: 20, window: 10s }', '/v1/things/', 'POST')
  ))
  t.not(split[0]?.rateLimits[0]?.counter, split[1]?.rateLimits[0]?.counter, 'routes without a bucket have counters of their own')
  // A route keeps its counters when the file is reordered or the route renamed.
  const reordered = load(file(
    route('signed', 'rateLimits:\n  - { by: key, limit: 20, window: 10s }', '/v1/things/', 'POST'),
    route('signed', 'name: renamed\nrateLimits:\n  - { by: key, limit: 20, window: 10s }', '/v1/things/', 'GET')
  ))
  t.equal(reordered[1]?.rateLimits[0]?.counter, split[0]?.rateLimits[0]?.counter, 'counted by path and methods, not by name or position')
})

const CASES: Array<[string, string, string[]]> = [
  ['by key on a bearer route', file(route('bearer', 'rateLimits:\n  - { by: key, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "key" counts per API key, which only a signed route knows; this route is bearer (count by user or address)']],
  ['by key on a public route', file(route('public', 'rateLimits:\n  - { by: key, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "key" counts per API key, which only a signed route knows; this route is public (count by address)']],
  ['by user on a public route', file(route('public', 'rateLimits:\n  - { by: user, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "user" counts per user, which a public route does not know (count by address)']],
  ['an unknown by', file(route('signed', 'rateLimits:\n  - { by: ip, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "ip" is not one of key, user, agent, address']],
  ['by key on an agent route', file(route('agent', 'agents: any\nrateLimits:\n  - { by: key, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "key" counts per API key, which only a signed route knows; this route is agent (count by agent or address)']],
  ['by user on an agent route', file(route('agent', 'agents: any\nrateLimits:\n  - { by: user, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "user" counts per user, and an agent route has none: it knows the signed agent (count by agent or address)']],
  ['by agent on a bearer route without agents', file(route('bearer', 'rateLimits:\n  - { by: agent, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "agent" counts per signed agent, which only a route that takes agents knows (auth: agent, or a bearer or ' +
      'signed route naming agents); this route is bearer without agents (count by user or address)']],
  ['by agent on a public route', file(route('public', 'rateLimits:\n  - { by: agent, limit: 1, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].by: "agent" counts per signed agent, which only a route that takes agents knows (auth: agent, or a bearer or ' +
      'signed route naming agents); this route is public without agents (count by address)']],
  ['a window with a unit keygate does not take', file(route('signed', 'rateLimits:\n  - { by: key, limit: 1, window: 1w }')),
    ['routes.yaml: routes[0].rateLimits[0].window: "1w" is not a whole number and s, m, h or d (1s, 10s, 1m, 1h, 1d, 30d)']],
  ['a window over a year', file(route('signed', 'rateLimits:\n  - { by: key, limit: 1, window: 367d }')),
    ['routes.yaml: routes[0].rateLimits[0].window: "367d" is longer than the longest window, 366d']],
  ['a limit of 0', file(route('signed', 'rateLimits:\n  - { by: key, limit: 0, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].limit: 0 is not allowed (expected integer to be greater or equal to 1)']],
  ['a limit that is no whole number', file(route('signed', 'rateLimits:\n  - { by: key, limit: 2.5, window: 1s }')),
    ['routes.yaml: routes[0].rateLimits[0].limit: must be a whole number, not 2.5']],
  ['a missing window', file(route('signed', 'rateLimits:\n  - { by: key, limit: 1 }')),
    ['routes.yaml: routes[0].rateLimits[0].window: is required']],
  ['an unknown field in a limit', file(route('signed', 'rateLimits:\n  - { by: key, limit: 1, window: 1s, burst: 5 }')),
    ['routes.yaml: routes[0].rateLimits[0].burst: is not a known field (known: by, limit, window, bucket)']],
  ['an empty list', file(route('signed', 'rateLimits: []')),
    ['routes.yaml: routes[0].rateLimits: must not be empty']],
  ['a bad bucket name', file(route('signed', 'rateLimits:\n  - { by: key, limit: 1, window: 1s, bucket: "Month ly" }')),
    ['routes.yaml: routes[0].rateLimits[0].bucket: "Month ly" is not a bucket name: lower-case letters, digits, "-" and "_", at most 63']],
  ['onStoreDown neither allow nor deny', file(route('signed', 'rateLimits:\n  - { by: key, limit: 1, window: 1s }\nonStoreDown: fail')),
    ['routes.yaml: routes[0].onStoreDown: "fail" is not one of allow, deny']],
  ['onStoreDown without limits', file(route('signed', 'onStoreDown: deny')),
    ['routes.yaml: routes[0].onStoreDown: applies only to a route with rateLimits']],
  ['two limits of one route in one counter, other numbers',
    file(route('signed', 'rateLimits:\n  - { by: key, limit: 10, window: 1m }\n  - { by: key, limit: 20, window: 60s }')),
    ['routes.yaml: routes[0].rateLimits[1]: counts in the same counter as rateLimits[0] (by key per 60s); give each counter one limit']],
  ['two limits of one route in one counter, the same numbers',
    file(route('signed', 'rateLimits:\n  - { by: key, limit: 10, window: 1m }\n  - { by: key, limit: 10, window: 1m }')),
    ['routes.yaml: routes[0].rateLimits[1]: counts in the same counter as rateLimits[0] (by key per 1m); give each counter one limit']],
  ['one bucket with two limits on two routes', file(
    route('signed', 'rateLimits:\n  - { by: user, limit: 1000, window: 30d, bucket: monthly }', '/a/'),
    route('bearer', 'rateLimits:\n  - { by: user, limit: 2000, window: 30d, bucket: monthly }', '/b/')),
  ['routes.yaml: routes[1].rateLimits[0]: bucket "monthly" by user is 2000 per 30d here and 1000 per 30d in routes[0].rateLimits[0]; ' +
    'a shared counter has one limit: give both the same, or another bucket']]
]

t.test('bad rate limits: each problem named, with why', async (t) => {
  for (const [name, yaml, expected] of CASES) t.same(problems(yaml), expected, name)
})

t.test('one bucket, one limit, on several routes and tiers; other windows or bys are other counters', async (t) => {
  t.same(problems(file(
    route('signed', 'rateLimits:\n  - { by: user, limit: 1000, window: 30d, bucket: monthly }', '/a/'),
    route('bearer', 'rateLimits:\n  - { by: user, limit: 1000, window: 30d, bucket: monthly }\n' +
      '  - { by: user, limit: 10, window: 1s, bucket: monthly }', '/b/'),
    route('public', 'rateLimits:\n  - { by: address, limit: 5, window: 30d, bucket: monthly }', '/c/')
  )), [])
})

t.test('an MCP route\'s tool limits (mcp.toolRateLimits): their own counters and policy names; the same rules, named by tool', async (t) => {
  const tools = 'mcp:\n  toolRateLimits:\n    "search_*": [{ by: user, limit: 10, window: 1m }]\n' +
    '    delete_repository: [{ by: user, limit: 5, window: 1d }, { by: user, limit: 100, window: 30d, bucket: monthly }]\n'
  const [mcp] = load(file(route('bearer', `rateLimits:\n  - { by: user, limit: 100, window: 1m }\n${tools}`, '/mcp/')))
  const search = mcp?.mcp?.toolLimits?.globs[0]?.requirement ?? []
  const remove = mcp?.mcp?.toolLimits?.exact.get('delete_repository') ?? []
  t.same([...search, ...remove].map((limit) => limit.policy), ['tool-user-1m', 'tool-user-1d', 'monthly-user-30d'],
    'a tool\'s own limit says "tool"; a bucket keeps its name')
  const counters = [mcp?.rateLimits[0]?.counter, search[0]?.counter, remove[0]?.counter]
  t.equal(new Set(counters).size, 3, 'the route\'s and each tool\'s: three counters')
  t.equal(remove[1]?.counter, 'b:monthly:user:2592000', 'a bucket: the one counter of that name')
  t.same(problems(file(route('bearer', 'mcp:\n  toolRateLimits:\n    write: [{ by: key, limit: 1, window: 1s }]\n', '/mcp/'))), [
    'routes.yaml: routes[0].mcp.toolRateLimits["write"][0].by: "key" counts per API key, which only a signed route knows; this route is bearer ' +
      '(count by user or address)'
  ], 'by key on a bearer route')
  t.same(problems(file(route('bearer', 'rateLimits:\n  - { by: user, limit: 9, window: 1d, bucket: daily }\n' +
    'mcp:\n  toolRateLimits:\n    write: [{ by: user, limit: 9, window: 1d, bucket: daily }]\n', '/mcp/'))), [
    'routes.yaml: routes[0].mcp.toolRateLimits["write"][0]: counts in the same counter as the route\'s rateLimits[0]; give the tool another bucket'
  ], 'a tool limit in the route\'s own counter')
  t.same(problems(file(route('bearer', 'onStoreDown: deny\nmcp:\n  toolRateLimits:\n    write: [{ by: user, limit: 1, window: 1s }]\n', '/mcp/'))), [],
    'onStoreDown with tool limits alone')
})

t.test('a bucket a route and a tool of another route share: one limit, or a problem', async (t) => {
  t.same(problems(file(
    route('bearer', 'rateLimits:\n  - { by: user, limit: 1000, window: 30d, bucket: monthly }', '/a/'),
    route('bearer', 'mcp:\n  toolRateLimits:\n    write: [{ by: user, limit: 50, window: 30d, bucket: monthly }]\n', '/mcp/'))), [
    'routes.yaml: routes[1].mcp.toolRateLimits["write"][0]: bucket "monthly" by user is 50 per 30d here and 1000 per 30d in routes[0].rateLimits[0]; ' +
      'a shared counter has one limit: give both the same, or another bucket'
  ])
})
