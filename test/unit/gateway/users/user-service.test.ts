import t from 'tap'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { createUserService, validateNewUser } from '../../../../gateway/src/users/user-service.js'
import { captureGatewayError, countingStore } from '../../../helpers/auth-fixtures.js'

// scrypt calls in this file: 1 upsert + 1 right + 1 wrong + 2 unknown user (dummy hash + verify)
// + 1 invalid username.
const { store, calls } = countingStore(createMemoryStore())
const users = createUserService(store)
const alice = await users.upsert('alice', 'alice-password-1')

t.test('upsert stores a scrypt hash, not the password', async (t) => {
  t.equal(alice.username, 'alice')
  t.match(alice.passwordHash, /^\$scrypt\$ln=17,r=8,p=1\$/)
  t.notOk(alice.passwordHash.includes('alice-password-1'))
  t.same(await store.getUser('alice'), alice)
})

t.test('scryptLogN (KEYGATE_PASSWORD_SCRYPT_LOG_N): the cost of the hashes it writes; hashes of any cost verify', async (t) => {
  const other = createMemoryStore()
  await other.putUser('alice', alice.passwordHash)
  const cheap = createUserService(other, { scryptLogN: 14 })
  const bob = await cheap.upsert('bob', 'bob-password-1')
  t.match(bob.passwordHash, /^\$scrypt\$ln=14,r=8,p=1\$/)
  t.equal((await cheap.authenticate('bob', 'bob-password-1')).username, 'bob')
  t.equal((await createUserService(other).authenticate('bob', 'bob-password-1')).username, 'bob', 'a gateway at another cost verifies it too')
  t.equal((await cheap.authenticate('alice', 'alice-password-1')).username, 'alice', 'and it verifies hashes of the default cost')
  t.equal((await captureGatewayError(async () => await cheap.authenticate('nobody', 'bob-password-1'))).code, 'INVALID_CREDENTIALS')
})

t.test('authenticate: the right password gives the username', async (t) => {
  t.equal((await users.authenticate('alice', 'alice-password-1')).username, 'alice')
})

t.test('authenticate: wrong password and unknown user are the same INVALID_CREDENTIALS', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['wrong password', 'alice', 'alice-password-2'],
    ['unknown user', 'nobody', 'alice-password-1'],
    ['not a valid username', 'alice smith', 'alice-password-1']
  ]
  for (const [label, username, password] of cases) {
    t.test(label, async (t) => {
      const err = await captureGatewayError(() => users.authenticate(username, password))
      t.equal(err.code, 'INVALID_CREDENTIALS')
      t.equal(err.statusCode, 401)
    })
  }
  t.equal(calls.putUser, 1, 'authentication never writes')
})

t.test('validateNewUser: VALIDATION_FAILED for bad usernames and passwords', async (t) => {
  const ok: Array<[string, string]> = [
    ['alice', '12345678'],
    ['a', 'x'.repeat(1024)],
    ['alice.smith_2@example-corp', 'pässwörd!'],
    ['A'.repeat(64), '12345678']
  ]
  for (const [username, password] of ok) t.doesNotThrow(() => { validateNewUser(username, password) }, `${username} / ${password.length} chars`)
  const bad: Array<[string, string, string]> = [
    ['empty username', '', '12345678'],
    ['username with a space', 'alice smith', '12345678'],
    ['username starting with a dot', '.alice', '12345678'],
    ['username with a colon', 'alice:x', '12345678'],
    ['65-character username', 'a'.repeat(65), '12345678'],
    ['7-character password', 'alice', '1234567'],
    ['empty password', 'alice', ''],
    ['1025-character password', 'alice', 'x'.repeat(1025)]
  ]
  for (const [label, username, password] of bad) {
    let caught: unknown
    try { validateNewUser(username, password) } catch (err) { caught = err }
    t.ok(caught instanceof GatewayError && caught.code === 'VALIDATION_FAILED' && caught.statusCode === 400, label)
  }
  const before = calls.putUser
  t.equal((await captureGatewayError(() => users.upsert('bad name', '12345678'))).code, 'VALIDATION_FAILED')
  t.equal(calls.putUser, before, 'upsert validates before storing')
})

t.test('scopes: upsert with scopes, setScopes, a password change keeps them', async (t) => {
  const carol = await users.upsert('carol', 'carol-password-1', ['reports:read', 'clients:read', 'reports:read'])
  t.same(carol.scopes, ['clients:read', 'reports:read'], 'checked, each once, sorted')
  t.same((await users.upsert('carol', 'carol-password-2')).scopes, ['clients:read', 'reports:read'], 'a password change keeps them')
  t.same((await users.setScopes('carol', ['billing/invoices.write']))?.scopes, ['billing/invoices.write'])
  t.same((await store.getUser('carol'))?.scopes, ['billing/invoices.write'])
  t.equal(await users.setScopes('nobody', ['a']), null, 'no such user: null')
  t.equal(await users.setScopes('not a name', ['a']), null, 'not even a username: null')
  const puts = calls.putUser
  const bad = await captureGatewayError(() => users.upsert('dave', 'dave-password-1', ['ok', 'not ok']))
  t.equal(bad.code, 'VALIDATION_FAILED')
  t.match(bad.message, /"not ok" is not a scope/)
  t.equal(calls.putUser, puts, 'nothing stored')
  t.equal((await captureGatewayError(() => users.setScopes('carol', ['x'.repeat(65)]))).code, 'VALIDATION_FAILED')
  t.same((await store.getUser('carol'))?.scopes, ['billing/invoices.write'], 'a refused change changes nothing')
})
