// Lists show what may be called, the pieces alone (mcp/list-filter.ts, mcp/sse-filter.ts,
// mcp-calls/policy.ts): the template rule never shows a template one of whose URIs the caller may
// not read (a property over random policies), an event stream reads the same however it is cut
// into chunks, and the JSON rewriting keeps what is not a list's entry.
import { Readable } from 'node:stream'
import fc from 'fast-check'
import t from 'tap'
import { compilePolicy, mayUse, mayUseAllUnder } from '../../../../gateway/src/mcp-calls/policy.js'
import { ListFilter, listRequests } from '../../../../gateway/src/mcp/list-filter.js'
import { SseEventFilter } from '../../../../gateway/src/mcp/sse-filter.js'

t.test('a template is shown only when every URI under its literal prefix may be read', async (t) => {
  const name = fc.string({ unit: fc.constantFrom('a', 'b', '/'), maxLength: 4 })
  const requirement = fc.constantFrom<string[] | 'deny'>([], ['s'], ['t'], 'deny')
  const granted = new Set(['s'])
  fc.assert(fc.property(
    fc.dictionary(fc.oneof(name, name.map((n: string) => `${n}*`), fc.tuple(name, name).map(([a, b]) => `${a}*${b}`)), requirement),
    requirement, name, fc.array(name, { maxLength: 8 }),
    (resources, fallback, prefix, suffixes) => {
      const policy = compilePolicy({ resources, default: fallback })
      if (!mayUseAllUnder(policy, 'resources', prefix, granted)) return
      for (const suffix of ['', ...suffixes]) {
        if (!mayUse(policy, 'resources', prefix + suffix, granted)) throw new Error(`shown, yet ${prefix}${suffix} may not be read`)
      }
    }
  ), { numRuns: 300 })
  const policy = compilePolicy({ resources: { 'file:///public/*': [], 'file:///private/keys': 'deny' }, default: 'deny' })
  t.ok(mayUseAllUnder(policy, 'resources', 'file:///public/', granted), 'covered by an allowing glob: the default decides nothing')
  t.notOk(mayUseAllUnder(policy, 'resources', 'file:///private/', granted), 'a denied URI under it')
  t.notOk(mayUseAllUnder(policy, 'resources', 'file:///', granted), 'the default (deny) decides some of it')
})

const policy = compilePolicy({ tools: { whoami: [], 'write-*': ['w'] }, default: 'deny' })
const filter = (messages: Array<{ id: number | string, method: string }>): ListFilter =>
  new ListFilter(policy, new Set(), listRequests(messages.map((m) => ({ kind: 'request' as const, ...m }))))

t.test('JSON: a list response rewritten, everything else kept', async (t) => {
  const lists = filter([{ id: 1, method: 'tools/list' }])
  const text = (value: unknown): unknown => {
    const out = lists.text(Buffer.from(JSON.stringify(value)))
    return JSON.parse(typeof out === 'string' ? out : Buffer.from(out).toString())
  }
  t.same(text({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'whoami' }, { name: 'write-note' }, { name: 'x' }], nextCursor: 'n' } }),
    { jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'whoami' }], nextCursor: 'n' } })
  const two = [{ name: 'whoami' }, { name: 'write-note' }]
  t.same(text({ jsonrpc: '2.0', id: '1', result: { tools: two } }), { jsonrpc: '2.0', id: '1', result: { tools: [{ name: 'whoami' }] } },
    'the id "1" answers the request 1 to a client that reads ids as the MCP SDK does (Number)')
  t.same(text({ jsonrpc: '2.0', id: 1, method: 'x', result: { tools: two } }), { jsonrpc: '2.0', id: 1, method: 'x', result: { tools: [{ name: 'whoami' }] } },
    'a response is what has a result, whatever else it has')
  const untouched = Buffer.from('{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"x"}]}}')
  t.equal(lists.text(untouched), untouched, 'another id: the same bytes')
  t.same(text({ jsonrpc: '2.0', id: 1, error: { code: -1, message: 'no' } }), { jsonrpc: '2.0', id: 1, error: { code: -1, message: 'no' } })
  for (const bad of ['{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"error":{}}', '{"jsonrpc":"2.0","ID":1,"result":{"tools":[{"name":"x"}]}}',
    '{"jsonrpc":"2.0","id":1,"error":{},"Result":{"tools":[{"name":"x"}]}}', '{"jsonrpc":"2.0","id":1,"result":{"tools":{}}}', '[1', '"x"']) {
    t.throws(() => lists.text(Buffer.from(bad)), { code: 'MCP_LIST_UNFILTERABLE' }, bad)
  }
})

async function through (chunks: string[]): Promise<string> {
  const out: Buffer[] = []
  const stream = Readable.from(chunks.map((chunk) => Buffer.from(chunk))).pipe(new SseEventFilter(filter([{ id: 1, method: 'tools/list' }])))
  for await (const chunk of stream) out.push(chunk as Buffer)
  return Buffer.concat(out).toString()
}

t.test('SSE: the same reading however the stream is cut; other events byte for byte', async (t) => {
  const stream = ': keep-alive\n\nevent: message\r\nid: 4\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":"é"}}\r\n\r\n' +
    'data: {"jsonrpc":"2.0","id":1,\ndata: "result":{"tools":[{"name":"write-note"},{"name":"whoami"}]}}\r\rdata: after\n\n'
  const expected = ': keep-alive\n\nevent: message\r\nid: 4\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":"é"}}\r\n\r\n' +
    'data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"whoami"}]}}\n\n'
  const whole = await through([stream])
  t.equal(whole.slice(0, expected.length), expected)
  const bytes = Buffer.from(stream)
  await fc.assert(fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 6 }), async (cuts) => {
    const points = [0, ...new Set(cuts)].sort((a, b) => a - b)
    const pieces = points.map((at, i) => bytes.subarray(at, points[i + 1] ?? bytes.length))
    const out: Buffer[] = []
    const filtered = Readable.from(pieces).pipe(new SseEventFilter(filter([{ id: 1, method: 'tools/list' }])))
    for await (const chunk of filtered) out.push(chunk as Buffer)
    if (Buffer.concat(out).toString() !== whole) throw new Error(`cut at ${points.join(',')}: another reading`)
  }), { numRuns: 50 })
  t.equal(whole, expected, '"after" is no JSON: the stream ends there (the list was answered: no error for it)')
})

t.test('SSE: a chunk of many lines is read in linear time (an upstream cannot stall the event loop with blank events)', async (t) => {
  // 2 MiB of empty events (":" comments) in one chunk: each line used to search the rest of the
  // chunk for a CR and an LF, about 14 s here; read in one pass, well under a second
  const flood = ':\n\n'.repeat(Math.floor(2 * 1024 * 1024 / 3))
  const filtered = new SseEventFilter(filter([{ id: 1, method: 'tools/list' }]))
  let length = 0
  filtered.on('data', (chunk: Buffer) => { length += chunk.length })
  const start = performance.now()
  filtered.write(Buffer.from(flood))
  const ms = performance.now() - start
  t.equal(length, flood.length, 'every comment passed as it came')
  t.ok(ms < 2000, `read in ${Math.round(ms)} ms`)
})
