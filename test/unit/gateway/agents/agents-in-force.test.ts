// The agents file in force, swapped by a reload: what changed by origin, `named` and the private
// origins read from the file in force, and the origins whose entry changed handed on (for the
// directories fetched under the old entry to be dropped).
import { generateKeyPairSync } from 'node:crypto'
import { exportJWK } from 'jose'
import t from 'tap'
import { agentsFromDocument } from '../../../../gateway/src/agents/agents-file.js'
import { createAgentsInForce } from '../../../../gateway/src/agents/agents-in-force.js'

const KEY = await exportJWK(generateKeyPairSync('ed25519').publicKey)
const OTHER_KEY = await exportJWK(generateKeyPairSync('ed25519').publicKey)

t.test('a swap: added, removed, changed by origin; named and privateOrigins follow', async (t) => {
  const before = await agentsFromDocument({
    directories: [
      { origin: 'https://pinned.example', keys: [KEY] },
      { origin: 'https://inside.example', privateAddress: true },
      { origin: 'https://gone.example', keys: [KEY] }
    ]
  }, 'agents.yaml')
  const touched: string[][] = []
  const inForce = createAgentsInForce('/etc/keygate/agents.yaml', before, (settings, origins) => { touched.push([...origins].sort()) })
  const privateOrigins = inForce.privateOrigins
  t.same([...privateOrigins], ['https://inside.example'])
  t.ok(inForce.named('https://gone.example'))

  const after = await agentsFromDocument({
    directories: [
      { origin: 'https://pinned.example', keys: [OTHER_KEY] },
      { origin: 'https://inside.example', privateAddress: true },
      { origin: 'https://new.example', privateAddress: true }
    ]
  }, 'agents.yaml')
  t.same(inForce.swap(after), { added: ['https://new.example'], removed: ['https://gone.example'], changed: ['https://pinned.example'] })
  t.same(touched, [['https://gone.example', 'https://new.example', 'https://pinned.example']], 'the origins whose entry changed')
  t.same([...privateOrigins].sort(), ['https://inside.example', 'https://new.example'], 'the view taken at start reads the file in force')
  t.notOk(inForce.named('https://gone.example'), 'a removed origin is no longer named')
  t.ok(inForce.named('https://new.example'))
  t.equal(inForce.settings, after)
  t.same(inForce.swap(after), { added: [], removed: [], changed: [] }, 'the same file again: nothing changed')
  t.equal(inForce.file, '/etc/keygate/agents.yaml')
})

t.test('no agents file: nothing named', async (t) => {
  const inForce = createAgentsInForce(undefined)
  t.equal(inForce.file, undefined)
  t.same([...inForce.privateOrigins], [])
  t.notOk(inForce.named('https://any.example'))
})
