import t from 'tap'
import { apiKeyStage } from '../../../../gateway/src/auth/api-key.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { createKeyRegistry } from '../../../../gateway/src/keys/key-registry.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { captureGatewayError, countingStore, describedRequest, rsaPair, signBase64 } from '../../../helpers/auth-fixtures.js'

const pair = rsaPair()
const { store, calls } = countingStore(createMemoryStore())
const keys = createKeyRegistry(store, { cacheSize: 100 })
const stage = apiKeyStage(keys)
const record = await keys.register({ owner: 'alice', name: 'laptop', publicKey: pair.spkiPem, signature: signBase64(pair.privateKey, 'laptop') })

function stateFor (apiKey: string): AuthState {
  return { user: 'alice', signatureHeaders: { apiKey, timestamp: '1700000000000', signature: 'AAAA' } }
}

t.test('a registered key becomes state.key', async (t) => {
  const state = stateFor(record.apiKey)
  await stage.run(describedRequest(), state)
  t.equal(state.key?.apiKey, record.apiKey)
  t.equal(state.key?.owner, 'alice')
  t.equal(state.key?.name, 'laptop')
  t.equal(state.key?.keyObject.asymmetricKeyType, 'rsa')
  t.ok(state.key?.keyObject.equals(pair.publicKey), 'the registered public key')
})

t.test('keys that are not registered are UNKNOWN_API_KEY', async (t) => {
  const last = record.apiKey.at(-1) === '0' ? '1' : '0'
  const cases: Array<[string, string, boolean]> = [
    // [label, X-API-Key, whether it is well-formed (and so worth a store look-up)]
    ['well-formed but unknown', 'f'.repeat(64), true],
    ['registered key with its last digit changed', record.apiKey.slice(0, -1) + last, true],
    ['registered key in uppercase hex', record.apiKey.toUpperCase(), false],
    ['registered key one character short', record.apiKey.slice(0, -1), false],
    ['registered key one character long', record.apiKey + '0', false],
    ['registered key with surrounding spaces', ` ${record.apiKey} `, false],
    ['non-hex characters', 'g'.repeat(64), false],
    ['base64 of the hash', Buffer.from(record.apiKey, 'hex').toString('base64'), false],
    ['the key name', 'laptop', false],
    ['empty', '', false]
  ]
  for (const [label, apiKey, wellFormed] of cases) {
    t.test(label, async (t) => {
      const before = calls.getKey ?? 0
      const state = stateFor(apiKey)
      const err = await captureGatewayError(() => stage.run(describedRequest(), state))
      t.equal(err.code, 'UNKNOWN_API_KEY')
      t.equal(err.statusCode, 401)
      t.equal(state.key, undefined)
      t.equal((calls.getKey ?? 0) - before, wellFormed ? 1 : 0, wellFormed ? 'asks the store' : 'no store round trip for junk')
    })
  }
})
