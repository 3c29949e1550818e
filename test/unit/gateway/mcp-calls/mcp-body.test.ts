// One reading of an MCP body (mcp-calls/strict-json.ts, mcp/messages.ts): every body that two JSON
// readers could read two ways is refused, with the code a client sees; what passes is read as
// JSON.parse reads it. Duplicates at any depth and after escapes, case variants of protocol keys
// (Unicode folding included), batches by protocol version, big numbers, a BOM, bad UTF-8.
import fc from 'fast-check'
import t from 'tap'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { protocolVersion, readMcpBody } from '../../../../gateway/src/mcp-calls/messages.js'
import { parseStrictJson, StrictJsonError, MAX_JSON_DEPTH } from '../../../../gateway/src/mcp-calls/strict-json.js'

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8')
const call = (name: string, id: unknown = 1): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } })

function refusal (fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    if (err instanceof StrictJsonError) return 'StrictJsonError'
    throw err
  }
}

t.test('the strict reader refuses what has no single reading', async (t) => {
  const refused: Array<[string, string | Buffer]> = [
    ['duplicate key at the top', '{"a":1,"a":2}'],
    ['duplicate key deep inside', '{"a":{"b":[{"c":1,"c":1}]}}'],
    ['duplicate after an escape', '{"name":"x","na\\u006de":"y"}'],
    ['a byte order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes('{}')])],
    ['bytes that are not UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])],
    ['trailing garbage', '{} {}'],
    ['a trailing comma', '{"a":1,}'],
    ['single quotes', "{'a':1}"],
    ['a comment', '{"a":1 /* x */}'],
    ['NaN', '{"a":NaN}'],
    ['a leading zero', '{"a":01}'],
    ['a raw control character in a string', '{"a":"\u0001"}'],
    ['an unknown escape', '{"a":"\\x41"}'],
    ['a short \\u escape', '{"a":"\\u12"}'],
    ['a lone high surrogate', '{"name":"delete\\ud800"}'],
    ['a lone low surrogate', '{"name":"\\udc00delete"}'],
    ['a high surrogate then a character', '{"name":"\\ud800x"}'],
    ['a high surrogate then another high one', '{"name":"\\ud800\\ud800"}'],
    ['two low surrogates', '{"name":"\\udc00\\udc00"}'],
    ['a non-breaking space as whitespace', '{\u00a0"a":1}'],
    ['nothing', ''],
    ['too deep', '['.repeat(MAX_JSON_DEPTH + 2) + ']'.repeat(MAX_JSON_DEPTH + 2)]
  ]
  for (const [why, body] of refused) {
    t.equal(refusal(() => parseStrictJson(typeof body === 'string' ? bytes(body) : body)), 'StrictJsonError', why)
  }
  const proto = parseStrictJson(bytes('{"__proto__":{"x":1}}')) as Record<string, unknown>
  t.same(Object.keys(proto), ['__proto__'], '__proto__ is a key like any other')
  t.equal(({} as Record<string, unknown>).x, undefined, 'and pollutes nothing')
  t.same(parseStrictJson(bytes('{"name":"\\ud83d\\ude00 \\u00e9"}')), { name: '\u{1F600} \u00e9' }, 'a surrogate pair escaped is one character')
  t.equal(parseStrictJson(bytes('{"id":12345678901234567890}')) !== undefined, true, 'a big number is read (the message rules judge an id)')
})

t.test('what the strict reader takes, it reads as JSON.parse does (property)', async (t) => {
  fc.assert(fc.property(fc.jsonValue(), (value) => {
    const text = JSON.stringify(value)
    t.same(parseStrictJson(bytes(text)), JSON.parse(text))
  }), { numRuns: 500 })
  // and any text JSON.parse refuses, it refuses too
  fc.assert(fc.property(fc.string(), (text) => {
    let parsed = true
    try { JSON.parse(text) } catch { parsed = false }
    if (!parsed) t.throws(() => parseStrictJson(bytes(text)), StrictJsonError)
  }), { numRuns: 500 })
})

t.test('MCP messages: the codes a client sees', async (t) => {
  const cases: Array<[string, string, string | undefined, string?]> = [
    ['a tools/call', call('search'), undefined],
    ['invalid JSON', '{"jsonrpc":"2.0",', 'MCP_PARSE_ERROR'],
    ['duplicate name', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","name":"delete_repository"}}', 'MCP_PARSE_ERROR'],
    ['"name" and "Name"', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","Name":"delete_repository"}}', 'MCP_INVALID_MESSAGE'],
    ['"Method" beside "method"', '{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}', 'MCP_INVALID_MESSAGE'],
    ['"NAME" beside "name"', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","NAME":"b"}}', 'MCP_INVALID_MESSAGE'],
    ['the dotless \u0131 folds to i: "ur\u0131" beside "uri"',
      '{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","ur\u0131":"b"}}', 'MCP_INVALID_MESSAGE'],
    ['the long s folds to s: "param\u017f"',
      '{"jsonrpc":"2.0","id":1,"method":"ping","param\u017f":{}}', 'MCP_INVALID_MESSAGE'],
    ['a case variant inside arguments is user data',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"Name":1,"name":2}}}', undefined],
    ['no jsonrpc', '{"id":1,"method":"ping"}', 'MCP_INVALID_MESSAGE'],
    ['jsonrpc 1.0', '{"jsonrpc":"1.0","id":1,"method":"ping"}', 'MCP_INVALID_MESSAGE'],
    ['a null id on a request', '{"jsonrpc":"2.0","id":null,"method":"ping"}', 'MCP_INVALID_MESSAGE'],
    ['a fractional id', '{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 'MCP_INVALID_MESSAGE'],
    ['an id past 2^53', '{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}', 'MCP_INVALID_MESSAGE'],
    ['params as an array', '{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}', 'MCP_INVALID_MESSAGE'],
    ['tools/call without a name', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', 'MCP_INVALID_MESSAGE'],
    ['tools/call with a numeric name', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}', 'MCP_INVALID_MESSAGE'],
    ['resources/read without a uri', '{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"name":"x"}}', 'MCP_INVALID_MESSAGE'],
    ['an extra member', '{"jsonrpc":"2.0","id":1,"method":"ping","tool":"x"}', 'MCP_INVALID_MESSAGE'],
    ['a notification', '{"jsonrpc":"2.0","method":"notifications/initialized"}', undefined],
    ['a response to the server', '{"jsonrpc":"2.0","id":"s1","result":{}}', undefined],
    ['a response with both result and error', '{"jsonrpc":"2.0","id":"s1","result":{},"error":{}}', 'MCP_INVALID_MESSAGE'],
    ['a bare number', '7', 'MCP_INVALID_MESSAGE']
  ]
  for (const [why, body, code] of cases) t.equal(refusal(() => readMcpBody(bytes(body), '2025-06-18')), code, why)
})

t.test('the names a policy judges must be there: subscriptions and completions', async (t) => {
  const code = (body: object): string | undefined => {
    try {
      readMcpBody(bytes(JSON.stringify({ jsonrpc: '2.0', id: 1, ...body })), '2025-06-18')
      return undefined
    } catch (err) {
      return (err as { code?: string }).code
    }
  }
  t.equal(code({ method: 'resources/subscribe', params: {} }), 'MCP_INVALID_MESSAGE', 'subscribe without a uri')
  t.equal(code({ method: 'resources/unsubscribe', params: { uri: 'file:///public/../private/x' } }), 'MCP_INVALID_MESSAGE', 'a dot segment')
  t.equal(code({ method: 'completion/complete', params: { argument: { name: 'a', value: '' } } }), 'MCP_INVALID_MESSAGE', 'no ref')
  t.equal(code({ method: 'completion/complete', params: { ref: { type: 'ref/other', name: 'x' } } }), 'MCP_INVALID_MESSAGE', 'an unknown ref type')
  t.equal(code({ method: 'completion/complete', params: { ref: { type: 'ref/prompt', uri: 'x' } } }), 'MCP_INVALID_MESSAGE', 'a prompt ref without a name')
  t.equal(code({ method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'a', Name: 'b' } } }), 'MCP_INVALID_MESSAGE',
    'a case variant of a key in ref')
  t.equal(code({ method: 'completion/complete', params: { ref: { type: 'ref/resource', uri: 'file:///%70rivate/{x}' } } }), 'MCP_INVALID_MESSAGE',
    'a percent-encoded letter in a template')
  t.equal(code({ method: 'completion/complete', params: { ref: { type: 'ref/resource', uri: 'file:///public/{x}' }, argument: { name: 'x', value: 'a' } } }),
    undefined, 'a well-formed completion passes')
  t.equal(code({ method: 'resources/subscribe', params: { uri: 'file:///public/a' } }), undefined)
})

t.test('batches: refused from 2025-06-18, every element judged before it', async (t) => {
  const batch = `[${call('search')},${call('delete_repository', 2)}]`
  t.equal(refusal(() => readMcpBody(bytes(batch), '2025-06-18')), 'MCP_BATCH_NOT_ALLOWED', '2025-06-18: no batch')
  t.equal(refusal(() => readMcpBody(bytes(batch), '2025-11-25')), 'MCP_BATCH_NOT_ALLOWED', 'a later version neither')
  const messages = readMcpBody(bytes(batch), '2025-03-26')
  t.same(messages.map((m) => m.params?.name), ['search', 'delete_repository'], '2025-03-26: each element read, the hidden call too')
  const hidden = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","Name":"b"}}'
  t.equal(refusal(() => readMcpBody(bytes(`[${call('search')},${hidden}]`), '2025-03-26')),
    'MCP_INVALID_MESSAGE', 'one bad element refuses the batch')
  t.equal(refusal(() => readMcpBody(bytes('[]'), '2025-03-26')), 'MCP_INVALID_MESSAGE', 'an empty batch')
  t.equal(protocolVersion(undefined), '2025-03-26', 'no MCP-Protocol-Version: 2025-03-26, as the spec says')
  t.equal(refusal(() => protocolVersion('2025-06-18, 2025-03-26')), 'MCP_INVALID_MESSAGE', 'two versions are none')
  t.equal(refusal(() => protocolVersion('latest')), 'MCP_INVALID_MESSAGE', 'nor a word')
})

t.test('a refused message gives its id when it has a readable one', async (t) => {
  const sink: { id?: string | number } = {}
  t.throws(() => readMcpBody(bytes('{"jsonrpc":"2.0","id":"r7","method":"tools/call","params":{"name":"a","Name":"b"}}'), '2025-06-18', sink))
  t.equal(sink.id, 'r7')
})
