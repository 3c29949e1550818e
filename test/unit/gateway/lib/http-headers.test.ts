// Header readings every part of the gateway shares (lib/http-headers.ts): Connection's list, and a
// media type's parts, which the MCP stages, the list filter, the event-stream check, the agents'
// directories and the metrics listener all read the same way.
import t from 'tap'
import { connectionListed, isPlainAuthority, mediaTypeOf, mediaTypeParts } from '../../../../gateway/src/lib/http-headers.js'

t.test('a media type: type/subtype and parameters, trimmed, in lower case; none for a field sent twice', async (t) => {
  t.same(mediaTypeParts(' Application/JSON ; Charset=UTF-8 '), ['application/json', 'charset=utf-8'])
  t.same(mediaTypeParts('text/event-stream'), ['text/event-stream'])
  t.same(mediaTypeParts(undefined), [])
  t.same(mediaTypeParts(['application/json', 'text/html']), [], 'two Content-Types: no one reading')
  t.equal(mediaTypeOf(' TEXT/Event-Stream;charset=utf-8'), 'text/event-stream')
  t.equal(mediaTypeOf('text/event-streamx'), 'text/event-streamx', 'the whole type, not a prefix')
  t.equal(mediaTypeOf(''), '')
  t.equal(mediaTypeOf(undefined), '')
  t.equal(mediaTypeOf(['text/event-stream', 'text/event-stream']), '')
})

t.test('Connection names its hop-by-hop headers', async (t) => {
  t.same(connectionListed('Keep-Alive, X-Secret'), ['keep-alive', 'x-secret'])
  t.same(connectionListed(undefined), [])
})

t.test('a plain authority: a name or a bracketed address, and a port; nothing that moves where a URL parser reads the host', async (t) => {
  for (const value of ['keygate.test', 'keygate.test:8443', '127.0.0.1:80', '[::1]:8080', 'under_score.example', 'a~b']) {
    t.ok(isPlainAuthority(value), value)
  }
  for (const value of ['keygate.test#', 'evil@keygate.test', 'keygate.test/other', 'keygate.test?x', '', 'keygate.test:', 'a b', '[::1', 'x:123456']) {
    t.notOk(isPlainAuthority(value), JSON.stringify(value))
  }
})
