// A usage field's dimensions: a signed agent's origin is a sixth part, only when there is one, so
// a request without an agent keeps the five-part field counted before agents were (one series);
// an MCP route's request adds its JSON-RPC method and tool as the seventh and eighth.
import t from 'tap'
import { decodeField, encodeField, NONE } from '../../../../gateway/src/analytics/buckets.js'

t.test('a field with an agent, and one without: both read back; older five-part fields read as no agent', async (t) => {
  const withAgent = encodeField(NONE, NONE, 'catalogue', '2xx', NONE, 'https://agent.example')
  t.same(decodeField(withAgent), {
    key: NONE, user: NONE, route: 'catalogue', status: '2xx', code: NONE, agent: 'https://agent.example', method: NONE, tool: NONE
  })
  const without = encodeField('k', 'alice', 'clients', '4xx', 'INVALID_SIGNATURE')
  t.equal(without, encodeField('k', 'alice', 'clients', '4xx', 'INVALID_SIGNATURE', NONE), 'no agent: the same field as before agents')
  t.equal(without.split('\u001f').length, 5)
  t.same(decodeField(without), { key: 'k', user: 'alice', route: 'clients', status: '4xx', code: 'INVALID_SIGNATURE', agent: NONE, method: NONE, tool: NONE })
  t.equal(decodeField('a\u001fb'), undefined, 'not a field')
  t.equal(decodeField(`${withAgent}\u001fmore`), undefined, 'seven parts: not a field')
})

t.test('an MCP request: its method and tool after the agent (none written as such); a tool label cannot break the field', async (t) => {
  const call = encodeField('k', 'alice', 'mcp', '2xx', NONE, NONE, 'tools/call', 'search_*')
  t.equal(call.split('\u001f').length, 8)
  t.same(decodeField(call), { key: 'k', user: 'alice', route: 'mcp', status: '2xx', code: NONE, agent: NONE, method: 'tools/call', tool: 'search_*' })
  t.same(decodeField(encodeField('k', 'alice', 'mcp', '2xx', NONE, NONE, 'tools/list')), {
    key: 'k', user: 'alice', route: 'mcp', status: '2xx', code: NONE, agent: NONE, method: 'tools/list', tool: NONE
  }, 'a method without a tool')
  t.equal(decodeField(encodeField('k', 'alice', 'mcp', '2xx', NONE, NONE, 'tools/call', 'a\u001fb'))?.tool, 'a b', 'the separator taken out of a tool label')
})
