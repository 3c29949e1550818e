// An MCP route's policy (mcp-calls/policy.ts): which rule judges a tool, resource, prompt or method, with
// globs and precedence (exact beats glob, the longer literal prefix beats the shorter, the file's
// order breaks ties), the default for unlisted names and none for unlisted methods.
import fc from 'fast-check'
import t from 'tap'
import { compilePolicy, compileRules, judge, lookup } from '../../../../gateway/src/mcp-calls/policy.js'
import type { McpMessage } from '../../../../gateway/src/mcp-calls/messages.js'

t.test('the most specific rule wins', async (t) => {
  const rules = compileRules({
    '*': ['any'], 'search_*': ['read'], 'search_admin_*': ['admin'], search_docs: ['docs'], 'a*': ['first'], '*a': ['x'], 'a*b': ['ab']
  })
  const cases: Array<[string, string | undefined]> = [
    ['search_docs', 'search_docs'],
    ['search_web', 'search_*'],
    ['search_admin_users', 'search_admin_*'],
    ['delete_repository', '*'],
    ['', '*'],
    ['a/b', 'a*b'],
    ['ab', 'a*b'],
    ['ac', 'a*']
  ]
  for (const [name, pattern] of cases) t.equal(lookup(rules, name)?.pattern, pattern, name)
  t.equal(lookup(compileRules({ 'x*': ['1'] }), 'y'), undefined, 'nothing matches: no rule')
  t.equal(lookup(compileRules({ 'a.b': ['1'] }), 'aXb'), undefined, 'only * is special: "." is a dot')
  t.equal(lookup(compileRules({ 'f(x)+': ['1'] }), 'f(x)+')?.pattern, 'f(x)+', 'regex characters are literal')
  t.equal(lookup(compileRules({ 'x*1': ['a'], 'x*2': ['b'], 'x*': ['c'] }), 'x12')?.pattern, 'x*2', 'equal prefix: the longer literal')
  t.equal(lookup(compileRules({ 'x*y': ['a'], 'x*z': ['b'] }), 'xyz')?.pattern, 'x*z', 'the only one that matches')
  t.equal(lookup(compileRules({ '*_1': ['a'], '*1': ['b'] }), 'q_1')?.pattern, '*_1', 'ties on prefix: longer literal')
  t.equal(lookup(compileRules({ 'a*c': ['a'], 'ab*': ['b'] }), 'abc')?.pattern, 'ab*', 'longer prefix beats longer literal')
  t.equal(lookup(compileRules({ 'p*q': ['first'], 'p*r': ['second'], 'p*': ['x'] }), 'pqr')?.pattern, 'p*r', 'the longer literal among ties')
  t.equal(lookup(compileRules({ '*x': ['first'], '*y': ['second'] }), 'xy')?.pattern, '*y', 'a glob matches the whole name')
  t.equal(lookup(compileRules({ constructor: ['c'] }), 'toString'), undefined, 'no prototype names')
})

const policy = compilePolicy({
  tools: { 'search_*': ['mcp:read'], delete_repository: ['repo:admin'], shutdown: 'deny' },
  resources: { 'file:///public/*': ['mcp:read'] },
  prompts: { summarise: [] },
  methods: { 'logging/setLevel': ['mcp:admin'], 'notifications/*': [] },
  default: 'deny'
})
const rpc = (method: string, params?: Record<string, unknown>): McpMessage =>
  ({ kind: 'request', method, id: 1, ...(params !== undefined && { params: params as McpMessage['params'] }) }) as McpMessage

