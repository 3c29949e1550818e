import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { keyOwnerStage } from '../../../../gateway/src/auth/key-owner.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { GatewayError } from '../../../../gateway/src/errors.js'
import type { RegisteredKey } from '../../../../gateway/src/keys/key-registry.js'
import { captureGatewayError, describedRequest } from '../../../helpers/auth-fixtures.js'

const stage = keyOwnerStage()
const keyObject = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey
const keyOf = (owner: string): RegisteredKey => ({ apiKey: 'a'.repeat(64), owner, name: 'k', keyObject })

t.test('the key of the token\'s user passes', async (t) => {
  const state: AuthState = { user: 'alice', key: keyOf('alice') }
  await stage.run(describedRequest(), state)
  t.equal(state.key?.owner, 'alice')
  t.equal(state.user, 'alice')
})

t.test('a key of another user is KEY_OWNER_MISMATCH (403)', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['A\'s key with B\'s token', 'alice', 'bob'],
    ['B\'s key with A\'s token', 'bob', 'alice'],
    ['usernames differing in case only', 'alice', 'Alice'],
    ['prefix of the owner', 'alice', 'alic'],
    ['owner with a trailing space', 'alice ', 'alice']
  ]
  for (const [label, owner, user] of cases) {
    t.test(label, async (t) => {
      const err = await captureGatewayError(() => stage.run(describedRequest(), { user, key: keyOf(owner) }))
      t.equal(err.code, 'KEY_OWNER_MISMATCH')
      t.equal(err.statusCode, 403)
    })
  }
})

t.test('run out of order (no user or no key) it fails loudly, not as a client error', async (t) => {
  for (const state of [{ key: keyOf('alice') }, { user: 'alice' }] as AuthState[]) {
    let caught: unknown
    try { await stage.run(describedRequest(), state) } catch (err) { caught = err }
    t.ok(caught instanceof Error, 'throws')
    t.notOk(caught instanceof GatewayError, 'a programming error, not a GatewayError')
  }
})
