// The operator's keys and users commands against a running gateway on the same Redis. The commands
// that change something (passwd, revoke, remove) run as an operator runs them, in a child process;
// the read-only ones and the usage errors run in this process (a child costs seconds on a busy
// machine) through the same entry point, runCli.
import t from 'tap'
import { UsageError } from '../../../../gateway/src/cli/keygate.js'
import { inProcess, keygateCli as keygate } from '../../../helpers/cli.js'
import { rsaKeyPair } from '../../../helpers/keys.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { send } from '../../../helpers/http.js'
import { addUser, login, registerKey, sendSigned, startStack } from '../../../helpers/stack.js'

t.test('users passwd, list, remove and keys list, show, revoke', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('cli-keys')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const env = { REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: prefix }
  const gw = await startStack(t, { store: 'redis', redisPrefix: prefix })
  await addUser(gw, 'alice', 'password-of-alice')
  await addUser(gw, 'bob', 'password-of-bob')
  let alice = await login(gw.url, 'alice', 'password-of-alice')
  const bob = await login(gw.url, 'bob', 'password-of-bob')
  const laptop = rsaKeyPair()
  const phone = rsaKeyPair()
  const bobs = rsaKeyPair()
  t.equal((await registerKey(gw.url, alice, laptop, 'laptop')).status, 201)
  t.equal((await registerKey(gw.url, alice, phone, 'phone')).status, 201)
  t.equal((await registerKey(gw.url, bob, bobs, 'bob key')).status, 201)

  t.test('users passwd: an existing user only; the running gateway takes the new password', async (t) => {
    const passwd = await keygate(['users', 'passwd', 'alice'], 'a new password\n', env)
    t.equal(passwd.code, 0, passwd.stderr)
    t.match(passwd.stdout, /^password of alice changed in .*; every gateway on it refuses the tokens issued before within a second\n$/)
    // the token got with the old password is refused (the CLI wrote to Redis directly: the gateway heard it by event)
    const since = Date.now()
    let refused = await send(gw.url, '/v1/api-keys', { headers: { authorization: `Bearer ${alice}` } })
    while (refused.status === 200 && Date.now() - since < 2000) refused = await send(gw.url, '/v1/api-keys', { headers: { authorization: `Bearer ${alice}` } })
    t.equal(refused.status, 401, `the token from before is refused ${Date.now() - since} ms after the command returned`)
    t.equal(refused.json<{ code: string }>().code, 'INVALID_TOKEN')
    alice = await login(gw.url, 'alice', 'a new password')
    await t.rejects(login(gw.url, 'alice', 'password-of-alice'), /401/)
    const nobody = await inProcess(['users', 'passwd', 'nobody'], env)
    t.match(nobody.error?.message, /^no user nobody in .*; create it with: users add nobody$/)
  })

  t.test('users list: a table, and JSON for scripts', async (t) => {
    const users = await inProcess(['users', 'list'], env)
    t.equal(users.error, undefined)
    t.match(
      users.stdout,
      /^USERNAME +CREATED +PASSWORD CHANGED +ACTIVE KEYS +KEYS +SCOPES\nalice +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +\S+ \S+ +2 +2 +-\nbob .* 1 +1 +-\n2 users\n$/
    )
    const json = JSON.parse((await inProcess(['users', 'list', '--json'], env)).stdout) as unknown
    t.match(json, [{ username: 'alice', activeKeys: 2, keys: 2 }, { username: 'bob', activeKeys: 1, keys: 1 }])
  })

  t.test('keys list and show', async (t) => {
    const { stdout, error } = await inProcess(['keys', 'list'], env)
    t.equal(error, undefined)
    const lines = stdout.trimEnd().split('\n')
    t.match(lines[0], /^APIKEY +OWNER +NAME +STATUS +CREATED +LAST USED +EXPIRES +SCOPES$/)
    t.same(lines.slice(1, 4).map((l) => l.split(/ {2,}/).slice(0, 4)), [
      [bobs.apiKey, 'bob', 'bob key', 'active'], [phone.apiKey, 'alice', 'phone', 'active'], [laptop.apiKey, 'alice', 'laptop', 'active']
    ], 'every key, newest first')
    t.equal(lines[4], '3 keys')
    const alices = JSON.parse((await inProcess(['keys', 'list', '--user', 'alice', '--json'], env)).stdout) as Array<Record<string, unknown>>
    t.same(
      alices.map((k) => [k.owner, k.apiKey, k.name, k.status, k.lastUsedAt]),
      [['alice', phone.apiKey, 'phone', 'active', null], ['alice', laptop.apiKey, 'laptop', 'active', null]]
    )
    t.match((await inProcess(['keys', 'list', '--user=bob'], env)).stdout, /\n1 key of bob\n$/)
    const show = await inProcess(['keys', 'show', laptop.apiKey], env)
    t.match(show.stdout, new RegExp(
      `^owner: +alice\napiKey: +${laptop.apiKey}\nname: +laptop\ncreatedAt: +\\S+\n` +
      'lastUsedAt: +-\nstatus: +active\nkeyType: +rsa\nscopes: +-\n-----BEGIN PUBLIC KEY-----\n'
    ))
    t.equal(JSON.parse((await inProcess(['keys', 'show', laptop.apiKey, '--json'], env)).stdout).publicKey, laptop.publicPem)
  })

  t.test('keys revoke: the running gateway refuses the key within a second', async (t) => {
    t.equal((await sendSigned(gw.url, { keys: laptop, token: alice, method: 'GET', target: '/v1/clients/' })).status, 200, 'cached at the gateway')
    const revoked = await keygate(['keys', 'revoke', laptop.apiKey], '', env)
    t.equal(revoked.code, 0, revoked.stderr)
    t.match(revoked.stdout, `key ${laptop.apiKey} (alice, "laptop") revoked; every gateway on `)
    // measured from the command's exit: the gateway may have heard it earlier, never later than 1 s
    const since = Date.now()
    let status = 200
    while (status === 200 && Date.now() - since < 1000) {
      status = (await sendSigned(gw.url, { keys: laptop, token: alice, method: 'GET', target: '/v1/clients/' })).status
    }
    t.equal(status, 401, `refused ${Date.now() - since} ms after the command returned`)
    t.match((await inProcess(['keys', 'revoke', laptop.apiKey], env)).stdout, / was already revoked at \d{4}-/)
    t.match((await inProcess(['keys', 'show', laptop.apiKey, '--json'], env)).stdout, /"status": "revoked"/)
  })

  t.test('users remove: their keys are revoked, they cannot log in', async (t) => {
    t.equal((await sendSigned(gw.url, { keys: bobs, token: bob, method: 'GET', target: '/v1/clients/' })).status, 200)
    const removed = await keygate(['users', 'remove', 'bob'], '', env)
    t.equal(removed.code, 0, removed.stderr)
    t.match(removed.stdout, /^user bob removed from .*; 1 key revoked \(every gateway refuses it within a second\)\nbearer tokens already issued to bob are refused everywhere/)
    const refused = await sendSigned(gw.url, { keys: bobs, token: bob, method: 'GET', target: '/v1/clients/' })
    t.equal(refused.json().code, 'INVALID_TOKEN', "bob's token is refused (and his key revoked, below)")
    await t.rejects(login(gw.url, 'bob', 'password-of-bob'), /401/)
    t.match((await inProcess(['users', 'list'], env)).stdout, /\n1 user\n$/)
    t.match((await inProcess(['keys', 'list', '--user', 'bob'], env)).stdout, /\n0 keys of bob\n$/, "bob's key index is gone")
    t.match((await inProcess(['keys', 'show', bobs.apiKey], env)).stdout, /status: +revoked/, 'his key record stays, revoked')
  })

  t.test('mistakes', async (t) => {
    const cases: Array<[string, string[], Record<string, string>, new (message: string) => Error, RegExp]> = [
      ['remove an unknown user', ['users', 'remove', 'nobody'], env, Error, /^no user nobody in /],
      ['show an unknown key', ['keys', 'show', 'f'.repeat(64)], env, Error, /^no key f{64} in /],
      ['revoke an unknown key', ['keys', 'revoke', 'f'.repeat(64)], env, Error, /^no key f{64} in /],
      ['keys without a command', ['keys'], env, UsageError, /^unknown command: keys\n\nusage:/],
      ['keys show without an apiKey', ['keys', 'show'], env, UsageError, /^keys show takes one argument\n\nusage:/],
      ['an unknown option', ['keys', 'list', '--all'], env, UsageError, /^unknown option --all\n\nusage:/],
      ['without REDIS_URL', ['users', 'remove', 'alice'], {}, UsageError, /^REDIS_URL is not set/]
    ]
    for (const [name, args, caseEnv, type, message] of cases) {
      const { error } = await inProcess(args, caseEnv)
      t.type(error, type, name)
      t.match(error?.message, message, name)
    }
    const exit = await keygate(['keys', 'show'], '', env)
    t.equal(exit.code, 2, 'a usage error exits 2')
    t.match(exit.stderr, /^keys show takes one argument\n\nusage:/)
  })
})