t.test('each message is judged by its own map', async (t) => {
  t.same(judge(policy, rpc('tools/call', { name: 'search_web' })), { what: 'the tool "search_web"', requirement: ['mcp:read'] })
  t.same(judge(policy, rpc('tools/call', { name: 'delete_repository' }))?.requirement, ['repo:admin'])
  t.equal(judge(policy, rpc('tools/call', { name: 'shutdown' }))?.requirement, 'deny')
  t.equal(judge(policy, rpc('tools/call', { name: 'unlisted' }))?.requirement, 'deny', 'unlisted tool: the default')
  t.same(judge(policy, rpc('resources/read', { uri: 'file:///public/a.txt' }))?.requirement, ['mcp:read'])
  t.equal(judge(policy, rpc('resources/read', { uri: 'file:///etc/passwd' }))?.requirement, 'deny')
  t.same(judge(policy, rpc('prompts/get', { name: 'summarise' }))?.requirement, [])
  t.same(judge(policy, rpc('logging/setLevel', { level: 'debug' }))?.requirement, ['mcp:admin'])
  t.equal(judge(policy, rpc('tools/list')), undefined, 'an unlisted method asks nothing beyond the route')
  t.equal(judge(policy, { kind: 'response', id: 's1' }), undefined, 'a response to the server passes')
  t.same(judge(policy, { kind: 'notification', method: 'notifications/cancelled' })?.requirement, [], 'a notification by its method')
  t.same(judge(compilePolicy({}), rpc('tools/call', { name: 'x' }))?.requirement, [], 'no default: the route\'s scopes suffice')
  t.same(JSON.parse(JSON.stringify(policy)).default, 'deny', 'shown as written')
})

t.test('subscribing to a resource and completing a prompt\'s or a template\'s arguments ask what using it asks', async (t) => {
  const guarded = compilePolicy({
    resources: { 'file:///public/*': ['mcp:read'], 'file:///private/*': ['files:private'], 'file:///private/keys': 'deny' },
    prompts: { summarise: ['mcp:read'], leak: 'deny' },
    methods: { 'resources/subscribe': ['mcp:watch'] },
    default: []
  })
  t.same(judge(guarded, rpc('resources/subscribe', { uri: 'file:///private/plan' })),
    { what: 'the method resources/subscribe on the resource "file:///private/plan"', requirement: ['mcp:watch', 'files:private'] },
    'the method\'s scopes and the resource\'s')
  t.same(judge(guarded, rpc('resources/unsubscribe', { uri: 'file:///private/plan' }))?.requirement, ['files:private'], 'no method rule: the resource\'s')
  t.equal(judge(guarded, rpc('resources/subscribe', { uri: 'file:///private/keys' }))?.requirement, 'deny', 'a denied resource cannot be watched')
  t.same(judge(guarded, rpc('completion/complete', { ref: { type: 'ref/prompt', name: 'summarise' }, argument: { name: 'a', value: '' } }))?.requirement,
    ['mcp:read'], 'a prompt\'s completion: the prompt\'s rule')
  t.equal(judge(guarded, rpc('completion/complete', { ref: { type: 'ref/prompt', name: 'leak' } }))?.requirement, 'deny')
  t.same(judge(guarded, rpc('completion/complete', { ref: { type: 'ref/resource', uri: 'file:///public/{name}' } }))?.requirement,
    ['mcp:read'], 'a template under one glob: that glob\'s')
  t.equal(judge(guarded, rpc('completion/complete', { ref: { type: 'ref/resource', uri: 'file:///private/{name}' } }))?.requirement,
    'deny', 'a template that can expand to a denied URI is denied')
  t.same(judge(guarded, rpc('completion/complete', { ref: { type: 'ref/resource', uri: 'file:///{path}' } }))?.requirement,
    'deny', 'a template over everything asks what every rule under it asks')
  t.same(judge(compilePolicy({ resources: { 'file:///private/*': ['files:private'] } }),
    rpc('completion/complete', { ref: { type: 'ref/resource', uri: 'file:///{path}' } }))?.requirement, ['files:private'])
})

t.test('a glob matches as its regular expression would (property), without one', async (t) => {
  const reference = (pattern: string, name: string): boolean =>
    new RegExp(`^${pattern.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*')}$`).test(name)
  const text = fc.string({ unit: fc.constantFrom('a', 'b', '/', '*'), maxLength: 8 })
  fc.assert(fc.property(text, fc.string({ unit: fc.constantFrom('a', 'b', '/'), maxLength: 10 }), (pattern, name) => {
    const rules = compileRules({ [pattern === '' ? 'x' : pattern]: [] })
    t.equal(lookup(rules, name) !== undefined, reference(pattern === '' ? 'x' : pattern, name), `${pattern} ~ ${name}`)
  }), { numRuns: 2000 })
  // a name of a megabyte against a glob a backtracking matcher would take years over
  t.equal(lookup(compileRules({ 'a*a*a*a*a*a*b': [] }), 'a'.repeat(1024 * 1024)), undefined, 'answered, not searched')
})
