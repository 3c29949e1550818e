// The operator's scope commands against a running gateway on the same Redis: `users add --scopes`
// and `users scopes` run as an operator runs them, in a child process; what they change reaches the
// running gateway within a second. The listings show scopes in their tables and their JSON.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { UsageError } from '../../../../gateway/src/cli/keygate.js'
import { inProcess, keygateCli as keygate } from '../../../helpers/cli.js'
import { rsaKeyPair, signBase64 } from '../../../helpers/keys.js'
import { send } from '../../../helpers/http.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { login, sendSigned, startStack } from '../../../helpers/stack.js'
import { route } from '../../../../gateway/src/proxy/route.js'

t.test('users add --scopes, users scopes, and scopes in the listings', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('cli-scopes')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const env = { REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: prefix }
  const defaults = { bodyLimit: 1024 * 1024, timeoutMs: 5000 }
  const gw = await startStack(t, {
    store: 'redis',
    redisPrefix: prefix,
    routes: (upstream) => [
      route({ prefix: '/v1/clients/', upstream, auth: 'signed', methods: ['GET'], scopes: ['clients:read'] }, defaults),
      route({ prefix: '/v1/clients/', upstream, auth: 'signed', methods: ['POST'], scopes: ['clients:write'] }, defaults)
    ]
  })

  const added = await keygate(['users', 'add', 'carol', '--scopes', 'clients:write,clients:read'], 'password-of-carol\n', env)
  t.equal(added.code, 0, added.stderr)
  t.match(added.stdout, /^user carol created in .*, scopes: clients:read clients:write\n$/)
  const carol = await login(gw.url, 'carol', 'password-of-carol')
  const laptop = rsaKeyPair()
  const registered = await send(gw.url, '/v1/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${carol}` },
    body: JSON.stringify({ name: 'laptop', publicKey: laptop.publicPem, signature: signBase64(laptop.privateKey, 'laptop') })
  })
  t.same(registered.json().scopes, ['clients:read', 'clients:write'])
  const client = '{"name":"a","email":"a@b.c","tax_id":"12345"}'
  const write = async (): Promise<number> =>
    (await sendSigned(gw.url, { keys: laptop, token: carol, method: 'POST', target: '/v1/clients/', body: client })).status
  t.equal(await write(), 201, 'cached at the gateway: carol\'s key may write')

  t.test('users scopes NAME SCOPE...: replaces them; the running gateway applies it within a second', async (t) => {
    const set = await keygate(['users', 'scopes', 'carol', 'clients:read'], '', env)
    t.equal(set.code, 0, set.stderr)
    t.match(set.stdout, /^scopes of carol set to clients:read \(were: clients:read clients:write\) in .*\nevery gateway on it applies them within a second/)
    // measured from the command's exit: the gateway may have heard it earlier, never later than 1 s
    const since = Date.now()
    let status = 201
    while (status === 201 && Date.now() - since < 1000) status = await write()
    t.equal(status, 403, `refused ${Date.now() - since} ms after the command returned`)
    t.equal((await sendSigned(gw.url, { keys: laptop, token: carol, method: 'GET', target: '/v1/clients/' })).status, 200, 'reading still passes')
    t.equal((await inProcess(['users', 'scopes', 'carol'], env)).stdout, 'scopes of carol: clients:read\n', 'without scopes: shows them')
  })

  t.test('the listings show scopes', async (t) => {
    const users = await inProcess(['users', 'list'], env)
    t.match(users.stdout, /^USERNAME .* SCOPES\ncarol .* 1 +1 +clients:read\n1 user\n$/)
    t.match(JSON.parse((await inProcess(['users', 'list', '--json'], env)).stdout), [{ username: 'carol', scopes: ['clients:read'] }])
    const keys = (await inProcess(['keys', 'list'], env)).stdout.trimEnd().split('\n')
    t.match(keys[0], / SCOPES$/)
    t.match(keys[1], / clients:read clients:write$/, 'the key keeps its own scopes (what it may use is those its user still has)')
    t.match(JSON.parse((await inProcess(['keys', 'list', '--json'], env)).stdout), [{ apiKey: laptop.apiKey, scopes: ['clients:read', 'clients:write'] }])
    t.match((await inProcess(['keys', 'show', laptop.apiKey], env)).stdout, /\nscopes: +clients:read clients:write\n/)
    t.match(JSON.parse((await inProcess(['keys', 'show', laptop.apiKey, '--json'], env)).stdout), { scopes: ['clients:read', 'clients:write'] })
  })

  t.test('the client CLI: register --scopes A,B', async (t) => {
    const home = mkdtempSync(join(tmpdir(), 'keygate-scopes-home-'))
    t.teardown(() => { rmSync(home, { recursive: true, force: true }) })
    const clientEnv = { HOME: home, KEYGATE_URL: gw.url, KEYGATE_USER: 'carol', KEYGATE_PASSWORD: 'password-of-carol' }
    t.equal((await keygate(['keygen', '--name', 'reader'], '', clientEnv)).code, 0)
    const reader = await keygate(['register', '--name', 'reader', '--scopes', 'clients:read'], '', clientEnv)
    t.equal(reader.code, 0, reader.stderr)
    t.match(reader.stdout, /^[0-9a-f]{64}\n$/)
    t.match(reader.stderr, /^key "reader" registered, scopes: clients:read; apiKey saved to /)
    t.equal((await keygate(['keygen', '--name', 'writer'], '', clientEnv)).code, 0)
    const refused = await keygate(['register', '--name', 'writer', '--scopes', 'clients:read,clients:write'], '', clientEnv)
    t.equal(refused.code, 1, 'carol lost clients:write: a key cannot have it')
    t.match(refused.stderr, /VALIDATION_FAILED/)
    t.match(refused.stderr, /clients:write is not among the scopes of your user \(clients:read\)/)
  })

  t.test('--none takes them all; mistakes', async (t) => {
    t.match((await inProcess(['users', 'scopes', 'carol', '--none'], env)).stdout, /^scopes of carol set to none \(were: clients:read\)/)
    t.equal((await sendSigned(gw.url, { keys: laptop, token: carol, method: 'GET', target: '/v1/clients/' })).status, 403,
      'this process heard it at once (the same process as the gateway here)')
    const bad = await keygate(['users', 'scopes', 'carol', 'clients read'], '', env)
    t.equal(bad.code, 1)
    t.match(bad.stderr, /^VALIDATION_FAILED: scopes: "clients read" is not a scope: 1-64 letters, digits, ":", ".", "_", "-" or "\/" \(no spaces\)\n$/)
    const cases: Array<[string, string[], new (message: string) => Error, RegExp]> = [
      ['an unknown user', ['users', 'scopes', 'nobody', 'a'], Error, /^no user nobody in .*; create it with: users add nobody --scopes/],
      ['a bad scope', ['users', 'scopes', 'carol', 'a"b'], Error, /^scopes: "a\\"b" is not a scope: 1-64 letters/],
      ['scopes and --none', ['users', 'scopes', 'carol', 'a', '--none'], UsageError, /^users scopes: give scopes or --none, not both/],
      ['no NAME', ['users', 'scopes'], UsageError, /^users scopes takes one argument or more\n\nusage:/],
      ['users add with a stray argument', ['users', 'add', 'dave', 'x'], UsageError, /^users add takes one argument\n\nusage:/]
    ]
    for (const [name, args, type, message] of cases) {
      const { error } = await inProcess(args, env)
      t.type(error, type, name)
      t.match(error?.message, message, name)
    }
    t.same((await gw.app.keygate.store.getUser('carol'))?.scopes, [], 'no refused command changed anything')
  })
})
