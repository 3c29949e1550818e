// A usage field's dimensions: a signed agent's origin is a sixth part, only when there is one, so
// a request without an agent keeps the five-part field counted before agents were (one series).
import t from 'tap'
import { decodeField, encodeField, NONE } from '../../../../gateway/src/analytics/buckets.js'

t.test('a field with an agent, and one without: both read back; older five-part fields read as no agent', async (t) => {
  const withAgent = encodeField(NONE, NONE, 'catalogue', '2xx', NONE, 'https://agent.example')
  t.same(decodeField(withAgent), { key: NONE, user: NONE, route: 'catalogue', status: '2xx', code: NONE, agent: 'https://agent.example' })
  const without = encodeField('k', 'alice', 'clients', '4xx', 'INVALID_SIGNATURE')
  t.equal(without, encodeField('k', 'alice', 'clients', '4xx', 'INVALID_SIGNATURE', NONE), 'no agent: the same field as before agents')
  t.equal(without.split('\u001f').length, 5)
  t.same(decodeField(without), { key: 'k', user: 'alice', route: 'clients', status: '4xx', code: 'INVALID_SIGNATURE', agent: NONE })
  t.equal(decodeField('a\u001fb'), undefined, 'not a field')
  t.equal(decodeField(`${withAgent}\u001fmore`), undefined, 'seven parts: not a field')
})
