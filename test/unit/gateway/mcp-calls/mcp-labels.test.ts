// What metrics, usage and traces call an MCP message (mcp-calls/labels.ts): bounded whatever a
// client sends (fast-check: any name is a listed name, a listed glob or `other`), and which limits
// a request's tool calls take (mcp-calls/tool-limits.ts): the most specific entry's, cached per
// entry, a batch's calls each counted, one counter once with their sum.
import fc from 'fast-check'
import t from 'tap'
import { BATCH_LABEL, MCP_METHODS, messageLabels, OTHER_LABEL, requestLabels, RESPONSE_LABEL, toolLabel } from '../../../../gateway/src/mcp-calls/labels.js'
import type { McpMessage } from '../../../../gateway/src/mcp-calls/messages.js'
import { compilePolicy } from '../../../../gateway/src/mcp-calls/policy.js'
import { toolLimited } from '../../../../gateway/src/mcp-calls/tool-limits.js'
import { rateLimit } from '../../../../gateway/src/limits/rate-limit.js'

const policy = compilePolicy({
  tools: { search_docs: ['read'], 'search_*': ['read'], shutdown: 'deny' },
  toolRateLimits: {
    'search_*': [{ by: 'user', limit: 10, window: '1m' }],
    delete_repository: [{ by: 'user', limit: 5, window: '1d' }, { by: 'user', limit: 100, window: '30d', bucket: 'monthly' }],
    'export_*': [{ by: 'user', limit: 100, window: '30d', bucket: 'monthly' }]
  }
}, 'r:test')
const call = (name: string): McpMessage => ({ kind: 'request', id: 1, method: 'tools/call', params: { name } })

t.test('tool labels: listed names, their globs, and other for anything else', async (t) => {
  t.equal(toolLabel(policy, 'search_docs'), 'search_docs', 'an exact name of tools')
  t.equal(toolLabel(policy, 'delete_repository'), 'delete_repository', 'an exact name of toolRateLimits')
  t.equal(toolLabel(policy, 'search_web'), 'search_*', 'a name a glob takes: the glob')
  t.equal(toolLabel(policy, 'rm -rf /'), OTHER_LABEL)
  const allowed = new Set(['search_docs', 'shutdown', 'delete_repository', 'search_*', 'export_*', OTHER_LABEL])
  fc.assert(fc.property(fc.string({ maxLength: 300 }), (name) => allowed.has(toolLabel(policy, name))))
})

t.test('method labels: the MCP specification\'s, other, response; a request: its message\'s, batch, none', async (t) => {
  t.same(messageLabels(policy, call('search_web')), { method: 'tools/call', tool: 'search_*' })
  t.same(messageLabels(policy, { kind: 'request', id: 1, method: 'tools/list' }), { method: 'tools/list' })
  t.same(messageLabels(policy, { kind: 'notification', method: 'notifications/initialized' }), { method: 'notifications/initialized' })
  t.same(messageLabels(policy, { kind: 'request', id: 1, method: 'x-vendor/secret' }), { method: OTHER_LABEL })
  t.same(messageLabels(policy, { kind: 'response', id: 1 }), { method: RESPONSE_LABEL })
  fc.assert(fc.property(fc.string({ maxLength: 100 }), (method) => {
    const label = messageLabels(policy, { kind: 'request', id: 1, method }).method
    return label === OTHER_LABEL || (MCP_METHODS.includes(label) && label === method)
  }))
  t.same(requestLabels(policy, [call('x'), call('y')]), { method: BATCH_LABEL })
  t.equal(requestLabels(policy, []), undefined, 'a GET or DELETE')
  t.equal(requestLabels(policy, undefined), undefined, 'a body refused before it was read')
})

t.test('tool limits: the entry\'s, after the route\'s; a batch counts each call', async (t) => {
  const route = { name: 'mcp', rateLimits: [rateLimit({ by: 'user', limit: 1000, window: '1h' }, 'r:test')], onStoreDown: 'allow' as const, mcp: policy }
  t.equal(toolLimited(route, [call('unlimited')]), undefined, 'a tool without limits: the route\'s alone')
  t.equal(toolLimited(route, [{ kind: 'request', id: 1, method: 'tools/list' }]), undefined, 'another method')
  const one = toolLimited(route, [call('search_web')])
  t.same(one?.route.rateLimits.map((limit) => limit.policy), ['user-1h', 'tool-user-1m'])
  t.equal(one?.costs, undefined, 'one call: one request')
  t.equal(toolLimited(route, [call('search_docs')])?.route, one?.route, 'the same entry: the same object (the limiter caches its RateLimit-Policy)')
  const batch = toolLimited(route, [call('search_a'), call('search_b'), call('delete_repository'), call('export_x'), call('unlimited')])
  const costs = Object.fromEntries([...batch?.costs ?? []].map(([limit, n]) => [limit.policy, n]))
  t.same(costs, { 'tool-user-1m': 2, 'tool-user-1d': 1, 'monthly-user-30d': 2 }, 'each counter once, with the calls that count in it (the bucket: two tools)')
  t.same(batch?.route.rateLimits.map((limit) => limit.policy), ['user-1h', 'tool-user-1m', 'tool-user-1d', 'monthly-user-30d'])
  const entry = policy.toolLimits?.globs.find((rule) => rule.pattern === 'search_*')?.requirement[0]
  const other = compilePolicy({ toolRateLimits: { 'search_*': [{ by: 'user', limit: 10, window: '1m' }] } }, 'r:other').toolLimits?.globs[0]?.requirement[0]
  t.not(entry?.counter, other?.counter, 'another route\'s entry of the same glob: another counter')
})
