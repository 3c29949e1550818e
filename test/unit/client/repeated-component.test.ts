// RFC 9421 §2: a covered component's identifier, with its parameters, appears once. The protocol
// core finds a repeat, and refuses to serialise Signature-Input with one, so neither the client
// nor anything else built on it can sign such a list.
import t from 'tap'
import { repeatedComponent, serializeSignatureParams, type ComponentId } from '../../../client/src/protocol/index.js'

t.test('a repeat is found by the serialised identifier, parameters included', async (t) => {
  const cases: Array<[ComponentId[], string | undefined]> = [
    [[{ name: '@method' }, { name: '@path' }, { name: '@query' }], undefined],
    [[{ name: '@method' }, { name: '@path' }, { name: '@path' }], '"@path"'],
    [[{ name: 'content-type' }, { name: 'content-digest' }, { name: 'content-type' }], '"content-type"'],
    // another parameter makes another component (RFC 9421 §2.1): not a repeat
    [[{ name: 'content-type' }, { name: 'content-type', params: [['sf', true]] }], undefined],
    [[{ name: 'example-dict', params: [['key', 'a']] }, { name: 'example-dict', params: [['key', 'b']] }], undefined],
    [[{ name: 'example-dict', params: [['key', 'a']] }, { name: 'example-dict', params: [['key', 'a']] }], '"example-dict";key="a"'],
    [[{ name: '@query-param', params: [['name', 'x']] }, { name: '@method' }, { name: '@query-param', params: [['name', 'x']] }], '"@query-param";name="x"']
  ]
  for (const [components, repeated] of cases) {
    const list = components.map((c) => JSON.stringify(c)).join(' ')
    t.equal(repeatedComponent(components), repeated, list)
    if (repeated === undefined) t.doesNotThrow(() => serializeSignatureParams(components, [['keyid', 'k']]), `${list}: serialised`)
    else t.throws(() => serializeSignatureParams(components, [['keyid', 'k']]), TypeError, `${list}: refused, never signed`)
  }
})
